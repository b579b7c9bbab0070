//! Redacted excerpts of response bodies. docs/DESIGN.md §3 keeps a response body "only as a
//! redacted excerpt": enough to diagnose (CASES C-06 wants `E42` kept), never a secret a
//! receiver echoed back. Hand-written scanning, no regex: every pattern is ASCII, and
//! the few judgement calls (prose or field? word or credential?) read better as code.

use delimiters::{
    Closing, Separator, angles_at, escaped_quote_ends_at, inside_escaped_quote, quote_at,
    quoted_end, raw_quoted_end, separator_at,
};

#[path = "redact_delimiters.rs"]
mod delimiters;
#[path = "redact_form_fields.rs"]
mod form_fields;
#[path = "redact_keys.rs"]
mod redact_keys;

use form_fields::secret_field_value;
use redact_keys::key_at;

/// What replaces a secret.
const REDACTED: &str = "[redacted]";

/// A key whose name (lowercased, `-` and `.` read as `_`) contains one of these holds a
/// secret value (`client_secret`, `access_token`, `refresh_token`, `set_cookie`,
/// `X-Api-Key`, `stripeSecret`, `db_password`, … included).
const SECRET_KEY_PARTS: [&str; 14] = [
    "secret",
    "token",
    "password",
    "passwd",
    "passphrase",
    "api_key",
    "apikey",
    "authorization",
    "private_key",
    "privatekey",
    "credential",
    "cookie",
    "session",
    "signature",
];

/// A key with one of these as a whole segment (split at `_ - .` and lower-to-upper case
/// changes: `auth`, `X-Auth`, `basicAuth`, `db_pwd`) holds a secret value. As mere
/// substrings they would hit `author` or `unauthorized`.
const SECRET_KEY_SEGMENTS: [&str; 3] = ["auth", "pwd", "pass"];

/// Prefixes of well-known credentials (Stripe, GitHub, Slack, OpenAI, Anthropic),
/// matched at the start of a word in any case; the token that follows is hidden with
/// its prefix.
const TOKEN_PREFIXES: [&str; 21] = [
    "sk-proj-",
    "sk-svcacct-",
    "sk-admin-",
    "sk-ant-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "pk_live_",
    "pk_test_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
];

/// Short hyphenated prefixes of credentials, hidden (from the start of a word, any case)
/// only when at least this many token bytes follow, so that words like `sk-learn` stay:
/// OpenAI's older `sk-` keys (48 characters after the prefix) and GitLab's `glpat-`
/// personal access tokens (20).
const LONG_TOKEN_PREFIXES: [(&str, usize); 2] = [("sk-", 20), ("glpat-", 20)];

/// Prefixes of AWS access key ids, followed by 16 or more of `A-Z 0-9`.
const AWS_KEY_ID_PREFIXES: [&[u8]; 2] = [b"AKIA", b"ASIA"];

/// Words after `Bearer ` that are prose (`missing Bearer token`), not credentials.
const BEARER_PROSE: [&str; 7] = [
    "token",
    "tokens",
    "auth",
    "authentication",
    "authorization",
    "scheme",
    "header",
];

/// Bytes that end an unquoted value in any key form.
const VALUE_DELIMITERS: &[u8] = b"\r\n&;,\"'<>{}[]";

/// Bytes before a key (blanks skipped) that start a clause: a `key: value` there is a
/// field, not a phrase like `invalid token: E42`.
const CLAUSE_STARTS: &[u8] = b"\r\n,;{[(&?|\"'>";

