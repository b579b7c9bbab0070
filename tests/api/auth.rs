//! API tokens (issue #7): with `--api-token`, every `/v1/*` request needs
//! `Authorization: Bearer <token>` (401 problem+json otherwise, with a `Bearer`
//! challenge); the probes, metrics and the API document stay open.

use reqwest::Method;
use serde_json::json;

use crate::support::{TestApp, app_with, expect_json, expect_problem};

const TOKEN: &str = "first-token-7f3a9c2e51";
const OTHER: &str = "second-token-0b6d4e8a22";

async fn tokened() -> TestApp {
    app_with()
        .flag("--api-token", TOKEN)
        .flag("--api-token", OTHER)
        .start()
        .await
}

fn assert_challenge(reply: &crate::support::Reply, error: &str) {
    let challenge = reply.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer realm=\"deferhook\""),
        "{challenge}"
    );
    assert!(
        challenge.contains(&format!("error=\"{error}\"")),
        "{challenge}"
    );
}

#[tokio::test]
async fn v1_needs_a_valid_bearer_token() {
    let app = tokened().await;
    let paths = [
        (Method::GET, "/v1/subscribers"),
        (Method::GET, "/v1/jobs"),
        (Method::GET, "/v1/jobs/01937c5e-0000-7000-8000-000000000000"),
        (Method::POST, "/v1/replays"),
        (Method::GET, "/v1/no-such-route"),
    ];
    for (method, path) in paths {
        let missing = app.send(app.request(method.clone(), path)).await;
        let body = expect_problem(&missing, 401);
        assert!(
            body["detail"].as_str().unwrap().contains("Bearer"),
            "{body}"
        );
        assert_challenge(&missing, "invalid_request");

        let wrong = app
            .send(
                app.request(method.clone(), path)
                    .bearer_auth("not-the-token-123456"),
            )
            .await;
        expect_problem(&wrong, 401);
        assert_challenge(&wrong, "invalid_token");

        let basic = app
            .send(
                app.request(method.clone(), path)
                    .basic_auth("user", Some(TOKEN)),
            )
            .await;
        expect_problem(&basic, 401);
        let prefix = app
            .send(
                app.request(method, path)
                    .bearer_auth(&TOKEN[..TOKEN.len() - 1]),
            )
            .await;
        expect_problem(&prefix, 401);
    }
}

#[tokio::test]
async fn each_configured_token_is_accepted() {
    let app = tokened().await;
    for token in [TOKEN, OTHER] {
        let put = app
            .request(Method::PUT, "/v1/subscribers/s")
            .bearer_auth(token)
            .json(&json!({"url": "https://example.com/hook"}));
        let reply = app.send(put).await;
        assert!(matches!(reply.status, 200 | 201), "{}", reply.text);
        let list = app
            .send(
                app.request(Method::GET, "/v1/subscribers")
                    .bearer_auth(token),
            )
            .await;
        assert_eq!(expect_json(&list, 200)["items"][0]["id"], "s");
    }
    // The scheme name is case-insensitive (RFC 9110 §11.1).
    let lower = app
        .request(Method::GET, "/v1/subscribers")
        .header("authorization", format!("bearer {TOKEN}"));
    expect_json(&app.send(lower).await, 200);
}

#[tokio::test]
async fn probes_metrics_and_the_document_stay_open() {
    let app = tokened().await;
    for path in ["/healthz", "/readyz", "/metrics", "/openapi.json"] {
        let reply = app.get(path).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
    }
}

#[tokio::test]
async fn without_tokens_the_api_is_open() {
    let app = app_with().start().await;
    expect_json(&app.get("/v1/subscribers").await, 200);
}

#[tokio::test]
async fn the_document_declares_the_bearer_scheme_and_401() {
    let app = tokened().await;
    let doc = expect_json(&app.get("/openapi.json").await, 200);
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let list = &doc["paths"]["/v1/jobs"]["get"];
    assert_eq!(list["security"][0]["bearer"], json!([]));
    assert!(list["responses"]["401"].is_object(), "{list}");
    assert!(doc["paths"]["/healthz"]["get"]["security"].is_null());
}
