//! Hostile input (issue #7): oversized headers (431) and request targets (414) are
//! refused with problem+json before any handler runs.

use reqwest::Method;

use crate::support::{expect_problem, spawn_app};

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