/// An excerpt of at most `max_bytes` bytes of `body`, safe to store and show.
///
/// The first `max_bytes` bytes are decoded as UTF-8 (invalid sequences become U+FFFD; a
/// character cut by the limit is dropped), then these are replaced by `[redacted]`
/// (a token runs over base64/RFC 6750 bytes and `%XX` escapes, so `whsec_A%2BB` is
/// hidden whole):
/// - Standard Webhooks secrets: `whsec_` and the token that follows (any case);
/// - well-known credentials at the start of a word: Stripe `sk_live_`… (see
///   `TOKEN_PREFIXES`), GitHub `ghp_`…, `github_pat_`, Slack `xoxb-`…, AWS key ids
///   `AKIA`/`ASIA` + 16 or more `A-Z 0-9`;
/// - the credentials after `Bearer ` or `Basic ` (any case; the scheme word is kept),
///   unless they are prose: `Bearer token`, `Basic auth` (a lowercase or capitalised
///   word that is not the base64 of `user:pass`);
/// - JWT-like tokens: a word starting with `eyJ` (base64 of `{"`);
/// - OpenAI/Anthropic-style hyphenated keys: `sk-proj-`, `sk-svcacct-`, `sk-admin-`,
///   `sk-ant-` and what follows, and `sk-` or GitLab's `glpat-` followed by 20 or more
///   token bytes;
/// - the body of a PEM private key (`-----BEGIN … PRIVATE KEY-----` to `-----END`);
/// - the content of an XML element named like a secret (`<password>…</password>`,
///   `<wsse:Password …>`);
/// - the `value` attribute of an HTML form field named like a secret or of type
///   `password` (`<input name="password" value="…">`, attributes in any order; see
///   `redact_form_fields.rs`);
/// - the password of a URL's userinfo in any scheme (`postgres://user:[redacted]@db`);
/// - the quoted value of an HTTP Digest `response="…"` (RFC 7616);
/// - the value of a key named like a secret (`secret`, `token`, `password`, `api_key`,
///   `authorization`, `cookie`, … see `SECRET_KEY_PARTS` and `SECRET_KEY_SEGMENTS`) in
///   `key=value` (up to a blank or `& ; ,`), `key%3Dvalue` (percent-encoded, up to an
///   encoded or plain delimiter), `key: value` (to the end of the line or `, ; &`; a
///   cookie or signature header to the end of the line) and `"key": value` forms (JSON,
///   also with `'` quotes or `\"` inside a JSON string; any whitespace around the `:`);
///   `key => value` as `key: value` (Ruby, PHP and Perl hashes); quotes spelled as HTML
///   character references (`&quot;`, `&#34;`, `&#x27;`, …) or `\u0022`/`\x22` escapes
///   as raw ones; a bracketed key (`[password] => …` of PHP's `print_r`, to the end of
///   the line; `user[password]=…`) as a quoted one (see `redact_delimiters.rs`); `=`
///   and `:` spelled as HTML character references (`password&#61;…`, `&#x3d;`,
///   `&equals;`, `&#58;`); a key read through the escapes and references that spell its
///   letters (`pass\u0077ord`, `pass&#119;ord`) and without the invisible characters
///   inside it (soft hyphen, zero-width space, …; see `redact_keys.rs`). A
///   value that is an authorization scheme and its credentials (`token=Bearer …`) is
///   hidden with them. A quoted value loses its content, an array or object value is hidden whole (to the
///   matching bracket or the end of the text), a scalar to the next delimiter, and the
///   comma-separated items that follow a scalar with it (`sig=v1,<MAC>`) unless an item
///   is a pair of its own or reads as prose. A `key: value` inside a sentence
///   (`error: invalid token: E42`) is only hidden when the value does not read as a
///   word or short code.
///
/// The result is cut again to `max_bytes` bytes on a character boundary, so it never
/// exceeds `max_bytes` even when `[redacted]` is longer than what it replaced. A NUL
/// byte becomes U+FFFD: PostgreSQL text cannot hold it, and one binary answer must not
/// make a batch of outcomes unwritable.
pub fn redact_excerpt(body: &[u8], max_bytes: usize) -> String {
    let window = &body[..body.len().min(max_bytes)];
    let mut excerpt = redact(&decode_lossy(window).replace('\0', "\u{FFFD}"));
    let mut end = excerpt.len().min(max_bytes);
    while !excerpt.is_char_boundary(end) {
        end -= 1;
    }
    excerpt.truncate(end);
    excerpt
}

