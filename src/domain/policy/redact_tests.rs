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
    let nested = r#"{"data":{"user":"ann","password":"pw"}}"#;
    let want = r#"{"data":{"user":"ann","password":"[redacted]"}}"#;
    assert_eq!(redacted(nested), want);
}

#[test]
fn hides_json_values_after_whitespace_and_line_breaks() {
    assert_eq!(
        redacted("{\"Secret\":\n\"value\"}"),
        "{\"Secret\":\n\"[redacted]\"}"
    );
    assert_eq!(
        redacted("{\"token\"\r\n\t : \r\n  \"value\", \"code\": \"E42\"}"),
        "{\"token\"\r\n\t : \r\n  \"[redacted]\", \"code\": \"E42\"}"
    );
    assert_eq!(
        redacted("{'password' :\n 'p'}"),
        "{'password' :\n '[redacted]'}"
    );
}

#[test]
fn hides_array_and_object_values_whole() {
    let cases = [
        (r#"{"secret": ["value"]}"#, r#"{"secret": [redacted]}"#),
        (r#"{"token": {"v": "x"}}"#, r#"{"token": [redacted]}"#),
        (
            r#"{"credentials":{"user":"ann","password":"pw"},"code":"E42"}"#,
            r#"{"credentials":[redacted],"code":"E42"}"#,
        ),
        (
            r#"{"api_keys": ["a]}", {"k": ["b"]}], "code": "E42"}"#,
            r#"{"api_keys": [redacted], "code": "E42"}"#,
        ),
        (r#"{"token": {"v": "x"#, r#"{"token": [redacted]"#),
        (r#"{"secret":["ab"#, r#"{"secret":[redacted]"#),
        (r#"{"secret":["#, r#"{"secret":["#),
        ("secret: [a, b]\nE42", "secret: [redacted]\nE42"),
        (
            r#"{"token": [], "session": {}}"#,
            r#"{"token": [], "session": {}}"#,
        ),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
}

#[test]
fn hides_json_inside_a_json_string() {
    let text = r#"{"echo":"{\"token\":\"abc123\",\"auth\":{\"k\":1},\"code\":\"E42\"}"}"#;
    let want = r#"{"echo":"{\"token\":\"[redacted]\",\"auth\":[redacted],\"code\":\"E42\"}"}"#;
    assert_eq!(redacted(text), want);
}

#[test]
fn hides_well_known_token_prefixes_whatever_the_key() {
    let tokens = [
        "sk_live_51HxYzAbCdEf",
        "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
        "rk_live_abc123",
        "rk_test_abc123",
        "pk_live_abc123",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "gho_abc123",
        "ghs_abc123",
        "github_pat_11ABCDEFG0_abcdefXYZ",
        "xoxb-1234-5678-abcDEF",
        "xoxp-1234-5678-abcDEF",
        "xoxa-2-abc",
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAIOSFODNN7EXAMPLE",
        "eyJhbGciOiJIUzI1NiJ9.e30.sig",
        "whsec_abc",
    ];
    for token in tokens {
        let text = format!("note ({token}) E42");
        assert_eq!(redacted(&text), "note ([redacted]) E42", "{token}");
        let text = format!("x={token}");
        assert_eq!(redacted(&text), "x=[redacted]", "{token}");
    }
    assert_eq!(redacted("SK_LIVE_abc, E42"), "[redacted], E42");
}

#[test]
fn keeps_words_that_only_contain_a_token_prefix() {
    let plain = [
        "task_test_runner failed: E42",
        "mask_live_view",
        "AKIA123 is too short",
        "AKIAIOSFODNN7exam",
        "sk_live_ alone",
        "the ghp_ prefix",
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn hides_bearer_and_basic_credentials_in_any_case() {
    let cases = [
        ("Bearer abc123", "Bearer [redacted]"),
        ("BEARER abc123", "BEARER [redacted]"),
        ("basic dXNlcjpwYXNz E42", "basic [redacted] E42"),
        ("got BASIC dXNlcjpwYXNz", "got BASIC [redacted]"),
        ("Basic YTpi", "Basic [redacted]"),
        ("Basic abc123", "Basic [redacted]"),
        (
            "we got Authorization: Basic dXNlcjpwYXNz",
            "we got Authorization: Basic [redacted]",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
}

#[test]
fn keeps_bearer_and_basic_in_prose() {
    let plain = [
        "missing Bearer token (E42)",
        "basic auth failed: E42",
        "Basic plan limit reached",
        "upgrade from the basic tier",
        r#"WWW-Authenticate: Bearer realm="api", error="invalid_token""#,
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn hides_percent_encoded_tokens_whole() {
    let cases = [
        ("whsec_AAAA%2BBBBB...", "[redacted]"),
        (
            "secret whsec_AAAA%2BBBBB%2FCCCC%3D%3d tail E42",
            "secret [redacted] tail E42",
        ),
        ("sk_live_ab%2Fcd%3D&code=E42", "[redacted]&code=E42"),
        ("ghp_ab%2Bcd E42", "[redacted] E42"),
        ("xoxb-1%2D2 E42", "[redacted] E42"),
        ("Bearer ab%2Bcd%3D E42", "Bearer [redacted] E42"),
        ("eyJhbG%3D%3D.x E42", "[redacted] E42"),
        ("cut whsec_AAAA%2", "cut [redacted]"),
        ("100% sure, whsec_ab% done", "100% sure, [redacted]% done"),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
}

#[test]
fn recognises_secret_keys_by_part_or_segment_in_any_case() {
    let cases = [
        ("X-Api-Key: k1", "X-Api-Key: [redacted]"),
        ("stripeSecret=abc", "stripeSecret=[redacted]"),
        ("db_password=abc", "db_password=[redacted]"),
        ("DB_PASSWD=abc", "DB_PASSWD=[redacted]"),
        ("pwd=abc", "pwd=[redacted]"),
        ("user_pwd: abc", "user_pwd: [redacted]"),
        ("apikey=abc", "apikey=[redacted]"),
        ("api-key=abc", "api-key=[redacted]"),
        ("auth=abc", "auth=[redacted]"),
        ("X-Auth: abc", "X-Auth: [redacted]"),
        ("basicAuth=abc", "basicAuth=[redacted]"),
        ("credential=abc", "credential=[redacted]"),
        (
            r#"{"privateKey": "abc"}"#,
            r#"{"privateKey": "[redacted]"}"#,
        ),
        (
            r#"{"private_key": "abc"}"#,
            r#"{"private_key": "[redacted]"}"#,
        ),
        (
            r#"{"client_secret":"abc"}"#,
            r#"{"client_secret":"[redacted]"}"#,
        ),
        (
            r#"{"refresh_token":"abc"}"#,
            r#"{"refresh_token":"[redacted]"}"#,
        ),
        ("sessionId=abc", "sessionId=[redacted]"),
        ("X-Signature: v1=abc", "X-Signature: [redacted]"),
        ("Cookie: a=1; b=2\nE42", "Cookie: [redacted]\nE42"),
        (
            "Set-Cookie: sid=abc; Path=/; HttpOnly\r\nE42",
            "Set-Cookie: [redacted]\r\nE42",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
    let plain = [
        "author: Ann",
        "unauthorized: missing header",
        "authority=example.com",
        "passage=3",
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn keeps_a_key_word_inside_a_sentence_readable() {
    let plain = [
        "error: invalid token: E42",
        "invalid token format",
        "error: invalid token: expired.",
        "the signature: Missing (E42)",
        "invalid token: ERR_42",
        "retry session: 3 of 5",
        "HTTP 500",
        "amount must be positive",
        "invalid amount",
        "E42",
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn hides_a_key_word_value_inside_a_sentence_when_it_looks_secret() {
    let cases = [
        (
            "the password: hunter2 was wrong",
            "the password: [redacted]",
        ),
        ("sent token: abc123XYZ, E42", "sent token: [redacted], E42"),
        ("Token: E42", "Token: [redacted]"),
        ("failed; token: E42", "failed; token: [redacted]"),
        ("{token: E42}", "{token: [redacted]}"),
        ("rejected X-Api-Key: abc", "rejected X-Api-Key: [redacted]"),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
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
        !text.contains("eyJ")
            && !text.contains("AKIA")
            && !text.contains("ASIA")
            && !lower.contains("bearer")
            && !lower.contains("basic")
            && !lower.contains("xox")
            && !lower.contains("sk-")
            && !lower.contains("glpat-")
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
        form in 0usize..25,
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
            8 => format!("webhook-signature: v1,{secret} v1,{secret}"),
            9 => format!("-----BEGIN EC PRIVATE KEY-----\n{secret}\n-----END EC PRIVATE KEY-----"),
            10 => format!("<password>{secret}</password>"),
            11 => format!("postgres://app:{secret}@db/app"),
            12 => format!(r#"Digest username="u", response="{secret}""#),
            13 => format!("sk-proj-{secret}"),
            14 => format!("u%3Fx%26password%3D{secret}%26y"),
            16 => format!("token=Bearer {secret}"),
            17 => format!(r#"{{"password" => "{secret}"}}"#),
            18 => format!("Array\n(\n    [password] => {secret}\n)"),
            19 => format!("{{&quot;password&quot;:&quot;{secret}&quot;}}"),
            20 => format!(r#"{{\u0022password\u0022:\u0022{secret}\u0022}}"#),
            21 => format!(r#"<input type="password" class="f" value="{secret}">"#),
            22 => format!("password&#61;{secret}"),
            23 => format!(r#"{{"pass\u0077ord":"{secret}"}}"#),
            24 => format!("pass\u{AD}word={secret}"),
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

    #[test]
    fn an_embedded_secret_never_shows(
        before in "[ -~\n\té€]{0,40}",
        after in "[ -~\n\té€]{0,40}",
        secret in "[A-Za-z0-9]{16,48}",
        form in 0usize..3,
    ) {
        let shown = match form {
            0 => format!(r#"{{"api_key":"{secret}"}}"#),
            1 => format!("token={secret}"),
            _ => format!("Authorization: Bearer {secret}"),
        };
        let text = format!("{before}{shown}{after}");
        let excerpt = redacted(&text);
        prop_assert!(!excerpt.contains(&secret), "{:?} -> {:?}", text, excerpt);
    }
}

/// Issue #15 part 5.3: a signature header's value is a comma-separated list
/// (`v1,<MAC>`, several during a rotation); every item is hidden, not only the first.
#[test]
fn hides_every_comma_separated_value_of_a_secret() {
    let mac = "K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=";
    let cases = [
        (
            format!("webhook-signature: v1,{mac}\r\nE42"),
            "webhook-signature: [redacted]\r\nE42".to_owned(),
        ),
        (
            format!("Webhook-Signature: v1,{mac} v1a,{mac}, v1,{mac}\nE42"),
            "Webhook-Signature: [redacted]\nE42".to_owned(),
        ),
        (
            format!("got signature={mac},{mac}&code=E42"),
            "got signature=[redacted]&code=E42".to_owned(),
        ),
        (
            format!("token: v1,{mac}, code: E42"),
            "token: [redacted], code: E42".to_owned(),
        ),
        (
            "api_key=k1AbCdEf99,k2GhIjKl88, E42".to_owned(),
            "api_key=[redacted], E42".to_owned(),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(&text), want, "{text}");
        assert!(!redacted(&text).contains("K5oZ"), "{text}");
    }
    // A pair or a word after the comma is not part of the value.
    for text in [
        "token=abc123XYZ,code=E42",
        "sent token: abc123XYZ, E42 next",
    ] {
        assert!(redacted(text).contains("E42"), "{text}");
    }
}

#[test]
fn hides_pem_private_keys() {
    let body = "MIIEpAIBAAKCAQEA75bZ1x2u\nq4SrWN5bl1X0xCk+/3zT==";
    let cases = [
        (
            format!("bad key:\n-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\nE42"),
            "bad key:\n-----BEGIN RSA PRIVATE KEY-----[redacted]-----END RSA PRIVATE KEY-----\nE42"
                .to_owned(),
        ),
        (
            format!(r#"{{"pem":"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n","code":"E42"}}"#),
            r#"{"pem":"-----BEGIN PRIVATE KEY-----[redacted]-----END PRIVATE KEY-----\n","code":"E42"}"#
                .to_owned(),
        ),
        (
            format!("-----BEGIN OPENSSH PRIVATE KEY-----\r\n{body}"),
            "-----BEGIN OPENSSH PRIVATE KEY-----[redacted]".to_owned(),
        ),
        (
            format!("-----BEGIN ENCRYPTED PRIVATE KEY-----{body}-----END ENCRYPTED PRIVATE KEY-----"),
            "-----BEGIN ENCRYPTED PRIVATE KEY-----[redacted]-----END ENCRYPTED PRIVATE KEY-----"
                .to_owned(),
        ),
        (
            format!("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{body}\n-----END PGP PRIVATE KEY BLOCK-----"),
            "-----BEGIN PGP PRIVATE KEY BLOCK-----[redacted]-----END PGP PRIVATE KEY BLOCK-----"
                .to_owned(),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(&text), want, "{text}");
    }
    // Certificates and public keys are not secrets.
    let certificate = format!("-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----");
    assert_eq!(redacted(&certificate), certificate);
    let public = format!("-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----");
    assert_eq!(redacted(&public), public);
}

#[test]
fn hides_xml_elements_named_like_secrets() {
    let cases = [
        (
            "<user>ann</user><password>hunter2</password><code>E42</code>",
            "<user>ann</user><password>[redacted]</password><code>E42</code>",
        ),
        (
            "<login>\n  <Password>two words</Password>\n</login>",
            "<login>\n  <Password>[redacted]</Password>\n</login>",
        ),
        (
            r#"<wsse:Password Type="http://x/#PasswordText">pw1</wsse:Password>E42"#,
            r#"<wsse:Password Type="http://x/#PasswordText">[redacted]</wsse:Password>E42"#,
        ),
        (
            "<apiKey>k-123</apiKey> <auth><user>ann</user><pin>1234</pin></auth> E42",
            "<apiKey>[redacted]</apiKey> <auth>[redacted]</auth> E42",
        ),
        ("<client_secret>abc123", "<client_secret>[redacted]"),
        ("<token >abc</TOKEN >", "<token >[redacted]</TOKEN >"),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
    let plain = [
        "<token/> <password></password> <secret> </secret>",
        "send <token> in the header (E42)",
        "<author>Ann</author> <passage>3</passage>",
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn hides_url_userinfo_passwords_in_any_scheme() {
    let cases = [
        (
            "connect postgres://app:hunter2@db.internal:5432/app failed: E42",
            "connect postgres://app:[redacted]@db.internal:5432/app failed: E42",
        ),
        (
            "redis://:s3cr3t@cache:6379/0",
            "redis://:[redacted]@cache:6379/0",
        ),
        (
            "amqp://guest:gu%40e:st@mq.internal/vhost",
            "amqp://guest:[redacted]@mq.internal/vhost",
        ),
        (
            r#"{"url":"https:\/\/bob:pa55@api.example.com\/x","code":"E42"}"#,
            r#"{"url":"https:\/\/bob:[redacted]@api.example.com\/x","code":"E42"}"#,
        ),
        (
            "mongodb+srv://u:p@cluster0.example.net/?retryWrites=true",
            "mongodb+srv://u:[redacted]@cluster0.example.net/?retryWrites=true",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
    let plain = [
        "see https://example.com:8443/x?y=1 (E42)",
        "ssh://git@github.com/org/repo",
        "https://example.com/users/@ann",
        "mailto:ann@example.com",
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn hides_digest_responses() {
    // RFC 7616 §3.9.1's example.
    let text = r#"Digest username="Mufasa", realm="http-auth@example.org", uri="/dir/index.html", nc=00000001, cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", response="8ca523f5e9506fed4657c9700eebdbec", opaque="FQhe"; E42"#;
    let want = r#"Digest username="Mufasa", realm="http-auth@example.org", uri="/dir/index.html", nc=00000001, cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", response="[redacted]", opaque="FQhe"; E42"#;
    assert_eq!(redacted(text), want);
    assert_eq!(
        redacted(r#"{"echo":"Digest response = \"6629fae4\", qop=auth"}"#),
        r#"{"echo":"Digest response = \"[redacted]\", qop=auth"}"#
    );
    let plain = [
        r#"{"response": "ok", "code": "E42"}"#,
        "response=ok&code=E42",
        "bad response: E42",
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn hides_hyphenated_api_key_prefixes() {
    let tokens = [
        "sk-proj-AbC123_dEf-456ghiJKL789",
        "sk-svcacct-AbC123dEf456",
        "sk-admin-AbC123dEf456",
        "sk-ant-api03-AbC123_dEf-456ghiJKL789-xyzAA",
        "sk-AbC123dEf456ghiJKL789mnoPQR012stuVWX345yzAB",
        "glpat-AbC123dEf456ghiJKL78",
    ];
    for token in tokens {
        assert_eq!(
            redacted(&format!("key {token} (E42)")),
            "key [redacted] (E42)",
            "{token}"
        );
        assert_eq!(redacted(&format!("x={token}")), "x=[redacted]", "{token}");
    }
    let plain = [
        "sk-learn failed (E42)",
        "risk-free",
        "ask-proj-x",
        "glpat-short",
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn hides_percent_encoded_secret_pairs() {
    let cases = [
        (
            "next=%2Flogin%3Fuser%3Dann%26password%3Dhunter2%26code%3DE42",
            "next=%2Flogin%3Fuser%3Dann%26password%3D[redacted]%26code%3DE42",
        ),
        (
            "r=%3Fapi_key%3dk%2B1%2F2%3D E42",
            "r=%3Fapi_key%3d[redacted] E42",
        ),
        ("x%26pwd%3Dp%40ss&code=E42", "x%26pwd%3D[redacted]&code=E42"),
        ("token%3Dabc", "token%3D[redacted]"),
    ];
    for (text, want) in cases {
        assert_eq!(redacted(text), want, "{text}");
    }
    let plain = ["q=%2Fauthor%3DAnn", "100%25 done, token%3D E42"];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

#[test]
fn a_nul_byte_becomes_a_replacement_character() {
    // PostgreSQL text cannot store NUL; a binary answer must still be recordable.
    let excerpt = redact_excerpt(b"bin\0ary\0", 100);
    assert_eq!(excerpt, "bin\u{FFFD}ary\u{FFFD}");
    assert!(!excerpt.contains('\0'));
}

/// Issue #34 item 4.8: the spellings the first rules missed. Each hides the value `X…`
/// (and nothing else) and keeps its key readable.
#[test]
fn hides_secret_pairs_in_every_spelling_of_quotes_and_separators() {
    let cases = [
        // A credential given with its scheme after `=`.
        ("token=Bearer Xs3cr3t&code=E42", "token=[redacted]&code=E42"),
        (
            "authorization=Bearer Xs3cr3t code=E42",
            "authorization=[redacted] code=E42",
        ),
        ("auth = Basic Xs3cr3t==", "auth = [redacted]"),
        // Ruby and PHP hashes, Perl.
        (
            r#"{"password" => "Xs3cr3t", "code" => "E42"}"#,
            r#"{"password" => "[redacted]", "code" => "E42"}"#,
        ),
        (
            "array('api_key' => 'Xs3cr3t', 'code' => 'E42')",
            "array('api_key' => '[redacted]', 'code' => 'E42')",
        ),
        (
            "{:password=>\"Xs3cr3t\", :code=>\"E42\"}",
            "{:password=>\"[redacted]\", :code=>\"E42\"}",
        ),
        (
            "secret => Xs3cr3t, code => E42",
            "secret => [redacted], code => E42",
        ),
        // PHP's print_r: the value runs to the end of its line, blanks included.
        (
            "Array\n(\n    [password] => Xs3cr3t with blanks\n    [code] => E42\n)",
            "Array\n(\n    [password] => [redacted]\n    [code] => E42\n)",
        ),
        // A form's bracketed key.
        (
            "user[password]=Xs3cr3t&user[name]=ann",
            "user[password]=[redacted]&user[name]=ann",
        ),
        // HTML-escaped JSON (an error page quoting the request).
        (
            "{&quot;password&quot;:&quot;Xs3cr3t&quot;,&quot;code&quot;:&quot;E42&quot;}",
            "{&quot;password&quot;:&quot;[redacted]&quot;,&quot;code&quot;:&quot;E42&quot;}",
        ),
        (
            "{&#34;token&#34;: &#34;Xs3cr3t&#34;}",
            "{&#34;token&#34;: &#34;[redacted]&#34;}",
        ),
        (
            "&#x27;secret&#x27; =&gt; &#x27;Xs3cr3t&#x27;",
            "&#x27;secret&#x27; =&gt; &#x27;[redacted]&#x27;",
        ),
        // JSON whose quotes an encoder escaped again.
        (
            r#"{\u0022password\u0022:\u0022Xs3cr3t\u0022,\u0022code\u0022:\u0022E42\u0022}"#,
            r#"{\u0022password\u0022:\u0022[redacted]\u0022,\u0022code\u0022:\u0022E42\u0022}"#,
        ),
        (
            r#"{\u0022auth\u0022: \u0022Xs3cr3t\u0022}"#,
            r#"{\u0022auth\u0022: \u0022[redacted]\u0022}"#,
        ),
        (
            r#"{\x22token\x22:\x22Xs3cr3t\x22}"#,
            r#"{\x22token\x22:\x22[redacted]\x22}"#,
        ),
    ];
    // Every case is judged before failing, so that a failure lists all the spellings
    // missed.
    let missed: Vec<String> = cases
        .iter()
        .map(|(text, want)| (text, want, redacted(text)))
        .filter(|(_, want, excerpt)| excerpt != *want || excerpt.contains("Xs3cr3t"))
        .map(|(text, want, excerpt)| format!("{text:?} -> {excerpt:?}, not {want:?}"))
        .collect();
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

/// The same spellings around keys that name no secret, and prose, are kept.
#[test]
fn keeps_ordinary_pairs_in_every_spelling() {
    let plain = [
        r#"{"name" => "ann", "code" => "E42"}"#,
        "Array\n(\n    [name] => ann\n    [code] => E42\n)",
        "{&quot;status&quot;:&quot;failed&quot;,&quot;code&quot;:&quot;E42&quot;}",
        r#"{\u0022user\u0022:\u0022ann\u0022,\u0022code\u0022:\u0022E42\u0022}"#,
        "user[name]=ann&page=2",
        "missing [password] field",
        "the [token] is => required",
        "code=E42 => retry later",
        "&quot;author&quot;:&quot;ann&quot;",
        r#"\u0022unauthorized\u0022"#,
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}
