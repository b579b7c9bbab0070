//! How a key and its value are delimited in the texts receivers echo back, for the
//! redaction of secret pairs (docs/DESIGN.md §3): the spellings of a quote (raw,
//! backslash-escaped inside a JSON string, HTML character references, `\u` and `\x`
//! escapes) and of the separator between a key and its value (`=`, `:`, `=>`, also as
//! HTML character references). Tables, so that another spelling is another row.

/// How a quoted string's end is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Closing {
    /// The same quote byte, backslash escapes honoured (`"a\"b"`).
    Raw(u8),
    /// `\"`: a string inside a JSON string.
    Escaped,
    /// The same spelling again, in any ASCII case (`&quot;…&quot;`, `\u0022…\u0022`).
    Same,
}

/// One spelling of a quote.
#[derive(Debug)]
pub(super) struct Quote {
    /// The bytes as they appear in the text.
    pub spelling: &'static [u8],
    /// How its string ends.
    pub closing: Closing,
}

const fn quote(spelling: &'static [u8], closing: Closing) -> Quote {
    Quote { spelling, closing }
}

/// Every quote spelling, longest first among those sharing a first byte: JSON's and
/// single quotes; `\"` inside a JSON string; HTML's `&quot;`, `&#34;`, `&#x22;`,
/// `&apos;`, `&#39;`, `&#x27;` (a JSON body shown in an HTML error page); JSON's and
/// JavaScript's `\u0022`, `\u0027`, `\x22`, `\x27` (a JSON text escaped again by an
/// encoder that escapes quotes).
const QUOTES: [Quote; 13] = [
    quote(b"\\u0022", Closing::Same),
    quote(b"\\u0027", Closing::Same),
    quote(b"\\x22", Closing::Same),
    quote(b"\\x27", Closing::Same),
    quote(b"\\\"", Closing::Escaped),
    quote(b"&quot;", Closing::Same),
    quote(b"&#34;", Closing::Same),
    quote(b"&#x22;", Closing::Same),
    quote(b"&apos;", Closing::Same),
    quote(b"&#39;", Closing::Same),
    quote(b"&#x27;", Closing::Same),
    quote(b"\"", Closing::Raw(b'"')),
    quote(b"'", Closing::Raw(b'\'')),
];

/// The quote spelled at `at`, if any.
pub(super) fn quote_at(bytes: &[u8], at: usize) -> Option<&'static Quote> {
    QUOTES.iter().find(|q| starts_with(bytes, at, q.spelling))
}

/// True when an escaped quote that ends in a key byte (`\u0022`, `\x27`) ends just
/// before `at`: a key or a word may start at `at`, as after a raw quote.
pub(super) fn escaped_quote_ends_at(bytes: &[u8], at: usize) -> bool {
    QUOTES.iter().any(|q| {
        q.closing == Closing::Same
            && at >= q.spelling.len()
            && starts_with(bytes, at - q.spelling.len(), q.spelling)
    })
}

/// True when `at` lies inside an escaped quote's spelling (`\u0022`), whose letters and
/// digits start no key or word.
pub(super) fn inside_escaped_quote(bytes: &[u8], at: usize) -> bool {
    QUOTES.iter().any(|q| {
        q.closing == Closing::Same
            && (1..q.spelling.len())
                .any(|back| at >= back && starts_with(bytes, at - back, q.spelling))
    })
}

/// Where the string quoted by `quote`, whose content starts at `from`, ends: at its
/// closing quote, or the end of the text when it is cut.
pub(super) fn quoted_end(bytes: &[u8], from: usize, quote: &Quote) -> usize {
    match quote.closing {
        Closing::Raw(byte) => raw_quoted_end(bytes, from, byte),
        Closing::Escaped => find(bytes, from, b"\\\""),
        Closing::Same => find(bytes, from, quote.spelling),
    }
}

/// The closing `quote` of a string whose content starts at `from` (backslash escapes
/// honoured), or the end of the text when it is cut.
pub(super) fn raw_quoted_end(bytes: &[u8], from: usize, quote: u8) -> usize {
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b if b == quote => return at,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// The first `needle` (any ASCII case) at or after `from`, or the end of the text.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> usize {
    (from..bytes.len())
        .find(|&at| starts_with(bytes, at, needle))
        .unwrap_or(bytes.len())
}

/// True when `bytes` has `spelling` at `at`, ignoring ASCII case.
fn starts_with(bytes: &[u8], at: usize, spelling: &[u8]) -> bool {
    bytes
        .get(at..at + spelling.len())
        .is_some_and(|found| found.eq_ignore_ascii_case(spelling))
}

/// What separates a key from its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Separator {
    /// `key=value`: an unquoted value ends at a blank.
    Equals,
    /// `key: value`: an unquoted value runs to the end of the line.
    Colon,
    /// `key => value` (Ruby and PHP hashes, Perl, PHP's `print_r`): read as a `:`.
    Arrow,
}

