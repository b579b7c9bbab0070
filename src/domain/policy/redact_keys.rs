//! How a key's name is spelled in the texts receivers echo back, for the redaction of
//! secret pairs (docs/DESIGN.md §3 "Redaction"): a key is read through the escapes that
//! spell its letters (`pass\u0077ord`, `pass&#119;ord`) and the invisible characters
//! inside it (`pass<U+00AD>word`), so that it is compared with the secret key names as
//! a reader sees it. Tables, so that another spelling is another row.

use super::is_key_byte;

/// Characters that show nothing and are dropped from a key's name: the soft hyphen
/// (U+00AD), the zero-width space, non-joiner and joiner (U+200B to U+200D), the word
/// joiner (U+2060) and the zero-width no-break space or byte order mark (U+FEFF).
const INVISIBLE: [char; 6] = [
    '\u{AD}', '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}',
];

/// HTML named character references (case-sensitive, as HTML reads them) for characters
/// a key may hold or hide; letters and digits have none, only numeric ones (`&#119;`).
const NAMED_REFERENCES: [(&[u8], char); 7] = [
    (b"&lowbar;", '_'),
    (b"&period;", '.'),
    (b"&shy;", '\u{AD}'),
    (b"&ZeroWidthSpace;", '\u{200B}'),
    (b"&zwnj;", '\u{200C}'),
    (b"&zwj;", '\u{200D}'),
    (b"&NoBreak;", '\u{2060}'),
];

/// The key that starts at `at`: its end, and its name as compared with the secret key
/// names (the bytes of the key, with `\uXXXX`, `\xHH`, `&#NNN;`, `&#xHH;` and the
/// [`NAMED_REFERENCES`] decoded, and [`INVISIBLE`] characters dropped). A key starts
/// with a character it names, not an invisible one; an escape of anything else (a
/// quote, `=`, a blank) ends it. The name is empty when no key starts at `at`.
pub(super) fn key_at(bytes: &[u8], at: usize) -> (usize, Vec<u8>) {
    let mut end = at;
    let mut name = Vec::new();
    loop {
        match unit_at(bytes, end) {
            Some((len, Some(byte))) => {
                name.push(byte);
                end += len;
            }
            Some((len, None)) if !name.is_empty() => end += len,
            _ => return (end, name),
        }
    }
}

/// The spelling at `at` of one character of a key: its length, and the key byte it
/// stands for (`None` for an invisible character, dropped).
fn unit_at(bytes: &[u8], at: usize) -> Option<(usize, Option<u8>)> {
    let &first = bytes.get(at)?;
    if is_key_byte(first) {
        return Some((1, Some(first)));
    }
    let (len, decoded) = escape_at(bytes, at).or_else(|| invisible_at(bytes, at))?;
    if INVISIBLE.contains(&decoded) {
        return Some((len, None));
    }
    u8::try_from(decoded)
        .ok()
        .filter(|byte| is_key_byte(*byte))
        .map(|byte| (len, Some(byte)))
}

/// An escape or character reference at `at`: its length and the character it spells.
fn escape_at(bytes: &[u8], at: usize) -> Option<(usize, char)> {
    let rest = &bytes[at..];
    fixed_escape(rest, b"\\u", 4)
        .or_else(|| fixed_escape(rest, b"\\x", 2))
        .or_else(|| numeric_reference(rest, b"&#x", 16))
        .or_else(|| numeric_reference(rest, b"&#", 10))
        .or_else(|| {
            NAMED_REFERENCES
                .iter()
                .find(|(spelling, _)| rest.starts_with(spelling))
                .map(|(spelling, c)| (spelling.len(), *c))
        })
}

/// `prefix` and exactly `digits` hex digits at the start of `rest` (`\u0077`, `\x77`).
fn fixed_escape(rest: &[u8], prefix: &[u8], digits: usize) -> Option<(usize, char)> {
    let hex = rest.strip_prefix(prefix)?.get(..digits)?;
    decode(hex, 16).map(|c| (prefix.len() + digits, c))
}

/// `prefix` (any ASCII case), digits in `radix` and `;` at the start of `rest`
/// (`&#119;`, `&#x77;`).
fn numeric_reference(rest: &[u8], prefix: &[u8], radix: u32) -> Option<(usize, char)> {
    rest.get(..prefix.len())
        .filter(|found| found.eq_ignore_ascii_case(prefix))?;
    let body = &rest[prefix.len()..];
    let count = body
        .iter()
        .take_while(|b| char::from(**b).is_digit(radix))
        .count();
    (body.get(count) == Some(&b';')).then_some(())?;
    decode(&body[..count], radix).map(|c| (prefix.len() + count + 1, c))
}

/// The character whose code `digits` (all of them digits in `radix`) spell.
fn decode(digits: &[u8], radix: u32) -> Option<char> {
    let all_digits = !digits.is_empty() && digits.iter().all(|b| char::from(*b).is_digit(radix));
    let digits = std::str::from_utf8(digits).ok().filter(|_| all_digits)?;
    char::from_u32(u32::from_str_radix(digits, radix).ok()?)
}

/// An [`INVISIBLE`] character written raw (UTF-8) at `at`: its length and itself.
fn invisible_at(bytes: &[u8], at: usize) -> Option<(usize, char)> {
    INVISIBLE.iter().find_map(|c| {
        let mut buffer = [0; 4];
        let spelling = c.encode_utf8(&mut buffer).as_bytes();
        bytes[at..]
            .starts_with(spelling)
            .then_some((spelling.len(), *c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> (usize, String) {
        let (end, name) = key_at(text.as_bytes(), 0);
        (end, String::from_utf8(name).unwrap())
    }

    #[test]
    fn a_key_is_read_through_escapes_and_references() {
        for (text, key, end) in [
            ("password=X", "password", 8),
            ("pass\\u0077ord\"", "password", 13),
            ("\\u0070assword:", "password", 13),
            ("pass\\x77ord=", "password", 11),
            ("pass&#119;ord=", "password", 13),
            ("pass&#X77;ord=", "password", 13),
            ("api&lowbar;key=", "api_key", 14),
        ] {
            assert_eq!(name(text), (end, key.to_owned()), "{text}");
        }
    }

    #[test]
    fn invisible_characters_inside_a_key_are_dropped() {
        for (text, end) in [
            ("pass\u{AD}word=", 10),
            ("pass\u{200B}word=", 11),
            ("pass\u{200C}word=", 11),
            ("pass\u{200D}word=", 11),
            ("pass\u{2060}word=", 11),
            ("pass\u{FEFF}word=", 11),
            ("pass\\u00adword=", 14),
            ("pass&shy;word=", 13),
            ("pass&#8203;word=", 15),
        ] {
            assert_eq!(name(text), (end, "password".to_owned()), "{text:?}");
        }
    }

    #[test]
    fn other_escapes_end_a_key_and_invisibles_start_none() {
        assert_eq!(name("password\\u0022:"), (8, "password".to_owned()));
        assert_eq!(name("password&#61;X"), (8, "password".to_owned()));
        assert_eq!(name("password&amp;"), (8, "password".to_owned()));
        assert_eq!(name("\u{AD}password"), (0, String::new()));
        assert_eq!(name("\\u0022password"), (0, String::new()));
        assert_eq!(name("\\u00zz"), (0, String::new()));
        assert_eq!(name("&#;"), (0, String::new()));
    }
}
