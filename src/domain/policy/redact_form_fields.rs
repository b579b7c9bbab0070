//! Secret HTML form fields, for the redaction of response bodies (docs/DESIGN.md §3
//! "Redaction"): an error page that re-renders the form it was sent shows the password
//! in `<input name="password" value="…">`, where the key and the value are two
//! attributes of one tag, in any order and with anything between them. Configuration
//! files echoed back name a secret the same way: `<add key="Password" value="…"/>`
//! (.NET), or with the value as the element's content: `<entry key="password">…</entry>`
//! (Java properties), `<string name="password">…</string>` (Android resources).

use super::{is_secret_key, redact_keys::key_at};

/// Attributes that name a field; any key inside their value (`user[password]`) that
/// names a secret (`is_secret_key`, read through escapes and references) makes the
/// field secret.
const NAMING_ATTRIBUTES: [&[u8]; 3] = [b"name", b"id", b"key"];

/// Configuration elements whose text is their value when a `name` or `key` attribute
/// names a secret (`<entry key="password">…</entry>`, Spring's `<prop key=…>`, `<env
/// name=…>`). Only these: an HTML element
/// named like a secret (`<p id="session-expired">…</p>`) holds the receiver's own
/// message, which must stay readable (issue #34's third probe).
const VALUE_ELEMENTS: [&[u8]; 19] = [
    b"entry",
    b"string",
    b"add",
    b"setting",
    b"item",
    b"property",
    b"prop",
    b"param",
    b"parameter",
    b"field",
    b"env",
    b"var",
    b"variable",
    b"value",
    b"option",
    b"arg",
    b"argument",
    b"secret",
    b"credential",
];

/// One attribute of a start tag: its name and the (start, end) of its value's content.
struct Attribute<'a> {
    name: &'a [u8],
    value: (usize, usize),
}