/// Lossy UTF-8, except that an incomplete character at the very end is dropped rather
/// than shown as U+FFFD (it was cut by the byte limit, not sent broken).
fn decode_lossy(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    loop {
        match std::str::from_utf8(bytes) {
            Ok(valid) => {
                out.push_str(valid);
                return out;
            }
            Err(error) => {
                let (valid, rest) = bytes.split_at(error.valid_up_to());
                out.push_str(&String::from_utf8_lossy(valid));
                match error.error_len() {
                    Some(len) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        bytes = &rest[len..];
                    }
                    None => return out,
                }
            }
        }
    }
}

/// `text` with every secret replaced by [`REDACTED`].
fn redact(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < bytes.len() {
        if let Some((start, end)) = secret_at(bytes, at) {
            out.push_str(&text[at..start]);
            out.push_str(REDACTED);
            at = end;
        } else {
            let len = text[at..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[at..at + len]);
            at += len;
        }
    }
    out
}

/// The (start, end) of a secret found at `at`; what lies between `at` and `start` (a
/// scheme word, a key and its separator) is kept. Every position is an ASCII byte, so
/// both are character boundaries.
fn secret_at(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    // A `%XX` escape (`%26`, `%3F`, …) ends a word or key like the byte it encodes; its
    // hex digits start none. So does an escaped quote (`\u0022password\u0022`): its
    // letters and digits start no key or word either.
    let after_escape = (at >= 3 && is_escape(bytes, at - 3)) || escaped_quote_ends_at(bytes, at);
    let in_escape = (at >= 1 && is_escape(bytes, at - 1)) || (at >= 2 && is_escape(bytes, at - 2));
    let in_quote = inside_escaped_quote(bytes, at);
    let word_start =
        !in_quote && (at == 0 || !bytes[at - 1].is_ascii_alphanumeric() || after_escape);
    let key_start =
        !in_escape && !in_quote && (at == 0 || !is_key_byte(bytes[at - 1]) || after_escape);
    let whole = |end| (at, end);
    whsec_token(bytes, at)
        .map(whole)
        .or_else(|| word_start.then(|| prefixed_token(bytes, at).map(whole))?)
        .or_else(|| word_start.then(|| aws_key_id(bytes, at).map(whole))?)
        .or_else(|| word_start.then(|| scheme_credentials(bytes, at))?)
        .or_else(|| word_start.then(|| jwt(bytes, at).map(whole))?)
        .or_else(|| pem_private_key(bytes, at))
        .or_else(|| xml_secret_element(bytes, at))
        .or_else(|| secret_field_value(bytes, at))
        .or_else(|| url_password(bytes, at))
        .or_else(|| key_start.then(|| digest_response(bytes, at))?)
        .or_else(|| key_start.then(|| secret_value(bytes, at))?)
}

/// True when a `%XX` escape (two hex digits) starts at `at`.
fn is_escape(bytes: &[u8], at: usize) -> bool {
    bytes.get(at) == Some(&b'%')
        && bytes
            .get(at + 1..at + 3)
            .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
}

/// The byte a `%XX` escape at `at` encodes.
fn escaped_byte(bytes: &[u8], at: usize) -> Option<u8> {
    let hex = std::str::from_utf8(bytes.get(at + 1..at + 3)?).ok()?;
    is_escape(bytes, at)
        .then(|| u8::from_str_radix(hex, 16).ok())
        .flatten()
}

/// A byte of a credential (RFC 6750 `b64token` and base64).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b)
}

/// A byte of a key name.
fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-.".contains(&b)
}

/// The end of the run of bytes from `from` that satisfy `keep`.
fn run_end(bytes: &[u8], from: usize, keep: impl Fn(u8) -> bool) -> usize {
    from + bytes[from..].iter().take_while(|b| keep(**b)).count()
}

/// The end of the token from `from`: token bytes and `%XX` escapes (a `%` cut by the end
/// of the text with what is left of its hex digits counts too).
fn token_end(bytes: &[u8], from: usize) -> usize {
    let mut at = from;
    loop {
        match bytes.get(at) {
            Some(&b) if is_token_byte(b) => at += 1,
            Some(b'%') => {
                let hex = &bytes[at + 1..bytes.len().min(at + 3)];
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return at;
                }
                at += 1 + hex.len();
            }
            _ => return at,
        }
    }
}

