//! What a redacted excerpt hides, what it keeps, and how long it is.

use proptest::prelude::*;

use super::*;

fn redacted(text: &str) -> String {
    redact_excerpt(text.as_bytes(), 64 * 1024)
}

#[test]
fn hides_standard_webhooks_secrets() {
    let text = "bad signature for whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw== (E42)";
    assert_eq!(redacted(text), "bad signature for [redacted] (E42)");
    assert_eq!(redacted("key:xWHSEC_abc/+9"), "key:x[redacted]");
    assert_eq!(redacted("whsec_ alone"), "whsec_ alone");
}

#[test]
fn hides_bearer_credentials_and_keeps_the_scheme() {
    let text = "rejected Bearer abc.DEF-ghi_~+/= for E42";
    assert_eq!(redacted(text), "rejected Bearer [redacted] for E42");
    assert_eq!(redacted("bearer\tx1"), "bearer\t[redacted]");
    assert_eq!(redacted("a Bearer"), "a Bearer");
    assert_eq!(redacted("unbearer x1"), "unbearer x1");
}

#[test]
fn hides_jwt_like_tokens() {
    let jwt =
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    assert_eq!(
        redacted(&format!("got {jwt} (E42)")),
        "got [redacted] (E42)"
    );
    assert_eq!(redacted("keyJx"), "keyJx");
}

#[test]
fn hides_key_equals_value() {
    let cases = [
        ("token=abc123&x=1", "token=[redacted]&x=1"),
        ("password = hunter2 next", "password = [redacted] next"),
        ("API_KEY=k-1;rest", "API_KEY=[redacted];rest"),
        (
            "client_secret=\"two words\" E42",
            "client_secret=\"[redacted]\" E42",
        ),
        (
            "?access_token=a.b.c&code=E42",
            "?access_token=[redacted]&code=E42",
        ),
        ("pwd=x", "pwd=[redacted]"),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
}

#[test]
fn hides_key_colon_value() {
    let cases = [
        (
            "Authorization: Basic dXNlcjpwYXNz\r\nX-Code: E42",
            "Authorization: [redacted]\r\nX-Code: E42",
        ),
        (
            "client_secret: s3cr3t two , code: E42",
            "client_secret: [redacted] , code: E42",
        ),
        ("X-Api-Key:k1\nE42", "X-Api-Key:[redacted]\nE42"),
        ("webhook.secret : abc", "webhook.secret : [redacted]"),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
}

#[test]
fn hides_json_string_and_scalar_values() {
    let text = r#"{"error":"E42","access_token":"a\"b","Password": "p", "x-api-key":'k', "session_id": 12345, "n": 1}"#;
    let want = r#"{"error":"E42","access_token":"[redacted]","Password": "[redacted]", "x-api-key":'[redacted]', "session_id": [redacted], "n": 1}"#;
    assert_eq!(redacted(text), want);
    let nested = r#"{"credentials":{"user":"ann","password":"pw"}}"#;
    let want = r#"{"credentials":{"user":"ann","password":"[redacted]"}}"#;
    assert_eq!(redacted(nested), want);
}

#[test]
fn hides_a_value_cut_by_the_limit() {
    assert_eq!(
        redacted(r#"{"password":"hunter2"#),
        r#"{"password":"[redacted]"#
    );
    let text = "a whsec_abcdefghijklmnop tail";
    let excerpt = redact_excerpt(text.as_bytes(), 12);
    assert_eq!(excerpt, "a [redacted]");
    assert_eq!(redact_excerpt(b"token=a", 7), "token=[");
}

#[test]
fn keeps_plain_text() {
    let plain = [
        "",
        "E42",
        "internal error E42 at step 3",
        r#"{"code":"E42","message":"boom","password":""}"#,
        "tokens are limited: 5 per second",
        "Bearer",
        "see https://example.com/x?page=2",
        "déjà vu — E42 ✓",
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn cuts_on_a_character_boundary() {
    assert_eq!(redact_excerpt("ééé".as_bytes(), 3), "é");
    assert_eq!(redact_excerpt("ééé".as_bytes(), 4), "éé");
    assert_eq!(redact_excerpt("E42 and more".as_bytes(), 3), "E42");
    assert_eq!(redact_excerpt(b"anything", 0), "");
}

#[test]
fn invalid_utf8_becomes_replacement_characters_within_the_limit() {
    assert_eq!(redact_excerpt(&[0xff, b'E', b'4', b'2'], 10), "\u{FFFD}E42");
    assert_eq!(redact_excerpt(&[b'E', 0xff, 0xfe], 4), "E\u{FFFD}");
    assert_eq!(redact_excerpt(&[0xff; 8], 8), "\u{FFFD}\u{FFFD}");
}

fn secret() -> impl Strategy<Value = String> {
    "S3[A-Za-z0-9]{10,40}"
}

fn plain() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 ,.!?()é-]{0,60}".prop_filter("no secret marker", |text| {
        let lower = text.to_ascii_lowercase();
        !text.contains("eyJ") && !lower.contains("bearer")
    })
}

proptest! {
    #[test]
    fn excerpt_never_exceeds_max_bytes(
        body in proptest::collection::vec(any::<u8>(), 0..400),
        max_bytes in 0usize..500,
    ) {
        let excerpt = redact_excerpt(&body, max_bytes);
        prop_assert!(excerpt.len() <= max_bytes);
    }

    #[test]
    fn excerpt_of_text_never_exceeds_max_bytes(text in ".{0,200}", max_bytes in 0usize..300) {
        prop_assert!(redact_excerpt(text.as_bytes(), max_bytes).len() <= max_bytes);
    }

    #[test]
    fn every_secret_form_is_hidden(
        before in plain(),
        after in plain(),
        secret in secret(),
        form in 0usize..9,
    ) {
        let shown = match form {
            0 => format!("whsec_{secret}"),
            1 => format!("Bearer {secret}"),
            2 => format!("eyJ{secret}.{secret}"),
            3 => format!("token={secret}"),
            4 => format!("Authorization: Basic {secret}"),
            5 => format!(r#"{{"api_key":"{secret}"}}"#),
            6 => format!(r#""client_secret" : "{secret}""#),
            7 => format!("password: {secret}"),
            _ => format!("X-Auth-Token={secret}"),
        };
        let text = format!("{before} {shown}\nE42 {after}");
        let excerpt = redacted(&text);
        prop_assert!(!excerpt.contains(&secret), "{} -> {}", text, excerpt);
        prop_assert!(excerpt.contains("[redacted]"));
        prop_assert!(excerpt.contains("E42"));
    }

    #[test]
    fn plain_text_is_kept(before in plain(), after in plain()) {
        let text = format!("{before} E42 {after}");
        prop_assert_eq!(redacted(&text), text);
    }
}
