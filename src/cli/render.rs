//! Plain-text tables for the operator commands: ASCII only, no colours, no terminal
//! width guessing, so the output reads the same in a terminal, a pipe or a log.

use std::io::{ErrorKind, Write};

use comfy_table::{Table, presets};
use serde_json::Value;

use super::client::CliError;

/// Shown for an absent value.
pub const NONE: &str = "-";

/// Writes `text` to standard output (flushed, so `--watch` lines show at once). A reader
/// that went away is [`CliError::OutputClosed`].
pub fn emit(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|error| match error.kind() {
            ErrorKind::BrokenPipe => CliError::OutputClosed,
            _ => CliError::Output(error),
        })
}

/// Writes `text` and a newline to standard output, as [`emit`].
pub fn line(text: impl std::fmt::Display) -> Result<(), CliError> {
    emit(&format!("{text}\n"))
}

/// A table with `header` over `rows`.
pub fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut table = Table::new();
    table.load_style(presets::ASCII_BORDERS_ONLY_CONDENSED);
    table.set_header(header.iter().copied());
    for row in rows {
        table.add_row(row);
    }
    table.to_string()
}

/// A two-column table of names and values, in the given order.
pub fn fields(rows: &[(&str, String)]) -> String {
    let mut table = Table::new();
    table.load_style(presets::ASCII_BORDERS_ONLY_CONDENSED);
    for (name, value) in rows {
        table.add_row(vec![(*name).to_owned(), value.clone()]);
    }
    table.to_string()
}

/// The value, or [`NONE`].
pub fn or_none(value: Option<impl ToString>) -> String {
    value.map_or_else(|| NONE.to_owned(), |v| v.to_string())
}

/// Pretty-printed JSON of the server's answer (numbers kept as written).
pub fn json(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The fields of a replay's filter, in the order they are shown.
const FILTER_ORDER: [&str; 9] = [
    "subscriber_id",
    "subscriber_ids",
    "event_id",
    "error_class",
    "last_status",
    "dead_reason",
    "dead_after",
    "dead_before",
    "all",
];

/// Items of a list a filter shows before it says how many more there are.
const LIST_SHOWN: usize = 5;

/// A replay's filter as `name=value` pairs, leaving out what is unset; `all` when it
/// selects every job; a list as `a,b,c` (its first [`LIST_SHOWN`] items, then how many
/// more). Fields a newer server adds come last.
pub fn filter(filter: &Value) -> String {
    let Some(object) = filter.as_object() else {
        return NONE.to_owned();
    };
    let known = FILTER_ORDER
        .iter()
        .filter_map(|name| object.get_key_value(*name));
    let others = object
        .iter()
        .filter(|(name, _)| !FILTER_ORDER.contains(&name.as_str()));
    let parts: Vec<String> = known
        .chain(others)
        .filter_map(|(name, value)| match value {
            Value::Null | Value::Bool(false) => None,
            Value::Bool(true) => Some(name.clone()),
            Value::String(text) => Some(format!("{name}={text}")),
            Value::Array(items) => Some(format!("{name}={}", list(items))),
            other => Some(format!("{name}={other}")),
        })
        .collect();
    if parts.is_empty() {
        NONE.to_owned()
    } else {
        parts.join(", ")
    }
}

/// `a,b,c`, or `a,b,c,d,e (+7 more)`.
fn list(items: &[Value]) -> String {
    let shown: Vec<String> = items
        .iter()
        .take(LIST_SHOWN)
        .map(|item| match item {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect();
    let mut text = shown.join(",");
    if items.len() > LIST_SHOWN {
        text.push_str(&format!(" (+{} more)", items.len() - LIST_SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_table_has_its_header_and_cells() {
        let text = table(&["id", "state"], [vec!["j1".into(), "dead".into()]]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines
                .iter()
                .any(|l| l.contains("id") && l.contains("state")),
            "{text}"
        );
        assert!(
            lines.iter().any(|l| l.contains("j1") && l.contains("dead")),
            "{text}"
        );
        assert!(text.is_ascii(), "{text}");
    }

    #[test]
    fn fields_keep_their_order() {
        let text = fields(&[("state", "dead".into()), ("attempts", "3".into())]);
        let state = text.find("state").unwrap();
        let attempts = text.find("attempts").unwrap();
        assert!(state < attempts, "{text}");
    }

    #[test]
    fn a_filter_shows_only_what_is_set() {
        let value = json!({"subscriber_id": "billing", "event_id": null,
                           "dead_reason": "deadline_exceeded", "all": false});
        assert_eq!(
            filter(&value),
            "subscriber_id=billing, dead_reason=deadline_exceeded"
        );
        assert_eq!(filter(&json!({"all": true, "event_id": null})), "all");
        assert_eq!(filter(&Value::Null), NONE);
    }

    #[test]
    fn a_filter_shows_a_long_list_shortened() {
        let ids: Vec<String> = (1..=12).map(|n| format!("s{n}")).collect();
        let value = json!({"subscriber_ids": ids, "error_class": "http_5xx",
                           "last_status": 503, "all": false});
        assert_eq!(
            filter(&value),
            "subscriber_ids=s1,s2,s3,s4,s5 (+7 more), error_class=http_5xx, last_status=503"
        );
        assert_eq!(
            filter(&json!({"subscriber_ids": ["a", "b"]})),
            "subscriber_ids=a,b"
        );
    }
}