/// When an HTML or XML start tag opens at `at` (`<input …>`, any element) and names a
/// secret field (a [`NAMING_ATTRIBUTES`] value with a secret key in it, or
/// `type="password"`, any case): the (start, end) of its non-empty `value` attribute's
/// content, without its quotes; without a `value` attribute, of the element's text
/// content (to the next `<`, or the end of the text). Values are quoted with `"` or `'`
/// or unquoted (HTML §13.1.2.3); a tag cut by the end of the text is read as far as it
/// goes.
pub(super) fn secret_field_value(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let element_from = at + 1;
    (bytes.get(at) == Some(&b'<')).then_some(())?;
    bytes
        .get(element_from)
        .filter(|b| b.is_ascii_alphabetic())?;
    let element_end = element_from
        + bytes[element_from..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
    let (attributes, tag_end) = attributes(bytes, element_end);
    let value_of = |name: &[u8]| {
        attributes
            .iter()
            .find(|attribute| attribute.name.eq_ignore_ascii_case(name))
            .map(|attribute| &bytes[attribute.value.0..attribute.value.1])
    };
    let named_secret = NAMING_ATTRIBUTES
        .iter()
        .filter_map(|name| value_of(name))
        .any(names_a_secret);
    let password_type =
        value_of(b"type").is_some_and(|kind| kind.eq_ignore_ascii_case(b"password"));
    if !(named_secret || password_type) {
        return None;
    }
    let value = attributes
        .iter()
        .find(|attribute| attribute.name.eq_ignore_ascii_case(b"value"));
    let (start, end) = match value {
        Some(attribute) => attribute.value,
        // `<entry key="password">…</entry>`: the content; `<… />` has none.
        None if bytes.get(tag_end) == Some(&b'>')
            && bytes[..tag_end].last() != Some(&b'/')
            && VALUE_ELEMENTS
                .iter()
                .any(|name| name.eq_ignore_ascii_case(&bytes[element_from..element_end]))
            && [b"name".as_slice(), b"key"]
                .iter()
                .filter_map(|name| value_of(name))
                .any(names_a_secret) =>
        {
            let start = tag_end + 1;
            (start, run_end(bytes, start, |b| b != b'<'))
        }
        None => return None,
    };
    (end > start).then_some((start, end))
}

/// True when a key inside `value` (`password`, `user[password]`, `pass&#119;ord`) names
/// a secret.
fn names_a_secret(value: &[u8]) -> bool {
    let mut at = 0;
    while at < value.len() {
        let (end, name) = key_at(value, at);
        if is_secret_key(&name) {
            return true;
        }
        at = end.max(at + 1);
    }
    false
}

/// The attributes of a start tag whose element name ends at `from`, up to its `>` or
/// the end of the text, and where they end (at its `>`, or the end of the text).
fn attributes(bytes: &[u8], from: usize) -> (Vec<Attribute<'_>>, usize) {
    let space = |b: u8| b.is_ascii_whitespace();
    let mut found = Vec::new();
    let mut at = from;
    loop {
        at = run_end(bytes, at, |b| space(b) || b == b'/');
        if at >= bytes.len() || bytes[at] == b'>' {
            return (found, at);
        }
        let name_end = run_end(bytes, at, |b| !space(b) && !b"=>/".contains(&b));
        let name = &bytes[at..name_end.max(at + 1)];
        let equals = run_end(bytes, name_end, space);
        if bytes.get(equals) != Some(&b'=') {
            found.push(Attribute {
                name,
                value: (name_end, name_end),
            });
            at = name_end.max(at + 1);
            continue;
        }
        let value_from = run_end(bytes, equals + 1, space);
        let (value, next) = match bytes.get(value_from) {
            Some(&quote @ (b'"' | b'\'')) => {
                let start = value_from + 1;
                let end = run_end(bytes, start, |b| b != quote);
                ((start, end), end + 1)
            }
            _ => {
                let end = run_end(bytes, value_from, |b| !space(b) && b != b'>');
                ((value_from, end), end)
            }
        };
        found.push(Attribute { name, value });
        at = next;
    }
}

/// The end of the run of bytes from `from` that satisfy `keep`.
fn run_end(bytes: &[u8], from: usize, keep: impl Fn(u8) -> bool) -> usize {
    from.min(bytes.len())
        + bytes[from.min(bytes.len())..]
            .iter()
            .take_while(|b| keep(**b))
            .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hidden(text: &str) -> Option<&str> {
        secret_field_value(text.as_bytes(), 0).map(|(start, end)| &text[start..end])
    }

    #[test]
    fn reads_attributes_in_any_order_and_quoting() {
        assert_eq!(hidden(r#"<input name="password" value="X1">"#), Some("X1"));
        assert_eq!(
            hidden(r#"<INPUT VALUE='X2' class=a NAME='pwd'>"#),
            Some("X2")
        );
        assert_eq!(
            hidden("<input type=password value=X3 required>"),
            Some("X3")
        );
        assert_eq!(
            hidden(r#"<input name="user[password]" value="X4"/>"#),
            Some("X4")
        );
        assert_eq!(
            hidden(r#"<input id="api_key" disabled value="X5"#),
            Some("X5")
        );
    }

    #[test]
    fn ordinary_fields_and_empty_values_stay() {
        assert_eq!(hidden(r#"<input name="username" value="ann">"#), None);
        // Issue #34's second probe: configuration files.
        assert_eq!(hidden(r#"<add key="Password" value="X6"/>"#), Some("X6"));
        assert_eq!(hidden(r#"<entry key="password">X7</entry>"#), Some("X7"));
        assert_eq!(hidden(r#"<string name="password">X8</string>"#), Some("X8"));
        assert_eq!(hidden(r#"<prop key="password">X9</prop>"#), Some("X9"));
        assert_eq!(hidden(r#"<env name="DB_PASSWORD">X10</env>"#), Some("X10"));
        assert_eq!(hidden(r#"<entry key="user">ann</entry>"#), None);
        assert_eq!(hidden(r#"<input name="password"/>"#), None);
        assert_eq!(hidden(r#"<input name="password"></input>"#), None);
        // HTML elements named like a secret keep their text (the receiver's message).
        for text in [
            r#"<p class="error" id="session-expired">Your session expired.</p>"#,
            r#"<li name="password-rule">at least 8 characters</li>"#,
            r#"<td key="auth">failed for user ann</td>"#,
            r#"<input type="password" name="pw">Forgot your password?"#,
            r#"<entry id="password">kept: named by id</entry>"#,
        ] {
            assert_eq!(hidden(text), None, "{text}");
        }
        assert_eq!(hidden(r#"<input type="text" value="ann">"#), None);
        assert_eq!(hidden(r#"<input type="password" value="">"#), None);
        assert_eq!(hidden(r#"<input type="password">"#), None);
        assert_eq!(hidden("< input name=password value=X>"), None);
        assert_eq!(hidden("a < b"), None);
    }
}
