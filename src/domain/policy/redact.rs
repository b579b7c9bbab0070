//! Redacted excerpts of response bodies. DESIGN §3 keeps a response body "only as a
//! redacted excerpt": enough to diagnose (CASES C-06 wants `E42` kept), never a secret a
//! receiver echoed back. Hand-written scanning, no regex: every pattern is ASCII.

/// What replaces a secret.
const REDACTED: &str = "[redacted]";

/// A key whose name (lowercased, `-` and `.` read as `_`) contains one of these holds a
/// secret value.
const SECRET_KEY_PARTS: [&str; 11] = [
    "secret",
    "token",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "authorization",
    "private_key",
    "credential",
    "cookie",
    "session",
];

/// A key named exactly one of these holds a secret value.
const SECRET_KEYS: [&str; 3] = ["auth", "pwd", "pass"];

/// Bytes that end an unquoted value in any key form.
const VALUE_DELIMITERS: &[u8] = b"\r\n&;,\"'<>{}[]";

/// An excerpt of at most `max_bytes` bytes of `body`, safe to store and show.
///
/// The first `max_bytes` bytes are decoded as UTF-8 (invalid sequences become U+FFFD; a
/// character cut by the limit is dropped), then these are replaced by `[redacted]`:
/// - Standard Webhooks secrets: `whsec_` and the base64 that follows (any case);
/// - the credentials after `Bearer ` (RFC 6750 §2.1), the word `Bearer` is kept;
/// - JWT-like tokens: a word starting with `eyJ` (base64 of `{"`);
/// - the value of a key named like a secret (`secret`, `token`, `password`, `api_key`,
///   `authorization`, … see `SECRET_KEY_PARTS`) in `key=value` (up to a blank or
///   `& ; ,`), `key: value` (to the end of the line or `, ; &`) and JSON
///   `"key": "value"` (the quoted string) forms.
///
/// The result is cut again to `max_bytes` bytes on a character boundary, so it never
/// exceeds `max_bytes` even when `[redacted]` is longer than what it replaced.
pub fn redact_excerpt(body: &[u8], max_bytes: usize) -> String {
    let window = &body[..body.len().min(max_bytes)];
    let mut excerpt = redact(&decode_lossy(window));
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
        let word_start = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        let key_start = at == 0 || !is_key_byte(bytes[at - 1]);
        if let Some(end) = whsec_token(bytes, at) {
            out.push_str(REDACTED);
            at = end;
        } else if let Some((start, end)) = word_start.then(|| bearer(bytes, at)).flatten() {
            out.push_str(&text[at..start]);
            out.push_str(REDACTED);
            at = end;
        } else if let Some(end) = word_start.then(|| jwt(bytes, at)).flatten() {
            out.push_str(REDACTED);
            at = end;
        } else if let Some((start, end)) = key_start.then(|| secret_value(bytes, at)).flatten() {
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

/// True when `bytes` has `prefix` at `at`, ignoring ASCII case.
fn has_prefix(bytes: &[u8], at: usize, prefix: &[u8]) -> bool {
    bytes
        .get(at..at + prefix.len())
        .is_some_and(|found| found.eq_ignore_ascii_case(prefix))
}

/// The end of a `whsec_…` token starting at `at`.
fn whsec_token(bytes: &[u8], at: usize) -> Option<usize> {
    let from = at + b"whsec_".len();
    let end = has_prefix(bytes, at, b"whsec_").then(|| run_end(bytes, from, is_token_byte))?;
    (end > from).then_some(end)
}

/// The credentials of `Bearer <token>` starting at `at`: (start, end).
fn bearer(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let after_word = at + b"bearer".len();
    if !has_prefix(bytes, at, b"bearer") {
        return None;
    }
    let start = run_end(bytes, after_word, |b| b == b' ' || b == b'\t');
    let end = run_end(bytes, start, is_token_byte);
    (start > after_word && end > start).then_some((start, end))
}

/// The end of a JWT-like word (`eyJ…`) starting at `at`.
fn jwt(bytes: &[u8], at: usize) -> Option<usize> {
    let from = at + b"eyJ".len();
    let end = bytes
        .get(at..from)
        .is_some_and(|found| found == b"eyJ")
        .then(|| run_end(bytes, from, is_token_byte))?;
    (end > from).then_some(end)
}

/// When a key named like a secret starts at `at` and has a non-empty value: the value's
/// (start, end). A quoted value excludes its quotes.
fn secret_value(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let key_end = run_end(bytes, at, is_key_byte);
    if key_end == at || !is_secret_key(&bytes[at..key_end]) {
        return None;
    }
    let mut next = key_end;
    if matches!(bytes.get(next), Some(b'"' | b'\'')) {
        next += 1; // the closing quote of a JSON key
    }
    next = skip_blanks(bytes, next);
    let separator = *bytes.get(next).filter(|b| matches!(b, b'=' | b':'))?;
    let start = skip_blanks(bytes, next + 1);
    let (start, end) = match bytes.get(start) {
        Some(&quote @ (b'"' | b'\'')) => (start + 1, quoted_end(bytes, start + 1, quote)),
        _ => (start, unquoted_end(bytes, start, separator)),
    };
    (end > start).then_some((start, end))
}

/// True when `key` names a secret.
fn is_secret_key(key: &[u8]) -> bool {
    let normal: String = key
        .iter()
        .map(|b| match b {
            b'-' | b'.' => '_',
            other => char::from(other.to_ascii_lowercase()),
        })
        .collect();
    SECRET_KEYS.contains(&normal.as_str())
        || SECRET_KEY_PARTS.iter().any(|part| normal.contains(part))
}

/// The first byte from `from` that is not a space or tab.
fn skip_blanks(bytes: &[u8], from: usize) -> usize {
    run_end(bytes, from, |b| b == b' ' || b == b'\t')
}

/// The closing `quote` of a string whose content starts at `from` (backslash escapes
/// honoured), or the end of the text when it is cut.
fn quoted_end(bytes: &[u8], from: usize, quote: u8) -> usize {
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

/// The end of an unquoted value: after `=` it stops at a blank, after `:` it runs to the
/// end of the line (an `Authorization: Basic …` value has a space); both stop at
/// [`VALUE_DELIMITERS`]. Trailing blanks are not part of it.
fn unquoted_end(bytes: &[u8], from: usize, separator: u8) -> usize {
    let stops_blank = separator == b'=';
    let end = run_end(bytes, from, |b| {
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
