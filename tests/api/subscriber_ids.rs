//! Subscriber ids `.` and `..` are refused (issue #15 part 5.7): they are URL
//! dot-segments, so `Location: /v1/subscribers/..` would name `/v1/` in any client that
//! resolves the reference (RFC 3986 §5.2.4). HTTP clients resolve them before sending,
//! so the PUT goes over a raw connection, as a hostile or careless client sends it.

use std::io::{Read, Write};

use serde_json::json;

use crate::support::{expect_fields, expect_json, job, spawn_app};

/// Sends a PUT of subscriber `id` as written and returns the status and body.
fn raw_put(addr: &str, id: &str) -> (u16, String) {
    let body = r#"{"url":"https://example.com/hook"}"#;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "PUT /v1/subscribers/{id} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

#[tokio::test]
async fn dot_segment_ids_are_refused_naming_the_field() {
    let app = spawn_app().await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    for id in [".", ".."] {
        let addr = addr.clone();
        let (status, body) = tokio::task::spawn_blocking(move || raw_put(&addr, id))
            .await
            .unwrap();
        assert_eq!(status, 422, "{id}: {body}");
        let problem: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(problem["errors"][0]["field"], "subscriber_id", "{problem}");
    }
    let listed = expect_json(&app.get("/v1/subscribers").await, 200);
    assert_eq!(listed["items"], json!([]));

    // A job or a fan-out naming one is refused the same way.
    let reply = app
        .post_json("/v1/jobs", &job("..", "e-1", json!({})))
        .await;
    expect_fields(&reply, 422, &["subscriber_id"]);
    // Ids that merely contain dots are fine.
    let (status, body) = tokio::task::spawn_blocking(move || raw_put(&addr, "...v2"))
        .await
        .unwrap();
    assert_eq!(status, 201, "{body}");
}
