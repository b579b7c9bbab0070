//! `../shared/CASES.md` C-21 at a small size (issue #36 item 3): one event with a
//! payload of 262,000 bytes fanned out by its type to the subscribers of `bulk.*`. The
//! answer lists the jobs without echoing the payload; the store holds the payload once
//! (not once per job); every delivery carries the producer's exact bytes, signed for
//! its subscriber. (The full size, 10,000 subscribers with the store's and the
//! server's growth, is the `fanout --payload-bytes` benchmark.)

use sqlx::Connection;

use crate::app::Db;
use crate::receiver::Receiver;
use crate::setup::instance;
use crate::signing::verifies;

/// Subscribers of `bulk.*` here; the benchmark runs 10,000.
const SUBSCRIBERS: usize = 120;
/// C-21's payload size, in bytes of JSON text.
const PAYLOAD_BYTES: usize = 262_000;

/// A JSON object of exactly `bytes` bytes, with escapes and non-ASCII text that a
/// re-serialisation would change.
fn large_payload(bytes: usize) -> String {
    let head = r#"{"n":12345678901234567890,"f":1.0,"s":"\u00e9 é 😀 "#;
    let tail = r#""}"#;
    let fill = bytes - head.len() - tail.len();
    format!("{head}{}{tail}", "x".repeat(fill))
}

/// The bytes of text `column` summed over `table`, read straight from the database.
async fn stored_bytes(database_url: &str, column: &str, table: &str) -> i64 {
    if database_url.starts_with("sqlite:") {
        let sql = format!("SELECT COALESCE(SUM(LENGTH(CAST({column} AS BLOB))), 0) FROM {table}");
        let mut db = sqlx::SqliteConnection::connect(database_url).await.unwrap();
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut db)
            .await
            .unwrap()
    } else {
        let sql =
            format!("SELECT CAST(COALESCE(SUM(OCTET_LENGTH({column})), 0) AS BIGINT) FROM {table}");
        let mut db = sqlx::PgConnection::connect(database_url).await.unwrap();
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut db)
            .await
            .unwrap()
    }
}

async fn c21_one_large_payload_is_stored_once_and_delivered_byte_for_byte(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).start().await;
    let mut secrets = std::collections::HashMap::new();
    for n in 0..SUBSCRIBERS {
        let id = format!("bulk-{n:03}");
        let secret = app
            .subscriber(&id, &receiver.url(&format!("/{id}")), None)
            .await;
        let types = serde_json::json!({"event_types": ["bulk.*"]});
        let reply = app
            .patch_json(&format!("/v1/subscribers/{id}"), &types)
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        secrets.insert(format!("/{id}"), secret);
    }
    let payload = large_payload(PAYLOAD_BYTES);
    assert_eq!(payload.len(), PAYLOAD_BYTES);
    let event =
        format!(r#"{{"event_id":"bulk-1","event_type":"bulk.created","payload":{payload}}}"#);

    let reply = app.post_raw("/v1/events", event).await;

    assert_eq!(
        reply.status,
        201,
        "{}",
        &reply.text[..reply.text.len().min(300)]
    );
    assert_eq!(reply.json()["items"].as_array().unwrap().len(), SUBSCRIBERS);
    assert!(
        !reply.text.contains("xxxxxxxx"),
        "the answer echoes no payload"
    );
    assert!(
        reply.text.len() < SUBSCRIBERS * 1_024,
        "{} bytes",
        reply.text.len()
    );
    let url = &app.database_url;
    let stored = stored_bytes(url, "body", "payloads").await;
    assert_eq!(stored, PAYLOAD_BYTES as i64, "the payload stored once");
    let copies = stored_bytes(url, "payload", "jobs").await;
    assert_eq!(copies, 0, "no job row holds a copy");

    // Each pass delivers what is due; on a machine busy enough for an attempt to time
    // out, its retry is due after the backoff, so the clock moves on between passes.
    let reached = || -> std::collections::HashSet<String> {
        receiver.requests().into_iter().map(|r| r.path).collect()
    };
    for _ in 0..20 {
        if reached().len() >= SUBSCRIBERS {
            break;
        }
        app.run_pending().await;
        app.advance(60_000);
    }
    assert_eq!(reached().len(), SUBSCRIBERS, "every subscriber reached");
    let requests = receiver.requests();
    for request in &requests {
        assert_eq!(&request.body[..], payload.as_bytes(), "{}", request.path);
        assert_eq!(request.header("webhook-id"), "bulk-1");
        assert!(
            verifies(&secrets[&request.path], request),
            "{}",
            request.path
        );
    }
}

crate::on_both_backends!(c21_one_large_payload_is_stored_once_and_delivered_byte_for_byte);