/// True when `bytes` has `prefix` at `at`, ignoring ASCII case.
fn has_prefix(bytes: &[u8], at: usize, prefix: &[u8]) -> bool {
    bytes
        .get(at..at + prefix.len())
        .is_some_and(|found| found.eq_ignore_ascii_case(prefix))
}

/// The end of a non-empty token after `prefix` at `at`.
fn token_after(bytes: &[u8], at: usize, prefix: &[u8]) -> Option<usize> {
    let from = at + prefix.len();
    let end = has_prefix(bytes, at, prefix).then(|| token_end(bytes, from))?;
    (end > from).then_some(end)
}

/// The end of a `whsec_…` token starting at `at`.
fn whsec_token(bytes: &[u8], at: usize) -> Option<usize> {
    token_after(bytes, at, b"whsec_")
}

/// The end of a token with one of the [`TOKEN_PREFIXES`] (or a long enough one with one
/// of the [`LONG_TOKEN_PREFIXES`]) starting at `at`.
fn prefixed_token(bytes: &[u8], at: usize) -> Option<usize> {
    TOKEN_PREFIXES
        .iter()
        .find_map(|prefix| token_after(bytes, at, prefix.as_bytes()))
        .or_else(|| {
            LONG_TOKEN_PREFIXES.iter().find_map(|(prefix, least)| {
                let end = token_after(bytes, at, prefix.as_bytes())?;
                (end - at - prefix.len() >= *least).then_some(end)
            })
        })
}

/// The body of a PEM private key (RFC 7468: `-----BEGIN … PRIVATE KEY-----`, any label
/// with `PRIVATE KEY`, as `RSA`, `EC`, `ENCRYPTED`, `OPENSSH` and PGP's `PRIVATE KEY
/// BLOCK`) starting at `at`: from after the BEGIN line to its `-----END`, or the end of
/// the text when it is cut. The two boundary lines are kept; certificates and public
/// keys are not secrets and stay.
fn pem_private_key(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    let label_from = at + BEGIN.len();
    bytes.get(at..label_from).filter(|found| *found == BEGIN)?;
    let label_end = run_end(bytes, label_from, |b| b.is_ascii_uppercase() || b == b' ');
    let label = &bytes[label_from..label_end];
    let private = label.windows(11).any(|w| w == b"PRIVATE KEY");
    let start = label_end + 5;
    if !private || bytes.get(label_end..start) != Some(b"-----") {
        return None;
    }
    let end = find(bytes, start, b"-----END").unwrap_or(bytes.len());
    (end > start).then_some((start, end))
}

/// The first `needle` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| from + i)
}

/// The content of an XML element named like a secret (`<password>`, `<wsse:Password
/// Type="…">`, `<apiKey>`; the local name, after any `ns:` prefix, is judged as a key)
/// whose start tag opens at `at`: everything up to its end tag (`</password>`, any
/// case), nested elements included. The brackets may be spelled as HTML references or
/// escapes (`&lt;password&gt;…&lt;/password&gt;`, `\u003cpassword\u003e`), the same
/// spelling throughout. Without an end tag (the excerpt cut it), content that runs to
/// the end of the text is hidden when it has no blank or opening bracket, as a cut
/// secret; otherwise (`use <token> here`) it is prose and stays.
fn xml_secret_element(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let (open, close) = angles_at(bytes, at)?;
    let name_start = at + open.len();
    let name_end = run_end(bytes, name_start, |b| is_key_byte(b) || b == b':');
    let name = &bytes[name_start..name_end];
    let local = name.rsplit(|b| *b == b':').next().unwrap_or(name);
    if local.is_empty() || !is_secret_key(local) {
        return None;
    }
    let blank_after = matches!(bytes.get(name_end), Some(b' ' | b'\t' | b'\r' | b'\n'));
    if !blank_after && !has_prefix(bytes, name_end, close) {
        return None;
    }
    let tag_end = (name_end..bytes.len()).find(|&i| has_prefix(bytes, i, close))?;
    if bytes[tag_end - 1] == b'/' {
        return None;
    }
    let start = tag_end + close.len();
    let end_tag_at = |i: usize| {
        has_prefix(bytes, i, open)
            && bytes.get(i + open.len()) == Some(&b'/')
            && has_prefix(bytes, i + open.len() + 1, name)
            && has_prefix(
                bytes,
                skip_whitespace(bytes, i + open.len() + 1 + name.len()),
                close,
            )
    };
    let cut = || {
        (start..bytes.len())
            .all(|i| !b" \t\r\n<".contains(&bytes[i]) && !has_prefix(bytes, i, open))
    };
    let end = match (start..bytes.len()).find(|&i| end_tag_at(i)) {
        Some(close) => close,
        None if cut() => bytes.len(),
        None => return None,
    };
    let blank = bytes[start..end].iter().all(u8::is_ascii_whitespace);
    (!blank).then_some((start, end))
}

