//! CASES C-08 at registration: a subscriber URL whose host is a literal internal
//! address, in any spelling, is refused with a 422 naming `url` and the range; host
//! names are accepted (they are checked when resolved, at each attempt); the flags
//! `--allow-private-targets` and `--allow-target-cidr` let them through.

use serde_json::{Value, json};

use crate::support::{TestApp, app_with, expect_fields, expect_json, spawn_app};

/// Literal internal addresses, spelled every way the URL standard allows, with what
/// the refusal must name.
const REFUSED: &[(&str, &str)] = &[
    (
        "http://127.0.0.1:9000/hook",
        "127.0.0.1 is a loopback address (127.0.0.0/8)",
    ),
    ("http://0x7f000001:9000/", "127.0.0.1 is a loopback address"),
    ("http://2130706433/", "127.0.0.1 is a loopback address"),
    ("http://0177.0.0.1/", "127.0.0.1 is a loopback address"),
    ("http://127.1/", "127.0.0.1 is a loopback address"),
    ("http://[::1]:9000/", "::1 is a loopback address (::1/128)"),
    (
        "http://[::ffff:127.0.0.1]/",
        "::ffff:127.0.0.1 is an IPv4-mapped form of 127.0.0.1, a loopback address",
    ),
    (
        "http://[::ffff:7f00:1]/",
        "::ffff:127.0.0.1 is an IPv4-mapped form of 127.0.0.1, a loopback address",
    ),
    (
        "http://[0:0:0:0:0:ffff:127.0.0.1]/",
        "::ffff:127.0.0.1 is an IPv4-mapped form of 127.0.0.1, a loopback address",
    ),
    (
        "http://[64:ff9b::7f00:1]/",
        "64:ff9b::7f00:1 is a NAT64 (64:ff9b::/96) form of 127.0.0.1",
    ),
    (
        "http://169.254.169.254/latest/meta-data/",
        "169.254.169.254 is a link-local address (169.254.0.0/16)",
    ),
    (
        "http://[fe80::1]/",
        "fe80::1 is a link-local address (fe80::/10)",
    ),
    (
        "https://10.1.2.3/",
        "10.1.2.3 is a private address (RFC 1918) (10.0.0.0/8)",
    ),
    ("https://172.16.0.1/", "(172.16.0.0/12)"),
    ("https://192.168.1.1/", "(192.168.0.0/16)"),
    (
        "http://100.64.0.1/",
        "carrier-grade NAT address (RFC 6598) (100.64.0.0/10)",
    ),
    (
        "http://[fd12:3456::1]/",
        "unique local address (RFC 4193) (fc00::/7)",
    ),
    (
        "http://0.0.0.0:9000/",
        "0.0.0.0 is an unspecified address (0.0.0.0/8)",
    ),
    ("http://[::]/", ":: is an unspecified address (::/128)"),
    ("http://224.0.0.1/", "multicast address (224.0.0.0/4)"),
    ("http://[ff02::1]/", "multicast address (ff00::/8)"),
    (
        "http://255.255.255.255/",
        "reserved or broadcast address (240.0.0.0/4)",
    ),
];

async fn put(app: &TestApp, id: &str, url: &str) -> crate::support::Reply {
    app.put_json(&format!("/v1/subscribers/{id}"), &json!({ "url": url }))
        .await
}

#[tokio::test]
async fn c08_literal_internal_addresses_are_refused_in_every_spelling() {
    let app = spawn_app().await;
    for (url, names) in REFUSED {
        let reply = put(&app, "internal", url).await;
        let body = expect_fields(&reply, 422, &["url"]);
        let message = body["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains(names), "{url}: {message}");
        assert!(
            message.contains("--allow-private-targets or --allow-target-cidr"),
            "{url}: {message}"
        );
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("url"), "{url}: {body}");
    }
    // Nothing was stored.
    let listed = expect_json(&app.get("/v1/subscribers").await, 200);
    assert_eq!(listed["items"], json!([]));
}

#[tokio::test]
async fn c08_an_update_to_an_internal_address_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    let created = app.create_subscriber("s").await;
    let reply = put(&app, "s", "http://127.0.0.1:9000/").await;
    expect_fields(&reply, 422, &["url"]);
    let current = expect_json(&app.get("/v1/subscribers/s").await, 200);
    assert_eq!(current["url"], created["url"]);
}

#[tokio::test]
async fn c08_host_names_and_public_addresses_are_accepted() {
    let app = spawn_app().await;
    for (id, url) in [
        // Names are checked when resolved, at each attempt (they may change).
        ("name", "http://localhost:9000/hook"),
        ("rebinding", "http://evil.test/hook"),
        ("public-v4", "https://93.184.216.34/hook"),
        ("public-v6", "https://[2606:4700:4700::1111]/hook"),
        ("public-mapped", "https://[::ffff:8.8.8.8]/hook"),
    ] {
        let reply = put(&app, id, url).await;
        assert_eq!(reply.status, 201, "{url}: {}", reply.text);
    }
}

#[tokio::test]
async fn c08_allow_private_targets_accepts_them_all() {
    let app = app_with().allow_private_targets().start().await;
    for (i, (url, _)) in REFUSED.iter().enumerate() {
        let reply = put(&app, &format!("s{i}"), url).await;
        assert_eq!(reply.status, 201, "{url}: {}", reply.text);
    }
}

#[tokio::test]
async fn c08_an_allowed_cidr_accepts_only_its_range() {
    let app = app_with()
        .flag("--allow-target-cidr", "127.0.0.0/8")
        .flag("--allow-target-cidr", "10.20.0.0/16")
        .start()
        .await;
    for (id, url) in [
        ("loopback", "http://127.0.0.1:9000/"),
        ("hex", "http://0x7f000001:9000/"),
        ("mapped", "http://[::ffff:127.0.0.1]/"),
        ("ten-twenty", "http://10.20.1.2/"),
    ] {
        let reply = put(&app, id, url).await;
        assert_eq!(reply.status, 201, "{url}: {}", reply.text);
        let body: Value = reply.json();
        assert!(body["url"].as_str().unwrap().starts_with("http://"));
    }
    for url in [
        "http://[::1]/",
        "http://10.21.0.1/",
        "http://169.254.169.254/",
    ] {
        expect_fields(&put(&app, "other", url).await, 422, &["url"]);
    }
}