impl Separator {
    /// The byte whose rules an unquoted value after this separator follows.
    pub(super) fn reads_as(self) -> u8 {
        match self {
            Separator::Equals => b'=',
            Separator::Colon | Separator::Arrow => b':',
        }
    }
}

/// Every separator spelling, longest first: assignments and comparisons of other
/// languages (`:=` of Go and Pascal, `==` and `===`, `?=` and `+=` of Makefiles, `||=`
/// and `&&=` of Ruby, `//=` of Perl, `.=` of PHP, `<-` and `<<-` of R) read as
/// `=`, so that their value is hidden whole rather than after their second character
/// (issue #34's third probe: `password := "…"` became `:[redacted] "…"`); `=>` before
/// `=`; `=&gt;` is an arrow in HTML, `->` one
/// too (Elixir, Perl's `->{password}` aside: it is an arrow whose value follows), and `=` and
/// `:` may be HTML character references (`&#61;`, `&#x3d;`, `&equals;`, `&#58;`,
/// `&#x3a;`, `&colon;`: a query string or pair quoted in an HTML page) or `\u` and
/// `\x` escapes (`password\u003dX`: a query string inside a JSON string whose encoder
/// escapes `=`, as Go's and Gson's do for HTML safety).
const SEPARATORS: [(&[u8], Separator); 29] = [
    (b":=", Separator::Equals),
    (b"===", Separator::Equals),
    (b"==", Separator::Equals),
    (b"&&=", Separator::Equals),
    (b"//=", Separator::Equals),
    (b".=", Separator::Equals),
    (b"?=", Separator::Equals),
    (b"+=", Separator::Equals),
    (b"||=", Separator::Equals),
    (b"<<-", Separator::Equals),
    (b"<-", Separator::Equals),
    (b"=>", Separator::Arrow),
    (b"->", Separator::Arrow),
    (b"-&gt;", Separator::Arrow),
    (b"=&gt;", Separator::Arrow),
    (b"=", Separator::Equals),
    (b"&#61;", Separator::Equals),
    (b"&#x3d;", Separator::Equals),
    (b"&equals;", Separator::Equals),
    (b":", Separator::Colon),
    (b"&#58;", Separator::Colon),
    (b"&#x3a;", Separator::Colon),
    (b"&colon;", Separator::Colon),
    (b"\\u003d\\u003e", Separator::Arrow),
    (b"\\u003d>", Separator::Arrow),
    (b"\\u003d", Separator::Equals),
    (b"\\x3d", Separator::Equals),
    (b"\\u003a", Separator::Colon),
    (b"\\x3a", Separator::Colon),
];

/// The spellings of an XML element's angle brackets (`<` and `>`): raw, as HTML
/// character references (`&lt;password&gt;`: an XML body shown in an HTML page), and as
/// `\u` and `\x` escapes (XML inside a JSON string whose encoder escapes them).
const ANGLES: [(&[u8], &[u8]); 5] = [
    (b"<", b">"),
    (b"&lt;", b"&gt;"),
    (b"&#60;", b"&#62;"),
    (b"\\u003c", b"\\u003e"),
    (b"\\x3c", b"\\x3e"),
];

/// The opening and closing angle spellings when one opens at `at` (any ASCII case).
pub(super) fn angles_at(bytes: &[u8], at: usize) -> Option<(&'static [u8], &'static [u8])> {
    ANGLES
        .iter()
        .find(|(open, _)| starts_with(bytes, at, open))
        .copied()
}

/// The separator spelled at `at` and its length: a spelling of [`SEPARATORS`], or a
/// numeric character reference to `=` or `:` with any number of leading zeros
/// (`&#0061;`, `&#x0003D;`: issue #34's second probe).
pub(super) fn separator_at(bytes: &[u8], at: usize) -> Option<(Separator, usize)> {
    let listed = SEPARATORS
        .iter()
        .find(|(spelling, _)| starts_with(bytes, at, spelling))
        .map(|(spelling, separator)| (*separator, spelling.len()));
    listed.or_else(|| match numeric_reference_at(bytes, at)? {
        ('=', len) => Some((Separator::Equals, len)),
        (':', len) => Some((Separator::Colon, len)),
        _ => None,
    })
}