/// The password of a URL's userinfo (`postgres://user:pass@host`, any scheme; also
/// with the `\/` escapes of some JSON encoders) when `://` starts at `at`: the bytes
/// between the first `:` and the last `@` of the authority (up to `/ ? #`, a blank, a
/// quote, `<`, `>` or `\`, RFC 3986 §3.2). The user name is kept.
fn url_password(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let after = [&b"://"[..], b":\\/\\/"]
        .iter()
        .find(|slashes| bytes[at..].starts_with(slashes))
        .map(|slashes| at + slashes.len())?;
    let authority_end = run_end(bytes, after, |b| !b"/?#\\\"'<> \t\r\n".contains(&b));
    let authority = &bytes[after..authority_end];
    let at_sign = after + authority.iter().rposition(|b| *b == b'@')?;
    let colon = after + bytes[after..at_sign].iter().position(|b| *b == b':')?;
    (at_sign > colon + 1).then_some((colon + 1, at_sign))
}

/// The quoted value of an HTTP Digest `response="…"` parameter (RFC 7616 §3.4: a hash
/// that proves the password, open to offline guessing) when its key starts at `at`;
/// also with `\"` quotes inside a JSON string. `response` in other forms (`"response":
/// …`, `response=ok`) is an ordinary word and stays.
fn digest_response(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let key_end = run_end(bytes, at, is_key_byte);
    if !bytes[at..key_end].eq_ignore_ascii_case(b"response") {
        return None;
    }
    let equals = skip_blanks(bytes, key_end);
    (bytes.get(equals) == Some(&b'=')).then_some(())?;
    let quote_from = skip_blanks(bytes, equals + 1);
    let quote = quote_at(bytes, quote_from)
        .filter(|quote| matches!(quote.closing, Closing::Raw(b'"') | Closing::Escaped))?;
    let start = quote_from + quote.spelling.len();
    let end = quoted_end(bytes, start, quote);
    (end > start).then_some((start, end))
}

/// The end of an AWS access key id (`AKIA` + 16 or more `A-Z 0-9`) starting at `at`.
fn aws_key_id(bytes: &[u8], at: usize) -> Option<usize> {
    let from = at + 4;
    bytes
        .get(at..from)
        .filter(|found| AWS_KEY_ID_PREFIXES.contains(found))?;
    let end = run_end(bytes, from, |b| {
        b.is_ascii_uppercase() || b.is_ascii_digit()
    });
    (end - from >= 16).then_some(end)
}

/// The credentials of `Bearer <token>` or `Basic <token>` starting at `at`: (start, end).
fn scheme_credentials(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let (scheme, basic) = if has_prefix(bytes, at, b"bearer") {
        (b"bearer".len(), false)
    } else if has_prefix(bytes, at, b"basic") {
        (b"basic".len(), true)
    } else {
        return None;
    };
    let start = skip_blanks(bytes, at + scheme);
    let end = token_end(bytes, start);
    if start == at + scheme || end == start {
        return None;
    }
    let credentials = &bytes[start..end];
    let prose = if basic {
        is_word(credentials) && credentials.len() < 16 && !is_base64_of_user_pass(credentials)
    } else {
        BEARER_PROSE
            .iter()
            .any(|word| credentials.eq_ignore_ascii_case(word.as_bytes()))
    };
    // `Bearer realm="api"` (a WWW-Authenticate challenge) has parameters, not a token.
    let parameter = credentials.strip_suffix(b"=").is_some_and(|name| {
        name.iter().all(u8::is_ascii_alphabetic) && bytes.get(end) == Some(&b'"')
    });
    (!prose && !parameter).then_some((start, end))
}

