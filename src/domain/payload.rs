//! Payload rules: the producer's JSON text is kept byte for byte; two payloads are
//! "the same" when they are equal JSON values.

use serde_json::Value;

/// True when both texts parse as JSON and denote the same value: whitespace and object
/// key order do not matter; `1` and `1.0` differ (an integer and a float), as do
/// strings with different escapes of different characters.
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
    }
}
