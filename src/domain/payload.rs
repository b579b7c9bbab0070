//! Payload rules: the producer's JSON text is kept byte for byte; two payloads are
//! "the same" when they are equal JSON values.

use serde_json::Value;

/// True when both texts parse as JSON and denote the same value: whitespace, object
/// key order and string escapes (`\u00e9` vs `é`) do not matter. Numbers compare by
/// their exact text (serde_json's `arbitrary_precision`), so no precision is lost on
/// large integers and `1`, `1.0` and `1e0` all differ.
pub fn same_json_value(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_and_key_order_do_not_matter() {
        assert!(same_json_value(
            r#"{"a":1,"b":[1,2]}"#,
            r#"{ "b": [1, 2], "a": 1 }"#
        ));
        assert!(same_json_value(r#""\u00e9""#, r#""é""#));
    }

    #[test]
    fn different_values_differ() {
        assert!(!same_json_value(r#"{"a":1}"#, r#"{"a":2}"#));
        assert!(!same_json_value(r#"{"a":1}"#, r#"{"a":1.0}"#));
        assert!(!same_json_value(r#"[1,2]"#, r#"[2,1]"#));
        assert!(!same_json_value("{", "{"));
        assert!(!same_json_value(
            r#"{"n":123456789012345678901}"#,
            r#"{"n":123456789012345678902}"#
        ));
    }

    #[test]
    fn numbers_beyond_f64_still_equal_themselves() {
        assert!(same_json_value(r#"{"x":1e400}"#, r#"{ "x": 1e400 }"#));
        assert!(same_json_value(
            "12345678901234567890123",
            "12345678901234567890123"
        ));
    }
}