/// True when `word` is lowercase, capitalised or uppercase ASCII letters.
fn is_word(word: &[u8]) -> bool {
    let Some((first, rest)) = word.split_first() else {
        return false;
    };
    first.is_ascii_alphabetic()
        && (rest.iter().all(u8::is_ascii_lowercase) || word.iter().all(u8::is_ascii_uppercase))
}

/// True when `token` decodes as base64 (standard or URL-safe) to bytes with a `:`, as the
/// `user:pass` of Basic credentials (RFC 7617) do.
fn is_base64_of_user_pass(token: &[u8]) -> bool {
    let (mut bits, mut held) = (0u32, 0u32);
    for &b in token {
        let sextet = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => break,
        };
        bits = (bits << 6 | u32::from(sextet)) & 0x3fff;
        held += 6;
        if held >= 8 {
            held -= 8;
            if (bits >> held) & 0xff == u32::from(b':') {
                return true;
            }
        }
    }
    false
}

/// The end of a JWT-like word (`eyJ…`) starting at `at`.
fn jwt(bytes: &[u8], at: usize) -> Option<usize> {
    let from = at + b"eyJ".len();
    let end = bytes
        .get(at..from)
        .is_some_and(|found| found == b"eyJ")
        .then(|| token_end(bytes, from))?;
    (end > from).then_some(end)
}

/// When a key named like a secret starts at `at` and has a non-empty value: the value's
/// (start, end). A quoted value excludes its quotes; an array or object includes its
/// brackets. Quotes and separators are read in every spelling that
/// `redact_delimiters.rs` lists (`"password" => "X"`, `&quot;password&quot;:…`,
/// `\u0022password\u0022:…`); a key in brackets (`[password] => X` of PHP's `print_r`,
/// `user[password]=X` of a form) is read as a quoted one, and after `=>` its value runs
/// to the end of the line, as `print_r` writes it. The key's name is read as
/// `redact_keys.rs` spells it (`pass\u0077ord`, `pass&#119;ord`, invisible characters
/// dropped).
fn secret_value(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let (key_end, key) = key_at(bytes, at);
    let key = key.as_slice();
    if key.is_empty() || !is_secret_key(key) {
        return None;
    }
    let key_quote = quote_at(bytes, key_end);
    let bracketed = at > 0 && bytes[at - 1] == b'[' && bytes.get(key_end) == Some(&b']');
    let after_key = match key_quote {
        Some(quote) => key_end + quote.spelling.len(),
        None => key_end + usize::from(bracketed),
    };
    let quoted = key_quote.is_some() || bracketed;
    // `\"` opens a value only after a key quoted so: both are inside a JSON string.
    let escaped = key_quote.is_some_and(|quote| quote.closing == Closing::Escaped);
    if !quoted && has_prefix(bytes, after_key, b"%3D") {
        // `password%3Dhunter2`: a pair inside a percent-encoded URL or form.
        let start = after_key + 3;
        let end = encoded_value_end(bytes, start);
        return (end > start).then_some((start, end));
    }
    // A quoted key's value may follow on another line (JSON); a bracketed key's may not.
    let skip = if key_quote.is_some() {
        skip_whitespace
    } else {
        skip_blanks
    };
    let separator_from = skip(bytes, after_key);
    let (separator, separator_len) = separator_at(bytes, separator_from)?;
    let start = skip(bytes, separator_from + separator_len);
    let reads_as = separator.reads_as();
    let to_line_end = match separator {
        Separator::Colon => !quoted && is_whole_line_key(key),
        Separator::Arrow => bracketed,
        Separator::Equals => false,
    };
    let value_quote =
        quote_at(bytes, start).filter(|quote| quote.closing != Closing::Escaped || escaped);
    let (start, end) = match (value_quote, bytes.get(start)) {
        (Some(quote), _) => {
            let from = start + quote.spelling.len();
            (from, quoted_end(bytes, from, quote))
        }
        (None, Some(b'{' | b'[')) => (start, bracketed_end(bytes, start, !escaped)),
        (None, _) => {
            let end = unquoted_end(bytes, start, reads_as, to_line_end);
            // `token=Bearer X`: the scheme's credentials belong to the value.
            let end = scheme_credentials(bytes, start).map_or(end, |(_, after)| after.max(end));
            (start, list_end(bytes, end, reads_as))
        }
    };
    let empty = bytes[start..end].iter().all(|b| b"{}[] \t\r\n".contains(b));
    let phrase = separator == Separator::Colon
        && !quoted
        && is_word(key)
        && !at_clause_start(bytes, at)
        && reads_as_prose(first_word(bytes, start));
    (!empty && !phrase).then_some((start, end))
}

