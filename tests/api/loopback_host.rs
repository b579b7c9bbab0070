//! Without API tokens the API answers only requests addressed to a loopback host
//! (issue #15 part 5.6): a page in the operator's browser that re-resolves its own name
//! to 127.0.0.1 (DNS rebinding) sends its own name in `Host`, and is answered 421
//! Misdirected Request (RFC 9110 §15.5.20) without the request reaching a handler. With
//! tokens, the token decides.

use reqwest::Method;
use serde_json::json;

use crate::support::{TestApp, app_with, expect_json, expect_problem, spawn_app};

const TOKEN: &str = "loopback-test-token-3c9e1f";

async fn with_host(app: &TestApp, method: Method, path: &str, host: &str) -> crate::support::Reply {
    let request = app.request(method, path).header("host", host);
    let request = if path.starts_with("/v1/subscribers/") {
        request.json(&json!({"url": "https://example.com/hook"}))
    } else {
        request
    };
    app.send(request).await
}

#[tokio::test]
async fn without_tokens_another_host_is_misdirected() {
    let app = spawn_app().await;
    for host in [
        "attacker.example",
        "attacker.example:8080",
        "10.0.0.1:8080",
        "localhost.attacker.example",
    ] {
        for (method, path) in [
            (Method::PUT, "/v1/subscribers/billing"),
            (Method::GET, "/v1/subscribers"),
            (Method::GET, "/metrics"),
        ] {
            let reply = with_host(&app, method, path, host).await;
            let body = expect_problem(&reply, 421);
            let detail = body["detail"].as_str().unwrap();
            assert!(detail.contains("loopback"), "{detail}");
            assert!(!reply.text.contains("attacker"), "the host is not echoed");
        }
    }
    // Nothing was written.
    let listed = expect_json(&app.get("/v1/subscribers").await, 200);
    assert_eq!(listed["items"], json!([]));
}

#[tokio::test]
async fn without_tokens_loopback_hosts_are_served() {
    let app = spawn_app().await;
    for (n, host) in [
        "localhost",
        "localhost:8080",
        "127.0.0.1",
        "127.0.0.2:1",
        "[::1]:8080",
    ]
    .into_iter()
    .enumerate()
    {
        let path = format!("/v1/subscribers/s{n}");
        let reply = with_host(&app, Method::PUT, &path, host).await;
        expect_json(&reply, 201);
    }
}

#[tokio::test]
async fn with_tokens_the_host_is_not_checked() {
    let app = app_with().flag("--api-token", TOKEN).start().await;
    let reply = app
        .send(
            app.request(Method::GET, "/v1/subscribers")
                .header("host", "deferhook.internal.example:8080")
                .bearer_auth(TOKEN),
        )
        .await;
    expect_json(&reply, 200);
    let refused = with_host(
        &app,
        Method::GET,
        "/v1/subscribers",
        "deferhook.internal.example",
    )
    .await;
    expect_problem(&refused, 401);
}

/// A page of another origin posting a simple form to `http://127.0.0.1:…` sends a
/// loopback `Host` but its own `Origin`: refused (403) without tokens, so it cannot
/// cancel a job (review of issue #15), even from another port of this host (issue #34
/// part 4.2: a page on `http://localhost:3000`); this server's own origin is served.
#[tokio::test]
async fn without_tokens_another_origin_is_forbidden() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let created = app
        .create_job(&crate::support::job("s", "e", json!({"delay_ms": 60_000})))
        .await;
    let cancel = format!("/v1/jobs/{}/cancel", created["id"].as_str().unwrap());
    for origin in [
        "https://attacker.example",
        "null",
        "http://localhost.attacker.example",
        "http://localhost:3000",
        "http://127.0.0.1:3000",
    ] {
        let reply = app
            .send(
                app.request(Method::POST, &cancel)
                    .header("origin", origin)
                    .header("content-type", "application/x-www-form-urlencoded"),
            )
            .await;
        let body = expect_problem(&reply, 403);
        assert!(
            body["detail"].as_str().unwrap().contains("origin"),
            "{body}"
        );
    }
    let job = expect_json(&app.get(&cancel.replace("/cancel", "")).await, 200);
    assert_eq!(job["state"], "scheduled", "nothing was cancelled");
    let own = app.base_url.clone();
    let reply = app
        .send(app.request(Method::POST, &cancel).header("origin", own))
        .await;
    assert_eq!(expect_json(&reply, 200)["state"], "cancelled");
}

/// An HTTP/1.1 request without `Host` is a 400 (RFC 9112 §3.2); HTTP/1.0 may omit it.
#[tokio::test]
async fn without_tokens_an_http_1_1_request_needs_a_host() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = spawn_app().await;
    let address = app.base_url.trim_start_matches("http://").to_owned();
    for (request, status) in [
        ("GET /healthz HTTP/1.1\r\nconnection: close\r\n\r\n", "400"),
        ("GET /healthz HTTP/1.0\r\n\r\n", "200"),
    ] {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        let line = answer.lines().next().unwrap_or("");
        assert!(line.contains(status), "{request:?} answered {line}");
    }
}
