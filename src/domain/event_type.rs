//! Event types (docs/DESIGN.md §5.13): the name a job's event has (`shipment.delivered`,
//! sent as the `webhook-event-type` header) and the patterns a subscriber subscribes
//! with: a name matches itself, and a pattern ending in the wildcard `*` matches every
//! name that starts with what comes before it (`shipment.*`, or `*` for every name).
//! The store matches by looking up [`candidate_patterns`], so a fan-out by type reads
//! an index instead of every subscriber.

use std::collections::HashSet;

use super::field_error::FieldError;
use super::validate::MAX_LIST_ERRORS;

/// Longest event type name, in bytes.
pub const MAX_EVENT_TYPE_LEN: usize = 128;

/// Most patterns one subscriber subscribes with.
pub const MAX_EVENT_TYPES_PER_SUBSCRIBER: usize = 100;

/// The wildcard, allowed once, as a pattern's last character.
pub const WILDCARD: char = '*';

/// An event type name: 1–128 characters from `A–Z a–z 0–9 . _ : -` (the characters
/// of subscriber ids; safe in a header and a query string without escaping).
pub fn event_type(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_EVENT_TYPE_LEN {
        return Err(format!("must be 1 to {MAX_EVENT_TYPE_LEN} characters long"));
    }
    if !name.bytes().all(allowed) {
        return Err("may only contain A-Z, a-z, 0-9, '.', '_', ':' and '-'".into());
    }
    Ok(())
}

fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-')
}

/// A subscription pattern: an [`event_type`] name, or a prefix of one followed by
/// [`WILDCARD`] (`shipment.*`, `ship*`, `*`); at most 128 characters in all.
pub fn pattern(text: &str) -> Result<(), String> {
    let Some(prefix) = text.strip_suffix(WILDCARD) else {
        return event_type(text).map_err(|message| {
            if text.contains(WILDCARD) {
                "may only have `*` as its last character (a wildcard such as `shipment.*`)".into()
            } else {
                message
            }
        });
    };
    if text.len() > MAX_EVENT_TYPE_LEN {
        return Err(format!("must be 1 to {MAX_EVENT_TYPE_LEN} characters long"));
    }
    if !prefix.bytes().all(allowed) {
        return Err(
            "may only contain A-Z, a-z, 0-9, '.', '_', ':' and '-', and `*` as its last \
             character"
                .into(),
        );
    }
    Ok(())
}

/// Each pattern of a subscriber's `event_types` given as `field`: a valid [`pattern`],
/// named once, at most [`MAX_EVENT_TYPES_PER_SUBSCRIBER`] of them. One error per bad
/// item, named `field[n]`, at most [`MAX_LIST_ERRORS`]; empty when all are good.
pub fn pattern_list(patterns: &[String], field: &str) -> Vec<FieldError> {
    if patterns.len() > MAX_EVENT_TYPES_PER_SUBSCRIBER {
        return vec![FieldError::new(
            field,
            format!(
                "names {} event types; at most {MAX_EVENT_TYPES_PER_SUBSCRIBER}",
                patterns.len()
            ),
        )];
    }
    let mut errors = Vec::new();
    let mut seen = HashSet::with_capacity(patterns.len());
    for (n, text) in patterns.iter().enumerate() {
        let named = || format!("{field}[{n}]");
        if let Err(message) = pattern(text) {
            errors.push(FieldError::new(named(), message));
        } else if !seen.insert(text.as_str()) {
            errors.push(FieldError::new(named(), format!("repeats `{text}`")));
        }
        if errors.len() >= MAX_LIST_ERRORS {
            break;
        }
    }
    errors
}

/// Whether `pattern` matches event type `name`: equal, or `pattern` ends in `*` and
/// `name` starts with the rest of it.
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix(WILDCARD) {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Every pattern that matches event type `name` (a valid [`event_type`]): `name`
/// itself and each of its prefixes, the empty one included, followed by `*`; `len + 2`
/// patterns, at most 130.
pub fn candidate_patterns(name: &str) -> Vec<String> {
    let mut patterns = Vec::with_capacity(name.len() + 2);
    patterns.push(name.to_owned());
    // Names are ASCII (checked by `event_type`), so every byte index is a boundary.
    for end in 0..=name.len() {
        if name.is_char_boundary(end) {
            patterns.push(format!("{}{WILDCARD}", &name[..end]));
        }
    }
    patterns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_take_the_characters_of_ids() {
        assert!(event_type("shipment.delivered").is_ok());
        assert!(event_type("a:b_c-D.9").is_ok());
        assert!(event_type("").is_err());
        assert!(event_type(&"a".repeat(129)).is_err());
        assert!(event_type(&"a".repeat(128)).is_ok());
        for bad in ["ship ment", "ship*", "ship/ment", "é", "a\nb"] {
            assert!(event_type(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn patterns_allow_one_trailing_wildcard() {
        for good in ["*", "shipment.*", "ship*", "shipment.delivered"] {
            assert!(pattern(good).is_ok(), "{good:?}");
        }
        for bad in ["**", "*.delivered", "ship*ment", "", "ship ment*"] {
            assert!(pattern(bad).is_err(), "{bad:?}");
        }
        let message = pattern("*.delivered").unwrap_err();
        assert!(message.contains("last character"), "{message}");
    }

    #[test]
    fn matching_is_exact_or_by_prefix() {
        assert!(matches("shipment.delivered", "shipment.delivered"));
        assert!(!matches("shipment.delivered", "shipment.delivered.late"));
        assert!(matches("shipment.*", "shipment.delivered"));
        assert!(!matches("shipment.*", "shipment"));
        assert!(!matches("shipment.*", "invoice.paid"));
        assert!(matches("*", "invoice.paid"));
    }

    #[test]
    fn the_candidates_are_the_patterns_that_match() {
        let name = "ab.c";
        let candidates = candidate_patterns(name);
        assert_eq!(
            candidates,
            ["ab.c", "*", "a*", "ab*", "ab.*", "ab.c*"].map(String::from)
        );
        assert!(candidates.iter().all(|p| matches(p, name)));
        // and every matching pattern of the alphabet {a, b, ., c} is among them
        for p in ["a", "ab", "ab.", "b*", "ab.c.*", "abc*"] {
            assert_eq!(candidates.contains(&p.to_string()), matches(p, name), "{p}");
        }
    }

    #[test]
    fn a_list_names_each_bad_item() {
        let list = ["a.*", "a.*", "b c"].map(String::from);
        let errors = pattern_list(&list, "event_types");
        let fields: Vec<_> = errors.iter().map(|e| e.field.clone()).collect();
        assert_eq!(fields, ["event_types[1]", "event_types[2]"]);
        let many: Vec<String> = (0..101).map(|n| format!("t{n}")).collect();
        assert_eq!(pattern_list(&many, "event_types")[0].field, "event_types");
    }
}
