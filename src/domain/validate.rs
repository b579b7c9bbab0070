//! Rules for identifiers and target URLs that the API and the store share.

use std::collections::HashSet;

use url::Url;

use super::field_error::FieldError;

/// Longest subscriber id, in bytes.
pub const MAX_SUBSCRIBER_ID_LEN: usize = 128;
/// Longest event id, in bytes.
pub const MAX_EVENT_ID_LEN: usize = 256;
/// Longest subscriber URL, in bytes.
pub const MAX_URL_LEN: usize = 2048;

/// A subscriber id: 1–128 characters from `A–Z a–z 0–9 . _ : -` (safe in a URL path
/// segment without escaping), but not `.` or `..`: those are dot-segments, which
/// clients resolve away (RFC 3986 §5.2.4), so `Location: /v1/subscribers/..` would
/// name another resource; nor `resume` or `pause`, the bulk routes
/// ([`RESERVED_SUBSCRIBER_IDS`]).
pub fn subscriber_id(id: &str) -> Result<(), String> {
    path_id(id)?;
    if let Some(reserved) = RESERVED_SUBSCRIBER_IDS.iter().find(|r| **r == id) {
        return Err(format!(
            "must not be `{reserved}`: `/v1/subscribers/{reserved}` is the route that \
             {reserved}s subscribers in bulk"
        ));
    }
    Ok(())
}

/// A recurring schedule's id: the rules of a [`subscriber_id`] but for the reserved
/// name (no route of `/v1/schedules` takes a name of its own).
pub fn schedule_id(id: &str) -> Result<(), String> {
    path_id(id)
}

/// 1–128 characters from `A–Z a–z 0–9 . _ : -`, but not `.` or `..`.
fn path_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_SUBSCRIBER_ID_LEN {
        return Err(format!(
            "must be 1 to {MAX_SUBSCRIBER_ID_LEN} characters long"
        ));
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
    {
        return Err("may only contain A-Z, a-z, 0-9, '.', '_', ':' and '-'".into());
    }
    if id == "." || id == ".." {
        return Err("must not be `.` or `..` (URL path segments that clients resolve away)".into());
    }
    Ok(())
}

/// The names a subscriber may not take: its URL would be a bulk route's (`resume`
/// since issue #16, `pause` since issue #33).
pub const RESERVED_SUBSCRIBER_IDS: [&str; 2] = ["resume", "pause"];

/// Most errors [`subscriber_id_list`] reports: enough to fix a list, not a page per id.
pub const MAX_LIST_ERRORS: usize = 20;

/// Each id of a list given as `field` (`subscriber_ids` of a fan-out or a resume): a
/// valid [`subscriber_id`], named once. One error per bad item, named `field[n]`, at
/// most [`MAX_LIST_ERRORS`]; empty when every item is good. The list's length is the
/// caller's rule.
pub fn subscriber_id_list(ids: &[String], field: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen = HashSet::with_capacity(ids.len());
    for (n, id) in ids.iter().enumerate() {
        let named = || format!("{field}[{n}]");
        if let Err(message) = subscriber_id(id) {
            errors.push(FieldError::new(named(), message));
        } else if !seen.insert(id.as_str()) {
            errors.push(FieldError::new(named(), format!("repeats `{id}`")));
        }
        if errors.len() >= MAX_LIST_ERRORS {
            break;
        }
    }
    errors
}

/// An event id: 1–256 visible ASCII characters (0x21–0x7E), since it is sent as the
/// `webhook-id` header and signed as `{id}.{timestamp}.{body}`.
pub fn event_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_EVENT_ID_LEN {
        return Err(format!("must be 1 to {MAX_EVENT_ID_LEN} characters long"));
    }
    if !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("may only contain visible ASCII characters (no spaces)".into());
    }
    Ok(())
}

/// A subscriber URL: absolute `http` or `https` with a host, no credentials and no
/// fragment, at most 2048 bytes.
pub fn subscriber_url(text: &str) -> Result<Url, String> {
    if text.len() > MAX_URL_LEN {
        return Err(format!("must be at most {MAX_URL_LEN} bytes"));
    }
    let url = Url::parse(text).map_err(|e| format!("is not an absolute URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("must use http or https, not `{}`", url.scheme()));
    }
    if url.host().is_none() {
        return Err("must name a host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials; authenticate with the signature".into());
    }
    if url.fragment().is_some() {
        return Err("must not have a fragment".into());
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriber_ids() {
        assert!(subscriber_id("billing-svc.v2:eu_1").is_ok());
        assert!(subscriber_id("").is_err());
        assert!(subscriber_id("has space").is_err());
        assert!(subscriber_id("slash/inside").is_err());
        assert!(subscriber_id(&"a".repeat(129)).is_err());
        assert!(subscriber_id(&"a".repeat(128)).is_ok());
        assert!(subscriber_id(".").is_err());
        assert!(subscriber_id("..").is_err());
        assert!(subscriber_id("...").is_ok());
        assert!(subscriber_id(".hidden").is_ok());
    }

    #[test]
    fn event_ids() {
        assert!(event_id("cleanup:room-7:2026-11-30T00:00Z").is_ok());
        assert!(event_id("").is_err());
        assert!(event_id("two words").is_err());
        assert!(event_id("line\nbreak").is_err());
        assert!(event_id("é").is_err());
        assert!(event_id(&"e".repeat(257)).is_err());
    }

    #[test]
    fn urls() {
        assert!(subscriber_url("https://example.com/hooks?x=1").is_ok());
        assert!(subscriber_url("http://127.0.0.1:9000/").is_ok());
        for bad in [
            "ftp://example.com/",
            "example.com/hooks",
            "https://user:pw@example.com/",
            "https://example.com/#frag",
            "javascript:alert(1)",
            "file:///etc/passwd",
        ] {
            assert!(subscriber_url(bad).is_err(), "{bad} must be refused");
        }
    }
}
