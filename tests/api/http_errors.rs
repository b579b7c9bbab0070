//! Errors outside the job body: routes, methods, query parameters, path ids, request
//! ids, a store locked by another process (503 + `Retry-After`) and a request
//! slower than `--request-timeout-ms` (408).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use sqlx::{Connection, SqliteConnection};

use crate::support::{
    TestApp, app_with, expect_fields, expect_json, expect_problem, job, spawn_app,
};

#[tokio::test]
async fn an_unknown_route_is_a_404_problem() {
    let app = spawn_app().await;
    for (method, path) in [
        (Method::GET, "/v1/nothing"),
        (Method::GET, "/v1/jobs/a/b/c"),
        (Method::POST, "/v2/jobs"),
        (Method::GET, "/"),
    ] {
        let reply = app.send(app.request(method, path)).await;
        let body = expect_problem(&reply, 404);
        assert_eq!(body["detail"], "no such route", "{path}");
    }
}

#[tokio::test]
async fn a_wrong_method_is_a_405_problem_with_allow() {
    let app = spawn_app().await;
    for (method, path, allowed) in [
        (Method::DELETE, "/v1/jobs", "POST"),
        (
            Method::PUT,
            "/v1/jobs/0190b6a4-0000-7000-8000-000000000000",
            "GET",
        ),
        (Method::POST, "/v1/subscribers/s", "PUT"),
        (Method::POST, "/healthz", "GET"),
    ] {
        let reply = app.send(app.request(method, path)).await;
        let body = expect_problem(&reply, 405);
        assert_eq!(body["detail"], "this route does not accept that method");
        let allow = reply
            .header("allow")
            .unwrap_or_else(|| panic!("no allow: {path}"));
        assert!(allow.contains(allowed), "{path}: allow {allow}");
    }
}

#[tokio::test]
async fn bad_list_parameters_are_named() {
    let app = spawn_app().await;
    for (query, field) in [
        ("state=done", "state"),
        ("state=", "state"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=-1", "limit"),
        ("limit=many", "limit"),
        ("cursor=%21%21", "cursor"),
        ("cursor=c3ViLTE", "cursor"), // base64 of "sub-1": not a job id
        ("sort=asc", "sort"),
        ("limit=1&limit=2", "limit"),
    ] {
        let reply = app.get(&format!("/v1/jobs?{query}")).await;
        expect_fields(&reply, 422, &[field]);
    }
    let ok = app.get("/v1/jobs?limit=1000&state=dead").await;
    assert_eq!(
        expect_json(&ok, 200),
        json!({"items": [], "next_cursor": null})
    );
}

#[tokio::test]
async fn job_ids_must_be_uuids_and_exist() {
    let app = spawn_app().await;
    for path in ["/v1/jobs/not-a-uuid", "/v1/jobs/42/attempts"] {
        expect_fields(&app.get(path).await, 422, &["job_id"]);
    }
    let unknown = "0190b6a4-1c2d-7e3f-8a4b-5c6d7e8f9a0b";
    for path in [
        format!("/v1/jobs/{unknown}"),
        format!("/v1/jobs/{unknown}/attempts"),
    ] {
        let body = expect_problem(&app.get(&path).await, 404);
        assert_eq!(body["detail"], format!("job {unknown} does not exist"));
    }
}

#[tokio::test]
async fn a_client_request_id_is_echoed_on_success_and_error() {
    let app = spawn_app().await;
    for (i, path) in ["/healthz", "/v1/jobs", "/v1/nothing", "/v1/jobs?limit=0"]
        .into_iter()
        .enumerate()
    {
        let id = format!("client-req-{i}");
        let reply = app
            .send(app.request(Method::GET, path).header("x-request-id", &id))
            .await;
        assert_eq!(reply.header("x-request-id"), Some(id.as_str()), "{path}");
    }
    let a = app.get("/healthz").await;
    let b = app.get("/healthz").await;
    assert_ne!(a.header("x-request-id"), b.header("x-request-id"));
}

/// Holds SQLite's write lock from outside the server, as another process might.
async fn lock_database(app: &TestApp) -> SqliteConnection {
    let mut connection = SqliteConnection::connect(&app.database_url)
        .await
        .expect("connect");
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut connection)
        .await
        .expect("lock");
    connection
}

#[tokio::test]
async fn a_locked_store_answers_503_with_retry_after_and_stores_nothing() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let mut lock = lock_database(&app).await;
    let reply = app.post_json("/v1/jobs", &job("s", "e", json!({}))).await;
    let body = expect_problem(&reply, 503);
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("nothing was written")
    );
    sqlx::query("ROLLBACK").execute(&mut lock).await.unwrap();
    let page = expect_json(&app.get("/v1/jobs").await, 200);
    assert_eq!(page["items"], json!([]));
    // The same request succeeds once the store is free again.
    app.create_job(&job("s", "e", json!({}))).await;
}

/// Sends `request` over a raw socket and reads one response (status line, headers and
/// `content-length` bytes of body), giving up after five seconds.
fn raw_exchange(addr: &str, request: &[u8]) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(request).expect("write");
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).expect("read (timed out?)");
        received.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|v| v.trim().parse::<usize>().ok())
                .expect("content-length");
            if body.len() >= length || n == 0 {
                return (head.to_owned(), body.to_owned());
            }
        }
        assert!(n > 0, "connection closed early: {text}");
    }
}

#[tokio::test]
async fn a_body_that_never_completes_is_a_408_problem() {
    let app = app_with().flag("--request-timeout-ms", 300).start().await;
    app.create_subscriber("s").await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let request =
        b"POST /v1/jobs HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
                    content-length: 100\r\nx-request-id: slow-1\r\n\r\n{\"subscriber_id\":";
    let (head, body) = tokio::task::spawn_blocking(move || raw_exchange(&addr, request))
        .await
        .unwrap();
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 408"), "{head}");
    assert!(
        head.contains("content-type: application/problem+json"),
        "{head}"
    );
    assert!(head.contains("x-request-id: slow-1"), "{head}");
    let problem: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    assert_eq!(
        problem,
        json!({"type": "about:blank", "title": "Request Timeout", "status": 408,
               "detail": "the request took too long"})
    );
    let page = expect_json(&app.get("/v1/jobs").await, 200);
    assert_eq!(page["items"], json!([]));
}
