//! `POST /v1/subscribers/{id}/secret/rotate`: the new secret shown once, the expiry of
//! the replaced one, 404 for an unknown subscriber, 422 naming each bad field, and no
//! secret in any read afterwards.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use deferhook::domain::secret::{PreviousSecret, SigningSecret, SigningSecrets};
use serde_json::{Value, json};

use deferhook::testing::START;

use crate::support::{app_with, at, expect_fields, expect_json, expect_problem, job, spawn_app};

const PATH: &str = "/v1/subscribers/billing/secret/rotate";
/// A valid caller-chosen secret (the Standard Webhooks example, 24 key bytes).
const CHOSEN: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn keys(body: &Value) -> BTreeSet<&str> {
    body.as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

#[tokio::test]
async fn a_rotation_shows_the_new_secret_once_and_when_the_old_one_stops() {
    let app = spawn_app().await;
    let created = app.create_subscriber("billing").await;
    let old = created["secret"].as_str().unwrap().to_owned();
    app.advance(1_000);

    let reply = app.post_json(PATH, &json!({"grace_seconds": 3600})).await;
    let body = expect_json(&reply, 200);
    assert_eq!(
        keys(&body),
        BTreeSet::from(["subscriber_id", "secret", "previous_secret_expires_at"])
    );
    assert_eq!(body["subscriber_id"], "billing");
    assert_eq!(body["previous_secret_expires_at"], at(1_000 + 3_600_000));
    let new = body["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    let key = STANDARD
        .decode(new.strip_prefix("whsec_").expect("whsec_ prefix"))
        .unwrap();
    assert_eq!(key.len(), 32);

    // Reads never show a secret, old or new.
    for path in ["/v1/subscribers/billing", "/v1/subscribers"] {
        let read = app.get(path).await;
        let text = expect_json(&read, 200).to_string();
        assert!(!text.contains("whsec_"), "{path}: {text}");
        let encoded = |s: &str| s.strip_prefix("whsec_").unwrap().to_owned();
        assert!(!text.contains(&encoded(&new)) && !text.contains(&encoded(&old)));
    }
    let read = expect_json(&app.get("/v1/subscribers/billing").await, 200);
    assert_eq!(read["updated_at"], at(1_000));

    // The worker's claim signs with both until the grace period ends.
    app.create_job(&job("billing", "e1", json!({}))).await;
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        claimed[0].secrets.as_ref().unwrap(),
        &SigningSecrets {
            current: SigningSecret::parse(&new).unwrap(),
            previous: Some(PreviousSecret {
                secret: SigningSecret::parse(&old).unwrap(),
                expires_at: START.plus_ms(1_000 + 3_600_000),
            }),
        }
    );
}

#[tokio::test]
async fn a_chosen_secret_and_no_grace() {
    let app = spawn_app().await;
    app.create_subscriber("billing").await;

    let reply = app
        .post_json(PATH, &json!({"grace_seconds": 0, "secret": CHOSEN}))
        .await;
    let body = expect_json(&reply, 200);
    assert_eq!(
        body,
        json!({"subscriber_id": "billing", "secret": CHOSEN, "previous_secret_expires_at": null})
    );
    app.create_job(&job("billing", "e1", json!({}))).await;
    let claimed = app.claim().await;
    assert_eq!(
        claimed[0].secrets.as_ref().unwrap(),
        &SigningSecrets::single(SigningSecret::parse(CHOSEN).unwrap())
    );

    // The longest grace period is accepted.
    let reply = app.post_json(PATH, &json!({"grace_seconds": 604800})).await;
    let body = expect_json(&reply, 200);
    assert_eq!(body["previous_secret_expires_at"], at(604_800_000));
}

#[tokio::test]
async fn an_unknown_subscriber_is_404() {
    let app = spawn_app().await;
    app.create_subscriber("other").await;
    let reply = app.post_json(PATH, &json!({"grace_seconds": 60})).await;
    let body = expect_problem(&reply, 404);
    assert!(
        body["detail"].as_str().unwrap().contains("billing"),
        "{body}"
    );
    // Nothing was created.
    expect_problem(&app.get("/v1/subscribers/billing").await, 404);
}

#[tokio::test]
async fn bad_fields_are_422_naming_them() {
    let app = spawn_app().await;
    app.create_subscriber("billing").await;
    let cases: &[(&str, &[&str])] = &[
        (r#"{"grace_seconds": -1}"#, &["grace_seconds"]),
        (r#"{"grace_seconds": 604801}"#, &["grace_seconds"]),
        (
            r#"{"grace_seconds": 99999999999999999999}"#,
            &["grace_seconds"],
        ),
        (r#"{"grace_seconds": 1.5}"#, &["grace_seconds"]),
        (r#"{"grace_seconds": "60"}"#, &["grace_seconds"]),
        (r#"{"grace_seconds": null}"#, &["grace_seconds"]),
        (r#"{}"#, &["grace_seconds"]),
        (
            r#"{"grace_seconds": 60, "secret": "whsec_c2hvcnQ="}"#,
            &["secret"],
        ),
        (
            r#"{"grace_seconds": 60, "secret": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}"#,
            &["secret"],
        ),
        (
            r#"{"grace_seconds": -5, "secret": "nope"}"#,
            &["grace_seconds", "secret"],
        ),
        (r#"{"grace_seconds": 60, "grace": 1}"#, &["grace"]),
    ];
    for (body, fields) in cases {
        let reply = app.post_raw(PATH, *body).await;
        let problem = expect_fields(&reply, 422, fields);
        // A refused secret is never echoed.
        assert!(!problem.to_string().contains("c2hvcnQ="), "{problem}");
        assert!(!problem.to_string().contains("MfKQ9r8G"), "{problem}");
    }
    // Nothing changed: the subscriber was never rotated.
    let read = expect_json(&app.get("/v1/subscribers/billing").await, 200);
    assert_eq!(read["updated_at"], at(0));
}

#[tokio::test]
async fn with_api_tokens_a_rotation_needs_one() {
    const TOKEN: &str = "rotation-token-5c1e9a7b33";
    let app = app_with().flag("--api-token", TOKEN).start().await;
    let create = app
        .request(reqwest::Method::PUT, "/v1/subscribers/billing")
        .bearer_auth(TOKEN)
        .json(&json!({"url": "https://example.com/hooks/billing"}));
    expect_json(&app.send(create).await, 201);

    let anonymous = app.post_json(PATH, &json!({"grace_seconds": 60})).await;
    let body = expect_problem(&anonymous, 401);
    assert!(!body.to_string().contains("whsec_"), "{body}");
    let read = app
        .request(reqwest::Method::GET, "/v1/subscribers/billing")
        .bearer_auth(TOKEN);
    let read = expect_json(&app.send(read).await, 200);
    assert_eq!(read["updated_at"], at(0), "nothing was rotated");

    let rotate = app
        .request(reqwest::Method::POST, PATH)
        .bearer_auth(TOKEN)
        .json(&json!({"grace_seconds": 60}));
    let rotated = expect_json(&app.send(rotate).await, 200);
    assert!(rotated["secret"].as_str().unwrap().starts_with("whsec_"));
}