/// The character an HTML numeric character reference at `at` spells (`&#61;`,
/// `&#x3D;`, `&#0061;`; at most 8 digits and the `;`) and its length.
fn numeric_reference_at(bytes: &[u8], at: usize) -> Option<(char, usize)> {
    let rest = bytes.get(at..)?.strip_prefix(b"&#")?;
    let (radix, digits_from) = match rest.first() {
        Some(b'x' | b'X') => (16, 1),
        _ => (10, 0),
    };
    let digits = rest[digits_from..]
        .iter()
        .take(9)
        .take_while(|b| b.is_ascii_hexdigit())
        .count();
    let end = digits_from + digits;
    if digits == 0 || digits > 8 || rest.get(end) != Some(&b';') {
        return None;
    }
    let text = std::str::from_utf8(&rest[digits_from..end]).ok()?;
    let code = u32::from_str_radix(text, radix).ok()?;
    Some((char::from_u32(code)?, 2 + end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_read_in_every_spelling() {
        for (text, spelling) in [
            ("\"a", "\""),
            ("'a", "'"),
            ("\\\"a", "\\\""),
            ("&quot;a", "&quot;"),
            ("&QUOT;a", "&quot;"),
            ("&#34;a", "&#34;"),
            ("&#X22;a", "&#x22;"),
            ("\\u0022a", "\\u0022"),
            ("\\x27a", "\\x27"),
        ] {
            let found = quote_at(text.as_bytes(), 0).expect(text);
            assert_eq!(found.spelling, spelling.as_bytes(), "{text}");
        }
        for text in ["a", "&amp;", "\\n", "\\u0041", "&"] {
            assert!(quote_at(text.as_bytes(), 0).is_none(), "{text}");
        }
    }

    #[test]
    fn a_string_ends_at_its_own_closing_quote() {
        fn end(text: &str) -> &str {
            let quote = quote_at(text.as_bytes(), 0).unwrap();
            let from = quote.spelling.len();
            &text[from..quoted_end(text.as_bytes(), from, quote)]
        }
        assert_eq!(end(r#""a\"b" c"#), r#"a\"b"#);
        assert_eq!(end(r#"\"a\" b"#), "a");
        assert_eq!(end("&quot;a\"b&QUOT; c"), "a\"b");
        assert_eq!(end("\\u0022a'b\\u0022"), "a'b");
        assert_eq!(end("&#34;cut"), "cut");
    }

    #[test]
    fn escaped_quotes_start_keys_after_them_not_inside_them() {
        let text = b"\\u0022password";
        assert!(escaped_quote_ends_at(text, 6));
        assert!((1..6).all(|at| inside_escaped_quote(text, at)));
        assert!(!inside_escaped_quote(text, 6));
        assert!(!escaped_quote_ends_at(b"\"password", 1));
    }

    #[test]
    fn separators_arrow_before_equals() {
        assert_eq!(separator_at(b"=> x", 0), Some((Separator::Arrow, 2)));
        assert_eq!(separator_at(b"=&gt; x", 0), Some((Separator::Arrow, 5)));
        assert_eq!(separator_at(b"=x", 0), Some((Separator::Equals, 1)));
        assert_eq!(separator_at(b": x", 0), Some((Separator::Colon, 1)));
        assert_eq!(separator_at(b"&#61;x", 0), Some((Separator::Equals, 5)));
        assert_eq!(separator_at(b"&#X3D;x", 0), Some((Separator::Equals, 6)));
        assert_eq!(separator_at(b"&equals;x", 0), Some((Separator::Equals, 8)));
        assert_eq!(separator_at(b"&#58;x", 0), Some((Separator::Colon, 5)));
        assert_eq!(separator_at(b"-> x", 0), Some((Separator::Arrow, 2)));
        assert_eq!(separator_at(b"- x", 0), None);
        assert_eq!(separator_at(b"&#0061;x", 0), Some((Separator::Equals, 7)));
        assert_eq!(separator_at(b"&#x0003D;x", 0), Some((Separator::Equals, 9)));
        assert_eq!(separator_at(b"&#x003a;x", 0), Some((Separator::Colon, 8)));
        assert_eq!(separator_at(b"&#0062;x", 0), None);
        assert_eq!(
            separator_at(b"&#000000061;x", 0),
            None,
            "more than 8 digits"
        );
        assert_eq!(separator_at(b"\\u003dx", 0), Some((Separator::Equals, 6)));
        assert_eq!(separator_at(b"\\U003Dx", 0), Some((Separator::Equals, 6)));
        assert_eq!(
            separator_at(b"\\u003d\\u003e x", 0),
            Some((Separator::Arrow, 12))
        );
        assert_eq!(separator_at(b"\\x3a x", 0), Some((Separator::Colon, 4)));
        assert_eq!(separator_at(b"\\u0041", 0), None);
    }

    #[test]
    fn angles_in_every_spelling() {
        assert_eq!(angles_at(b"<a>", 0), Some((&b"<"[..], &b">"[..])));
        assert_eq!(angles_at(b"&LT;a&gt;", 0).map(|a| a.1), Some(&b"&gt;"[..]));
        assert_eq!(
            angles_at(b"\\u003ca", 0).map(|a| a.1),
            Some(&b"\\u003e"[..])
        );
        assert_eq!(angles_at(b"&amp;", 0), None);
    }
}
