//! Issue #34 item 4.8, the second probe: spellings an attacker-style receiver answering
//! 500 got past the redaction. Each case hides the value `X…` and nothing else, and
//! keeps its key readable; the same spellings around ordinary keys are kept.

use super::*;

fn redacted(text: &str) -> String {
    redact_excerpt(text.as_bytes(), 64 * 1024)
}

/// Every case is judged before failing, so that a failure lists all the spellings
/// missed.
fn assert_all(cases: &[(&str, &str)]) {
    let missed: Vec<String> = cases
        .iter()
        .map(|(text, want)| (text, want, redacted(text)))
        .filter(|(_, want, excerpt)| excerpt != *want || excerpt.contains("Xs3cr3t"))
        .map(|(text, want, excerpt)| format!("{text:?} -> {excerpt:?}, not {want:?}"))
        .collect();
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[test]
fn hides_the_value_of_secret_html_form_fields() {
    assert_all(&[
        (
            r#"<input name="password" value="Xs3cr3t">"#,
            r#"<input name="password" value="[redacted]">"#,
        ),
        (
            r#"<input name="password" class="f" autocomplete="off" value="Xs3cr3t">"#,
            r#"<input name="password" class="f" autocomplete="off" value="[redacted]">"#,
        ),
        (
            r#"<input value="Xs3cr3t" name="api_token">"#,
            r#"<input value="[redacted]" name="api_token">"#,
        ),
        (
            "<input name='password' value='Xs3cr3t'>",
            "<input name='password' value='[redacted]'>",
        ),
        (
            r#"<INPUT TYPE="password" VALUE="Xs3cr3t">"#,
            r#"<INPUT TYPE="password" VALUE="[redacted]">"#,
        ),
        (
            r#"<input value="Xs3cr3t" type="password" name="pw">"#,
            r#"<input value="[redacted]" type="password" name="pw">"#,
        ),
        (
            r#"<input name="user[password]" value="Xs3cr3t"/>"#,
            r#"<input name="user[password]" value="[redacted]"/>"#,
        ),
    ]);
}

#[test]
fn hides_values_after_separators_spelled_as_html_references() {
    assert_all(&[
        ("password&#61;Xs3cr3t", "password&#61;[redacted]"),
        (
            "password&#x3d;Xs3cr3t&amp;code=E42",
            "password&#x3d;[redacted]&amp;code=E42",
        ),
        ("password&#X3D;Xs3cr3t", "password&#X3D;[redacted]"),
        ("password&equals;Xs3cr3t", "password&equals;[redacted]"),
        ("password&#58; Xs3cr3t", "password&#58; [redacted]"),
        ("token&#x3a;Xs3cr3t", "token&#x3a;[redacted]"),
    ]);
}

#[test]
fn hides_values_of_keys_spelled_with_json_escapes() {
    assert_all(&[
        (
            r#"{"pass\u0077ord":"Xs3cr3t"}"#,
            r#"{"pass\u0077ord":"[redacted]"}"#,
        ),
        (
            r#"{"\u0070assword":"Xs3cr3t"}"#,
            r#"{"\u0070assword":"[redacted]"}"#,
        ),
        (
            r#"{"passwor\u0064": "Xs3cr3t"}"#,
            r#"{"passwor\u0064": "[redacted]"}"#,
        ),
        (
            r#"{"\u0074\u006F\u006B\u0065\u006E":"Xs3cr3t"}"#,
            r#"{"\u0074\u006F\u006B\u0065\u006E":"[redacted]"}"#,
        ),
        ("pass&#119;ord=Xs3cr3t", "pass&#119;ord=[redacted]"),
    ]);
}

#[test]
fn hides_values_of_keys_with_invisible_characters_inside() {
    let mut cases = Vec::new();
    for invisible in [
        '\u{AD}', '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}',
    ] {
        let key = format!("pass{invisible}word");
        cases.push((format!("{key}=Xs3cr3t"), format!("{key}=[redacted]")));
        cases.push((
            format!(r#"{{"{key}":"Xs3cr3t"}}"#),
            format!(r#"{{"{key}":"[redacted]"}}"#),
        ));
    }
    cases.push((
        r#"{"pass\u00adword":"Xs3cr3t"}"#.to_owned(),
        r#"{"pass\u00adword":"[redacted]"}"#.to_owned(),
    ));
    cases.push((
        "pass&shy;word=Xs3cr3t".to_owned(),
        "pass&shy;word=[redacted]".to_owned(),
    ));
    let cases: Vec<(&str, &str)> = cases
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_all(&cases);
}

#[test]
fn keeps_ordinary_fields_and_keys_in_these_spellings() {
    let plain = [
        r#"<input name="username" value="ann">"#,
        r#"<input type="text" name="q" value="E42">"#,
        r#"<input type="hidden" value="ann" name="author">"#,
        "code&#61;E42&amp;page&equals;2",
        "status&#58; failed",
        r#"{"us\u0065r":"ann","co\u0064e":"E42"}"#,
        "na\u{AD}me=ann",
        "wo\u{200B}rd: ann",
        "au&#116;hor=ann",
        "the password field is required",
    ];
    for text in plain {
        assert_eq!(redacted(text), text);
    }
}

/// Issue #34 item 4.8, left after the second probe: a secret element with its brackets
/// as HTML references or escapes, and a separator as a `\u` or `\x` escape.
#[test]
fn hides_escaped_elements_and_escaped_separators() {
    assert_all(&[
        (
            "&lt;password&gt;Xs3cr3t&lt;/password&gt;",
            "&lt;password&gt;[redacted]&lt;/password&gt;",
        ),
        ("&lt;password&gt;Xs3cr3t", "&lt;password&gt;[redacted]"),
        (
            "&LT;wsse:Password Type=&quot;t&quot;&GT;Xs3cr3t&LT;/wsse:Password&GT;",
            "&LT;wsse:Password Type=&quot;t&quot;&GT;[redacted]&LT;/wsse:Password&GT;",
        ),
        (
            "&#60;apiKey&#62;Xs3cr3t&#60;/apiKey&#62;",
            "&#60;apiKey&#62;[redacted]&#60;/apiKey&#62;",
        ),
        (
            r#"{"body":"\u003ctoken\u003eXs3cr3t\u003c/token\u003e"}"#,
            r#"{"body":"\u003ctoken\u003e[redacted]\u003c/token\u003e"}"#,
        ),
        (r"\x3cpassword\x3eXs3cr3t", r"\x3cpassword\x3e[redacted]"),
        ("password\\u003dXs3cr3t", "password\\u003d[redacted]"),
        ("password\\u003DXs3cr3t", "password\\u003D[redacted]"),
        (
            "api_key\\x3dXs3cr3t and more",
            "api_key\\x3d[redacted] and more",
        ),
        ("secret\\u003a Xs3cr3t", "secret\\u003a [redacted]"),
        (
            r#"{"q":"a=1\u0026token\u003dXs3cr3t"}"#,
            r#"{"q":"a=1\u0026token\u003d[redacted]"}"#,
        ),
    ]);
    // Ordinary elements and pairs in the same spellings are kept.
    for kept in [
        "&lt;user&gt;bob&lt;/user&gt;",
        "\\u003cstatus\\u003efailed\\u003c/status\\u003e",
        "user\\u003dbob",
        "use &lt;token&gt; here",
    ] {
        assert_eq!(redacted(kept), kept);
    }
}

/// Issue #34, the probe after the write-ahead audit: configuration files' secret
/// entries, `->` arrows and separators as references with leading zeros.
#[test]
fn hides_config_entries_arrows_and_zero_padded_separators() {
    assert_all(&[
        (
            r#"<add key="Password" value="Xs3cr3t"/>"#,
            r#"<add key="Password" value="[redacted]"/>"#,
        ),
        (
            r#"<entry key="password">Xs3cr3t</entry>"#,
            r#"<entry key="password">[redacted]</entry>"#,
        ),
        (
            r#"<string name="password">Xs3cr3t</string>"#,
            r#"<string name="password">[redacted]</string>"#,
        ),
        ("password -> Xs3cr3t", "password -> [redacted]"),
        ("password&#0061;Xs3cr3t", "password&#0061;[redacted]"),
        ("password&#x0003D;Xs3cr3t", "password&#x0003D;[redacted]"),
        (
            r#"<entry key="user">ann</entry>"#,
            r#"<entry key="user">ann</entry>"#,
        ),
        ("step -> next", "step -> next"),
        (r#"password := "Xs3cr3t""#, r#"password := "[redacted]""#),
        (r#"password == "Xs3cr3t""#, r#"password == "[redacted]""#),
        ("DB_PASSWORD ?= Xs3cr3t", "DB_PASSWORD ?= [redacted]"),
        ("DB_PASSWORD += Xs3cr3t", "DB_PASSWORD += [redacted]"),
        (r#"password ||= "Xs3cr3t""#, r#"password ||= "[redacted]""#),
        (r#"password <- "Xs3cr3t""#, r#"password <- "[redacted]""#),
        (r#"password === "Xs3cr3t""#, r#"password === "[redacted]""#),
        (r#"password <<- "Xs3cr3t""#, r#"password <<- "[redacted]""#),
        (r#"$password .= "Xs3cr3t""#, r#"$password .= "[redacted]""#),
        (
            r#"if password == "" then fail"#,
            r#"if password == "" then fail"#,
        ),
    ]);
}
