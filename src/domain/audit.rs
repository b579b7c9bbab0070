//! What the audit trail keeps of an operator's request (docs/DESIGN.md §5.11): its
//! parameters without any secret, and of a URL only its origin (a URL's path and query
//! may carry a credential: `?access_token=…`, a Slack-style secret path).

use serde_json::Value;

/// What replaces a URL's path and query in the trail.
pub const ELIDED_PATH: &str = "/…";

/// True for a field name that may carry a secret: anything naming a secret, a token,
/// a password or a key (`secret`, `previous_secret`, `api_token`, …), whatever the case.
pub fn is_secret_field(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["secret", "token", "password", "key", "authorization"]
        .iter()
        .any(|word| name.contains(word))
}

/// `value` with every field [`is_secret_field`] names removed, at any depth, and every
/// text field named `url` cut to its origin ([`origin_only`]).
pub fn without_secrets(value: Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .filter(|(name, _)| !is_secret_field(name))
                .map(|(name, value)| match value {
                    Value::String(url) if name.eq_ignore_ascii_case("url") => {
                        (name, Value::String(origin_only(&url)))
                    }
                    value => (name, without_secrets(value)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_secrets).collect()),
        other => other,
    }
}

/// `url`'s scheme, host and port, then [`ELIDED_PATH`] when it had more (user
/// information is dropped too); `…` for text that is not a URL.
pub fn origin_only(url: &str) -> String {
    let Ok(parsed) = url::Url::parse(url) else {
        return "…".to_owned();
    };
    let origin = parsed.origin().ascii_serialization();
    let more = parsed.path() != "/" || parsed.query().is_some() || parsed.fragment().is_some();
    if origin == "null" {
        return "…".to_owned();
    }
    if more {
        format!("{origin}{ELIDED_PATH}")
    } else {
        origin
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secrets_go_at_any_depth_and_the_rest_stays() {
        let request = json!({
            "url": "https://example.com/hook",
            "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "enabled": true,
            "nested": [{"Previous_Secret": "x", "api_token": "y", "keep": 1}],
        });
        assert_eq!(
            without_secrets(request),
            json!({
                "url": "https://example.com/…",
                "enabled": true,
                "nested": [{"keep": 1}],
            })
        );
        assert_eq!(without_secrets(json!("secret")), json!("secret"));
    }

    #[test]
    fn a_url_keeps_only_its_origin() {
        let cases = [
            (
                "https://hooks.example.com/a?access_token=abc",
                "https://hooks.example.com/…",
            ),
            (
                "https://user:pw@example.com:8443/",
                "https://example.com:8443",
            ),
            (
                "http://127.0.0.1:9000/services/T0/B0/XXXX",
                "http://127.0.0.1:9000/…",
            ),
            ("https://example.com#frag", "https://example.com/…"),
            ("not a url", "…"),
        ];
        for (url, kept) in cases {
            assert_eq!(origin_only(url), kept, "{url}");
            assert_eq!(without_secrets(json!({"URL": url}))["URL"], kept);
        }
    }
}
