//! Hostile input (issue #7): oversized headers (431) and request targets (414) are
//! refused with problem+json before any handler runs, and a client that trickles its
//! headers is disconnected.

use std::time::{Duration, Instant};

use reqwest::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{app_with, expect_problem, spawn_app};

#[tokio::test]
async fn too_many_or_too_large_headers_are_431() {
    let app = spawn_app().await;
    let mut many = app.request(Method::GET, "/v1/subscribers");
    for n in 0..70 {
        many = many.header(format!("x-filler-{n}"), "1");
    }
    let reply = app.send(many).await;
    let body = expect_problem(&reply, 431);
    assert!(
        body["detail"].as_str().unwrap().contains("header"),
        "{body}"
    );

    let large = app
        .request(Method::GET, "/v1/subscribers")
        .header("x-filler", "a".repeat(17 * 1024));
    expect_problem(&app.send(large).await, 431);

    let fine = app
        .request(Method::GET, "/v1/subscribers")
        .header("x-filler", "a".repeat(8 * 1024));
    assert_eq!(app.send(fine).await.status, 200);
}

#[tokio::test]
async fn a_huge_request_target_is_414() {
    let app = spawn_app().await;
    let path = format!("/v1/jobs?event_id={}", "e".repeat(9 * 1024));
    let reply = app.get(&path).await;
    expect_problem(&reply, 414);
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_disconnected() {
    let app = app_with()
        .flag("--header-read-timeout-ms", 300)
        .start()
        .await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: deferhook\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    // The headers never end: the server closes the connection after its timeout.
    let closed = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "still open after 5 s");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    // Other clients are served meanwhile and afterwards.
    assert_eq!(app.get("/healthz").await.status, 200);
}