/// True when `key` names a secret.
fn is_secret_key(key: &[u8]) -> bool {
    let normal = normal_key(key);
    SECRET_KEY_PARTS.iter().any(|part| normal.contains(part))
        || key_segments(key).any(|segment| {
            SECRET_KEY_SEGMENTS
                .iter()
                .any(|secret| segment.eq_ignore_ascii_case(secret.as_bytes()))
        })
}

/// True when `key` names a header whose whole line is secret in its `key: value`
/// form: a cookie (its `;`-separated pairs) or a signature (Standard Webhooks'
/// `webhook-signature: v1,<MAC> v1,<MAC>`, GitHub's `sha256=<MAC>`).
fn is_whole_line_key(key: &[u8]) -> bool {
    let normal = normal_key(key);
    normal.contains("cookie") || normal.contains("signature")
}

/// The end of a secret scalar value that ended at `end`, with the items of a
/// comma-separated list that follow it (`token=a1b2,c3d4`, `sig: v1,<MAC>`): an item
/// is part of it unless it is empty, a pair of its own (`code=E42`, `code: E42`) or
/// reads as prose (`E42`, `and`).
fn list_end(bytes: &[u8], mut end: usize, separator: u8) -> usize {
    loop {
        let comma = skip_blanks(bytes, end);
        if bytes.get(comma) != Some(&b',') {
            break;
        }
        let item = skip_blanks(bytes, comma + 1);
        let item_end = unquoted_end(bytes, item, separator, false);
        if item_end == item || is_pair(bytes, item) || reads_as_prose(first_word(bytes, item)) {
            break;
        }
        end = item_end;
    }
    end
}

/// True when a `key: …` or `key=value` pair starts at `from` (`abc==`, base64 padding,
/// is not one).
fn is_pair(bytes: &[u8], from: usize) -> bool {
    let key_end = run_end(bytes, from, is_key_byte);
    let separator = skip_blanks(bytes, key_end);
    key_end > from
        && match bytes.get(separator) {
            Some(b':') => true,
            Some(b'=') => bytes
                .get(separator + 1)
                .is_some_and(|b| *b != b'=' && !VALUE_DELIMITERS.contains(b) && *b != b' '),
            _ => false,
        }
}

/// The end of a percent-encoded value from `from`: at a byte that ends an unquoted
/// value (a blank, `&`, [`VALUE_DELIMITERS`]) or an escape of one (`%26`, `%20`, …).
fn encoded_value_end(bytes: &[u8], from: usize) -> usize {
    let ends = |b: u8| VALUE_DELIMITERS.contains(&b) || b == b' ' || b == b'\t';
    let mut at = from;
    while let Some(&b) = bytes.get(at) {
        if ends(b) || escaped_byte(bytes, at).is_some_and(ends) {
            break;
        }
        at += 1;
    }
    at
}

/// `key` lowercased, with `-` and `.` read as `_`.
fn normal_key(key: &[u8]) -> String {
    key.iter()
        .map(|b| match b {
            b'-' | b'.' => '_',
            other => char::from(other.to_ascii_lowercase()),
        })
        .collect()
}

