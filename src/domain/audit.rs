//! What the audit trail keeps of an operator's request (docs/DESIGN.md §5.11): its
//! parameters without any secret.

use serde_json::Value;

/// True for a field name that may carry a secret: anything naming a secret, a token,
/// a password or a key (`secret`, `previous_secret`, `api_token`, …), whatever the case.
pub fn is_secret_field(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["secret", "token", "password", "key", "authorization"]
        .iter()
        .any(|word| name.contains(word))
}

/// `value` with every field [`is_secret_field`] names removed, at any depth.
pub fn without_secrets(value: Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .filter(|(name, _)| !is_secret_field(name))
                .map(|(name, value)| (name, without_secrets(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_secrets).collect()),
        other => other,
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
                "url": "https://example.com/hook",
                "enabled": true,
                "nested": [{"keep": 1}],
            })
        );
        assert_eq!(without_secrets(json!("secret")), json!("secret"));
    }
}