/// The parts of `key` split at `_ - .` and where a lowercase letter or digit is followed
/// by an uppercase one.
fn key_segments(key: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = key;
    std::iter::from_fn(move || {
        let start = rest.iter().position(|b| !b"_-.".contains(b))?;
        rest = &rest[start..];
        let len = (1..rest.len())
            .find(|&i| {
                b"_-.".contains(&rest[i])
                    || (rest[i].is_ascii_uppercase() && !rest[i - 1].is_ascii_uppercase())
            })
            .unwrap_or(rest.len());
        let (segment, tail) = rest.split_at(len);
        rest = tail;
        Some(segment)
    })
}

/// True when only blanks lie between a clause start (see [`CLAUSE_STARTS`]) or the start
/// of the text and `at`.
fn at_clause_start(bytes: &[u8], at: usize) -> bool {
    let before = bytes[..at].iter().rposition(|b| *b != b' ' && *b != b'\t');
    before.is_none_or(|i| CLAUSE_STARTS.contains(&bytes[i]))
}

/// The first word of a value starting at `from`, without trailing punctuation.
fn first_word(bytes: &[u8], from: usize) -> &[u8] {
    let end = run_end(bytes, from, |b| {
        !VALUE_DELIMITERS.contains(&b) && b != b' ' && b != b'\t'
    });
    let word = &bytes[from..end];
    let kept = word.len()
        - word
            .iter()
            .rev()
            .take_while(|b| b".!?):".contains(b))
            .count();
    &word[..kept]
}

/// True when `word` reads as prose rather than a secret: a lowercase or capitalised word
/// (`expired`, `Missing`, `ill-formed`), an error code of at most 8 uppercase letters,
/// digits and `_ -` starting with a letter (`E42`, `HTTP`, `ERR_42`), or a number of at
/// most 3 digits.
fn reads_as_prose(word: &[u8]) -> bool {
    let Some((first, rest)) = word.split_first() else {
        return false;
    };
    let lower_word = |b: &u8| b.is_ascii_lowercase() || b"-'".contains(b);
    let code_byte = |b: &u8| b.is_ascii_uppercase() || b.is_ascii_digit() || b"_-".contains(b);
    (first.is_ascii_alphabetic() && rest.iter().all(lower_word))
        || (first.is_ascii_uppercase() && word.len() <= 8 && rest.iter().all(code_byte))
        || (word.len() <= 3 && word.iter().all(u8::is_ascii_digit))
}

/// The first byte from `from` that is not a space or tab.
fn skip_blanks(bytes: &[u8], from: usize) -> usize {
    run_end(bytes, from, |b| b == b' ' || b == b'\t')
}

/// The first byte from `from` that is not JSON whitespace (blanks and line breaks).
fn skip_whitespace(bytes: &[u8], from: usize) -> usize {
    run_end(bytes, from, |b| b" \t\r\n".contains(&b))
}

/// The end of the array or object opening at `from`: just after its matching bracket, or
/// the end of the text when it is cut. With `strings`, brackets inside `"…"` are skipped.
fn bracketed_end(bytes: &[u8], from: usize, strings: bool) -> usize {
    let mut depth = 0usize;
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            b'"' if strings => at = raw_quoted_end(bytes, at + 1, b'"'),
            _ => {}
        }
        at += 1;
    }
    bytes.len()
}

/// The end of an unquoted value: after `=` it stops at a blank, after `:` it runs to the
/// end of the line (an `Authorization: Basic …` value has a space); both stop at
/// [`VALUE_DELIMITERS`], except that a `to_line_end` value (a `Cookie:` header, whose
/// `;`-separated pairs are all secret) only stops at a line break. Trailing blanks are
/// not part of it.
fn unquoted_end(bytes: &[u8], from: usize, separator: u8, to_line_end: bool) -> usize {
    let stops_blank = separator == b'=';
    let end = run_end(bytes, from, |b| {
        if to_line_end {
            return b != b'\r' && b != b'\n';
        }
        !VALUE_DELIMITERS.contains(&b) && !(stops_blank && (b == b' ' || b == b'\t'))
    });
    from + bytes[from..end]
        .iter()
        .rposition(|b| *b != b' ' && *b != b'\t')
        .map_or(0, |last| last + 1)
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "redact_probe_tests.rs"]
mod probe_tests;
