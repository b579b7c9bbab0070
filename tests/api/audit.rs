//! The audit trail (issue #16 part 9), on both backends: every successful operator
//! action is listed by `GET /v1/audit`, newest first, with its time, target,
//! parameters (never a secret) and the fingerprint of the token that made it (never the
//! token); a refused action leaves no entry. Each entry carries the request's
//! `x-request-id` (the client's choice) and the server's own id of the request, which
//! no client can choose (issue #34 part 4.10).

use deferhook::domain::JobEvent;
use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::app::{Db, Reply, TestApp, answer};
use crate::support::{app_with, at, expect_fields, expect_json, expect_problem, job};

const TOKEN: &str = "audit-token-5c1e0b7d93";
/// A caller-chosen secret (the Standard Webhooks example).
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// `sha256:` and the first 16 hex digits of the token's SHA-256.
fn fingerprint(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

async fn call(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> Reply {
    let mut request = app.request(method, path).bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    app.send(request).await
}

async fn audit(app: &TestApp, query: &str) -> Value {
    expect_json(
        &call(app, Method::GET, &format!("/v1/audit{query}"), None).await,
        200,
    )
}

/// Makes job `created` retrying: its first attempt answered 503, retried in 60 s.
async fn fail_once(app: &TestApp) {
    let claimed = app.claim().await.remove(0);
    let event = JobEvent::RetryableFailure {
        retry_at: app.now().plus_ms(60_000),
    };
    let result = answer(
        AttemptOutcome::Retryable,
        Some(503),
        Some(ErrorClass::Http5xx),
    );
    app.record(&claimed, event, result).await;
}

async fn every_operator_action_is_recorded_without_secrets(db: Db) {
    let app = app_with()
        .backend(db)
        .flag("--api-token", TOKEN)
        .start()
        .await;
    let ok = |reply: Reply| {
        assert!((200..300).contains(&reply.status), "{}", reply.text);
        reply.json()
    };
    let put = json!({"url": "https://example.com/hooks", "secret": SECRET});
    ok(call(&app, Method::PUT, "/v1/subscribers/acme", Some(put)).await);
    app.advance(1);
    let patch = json!({"enabled": false});
    ok(call(&app, Method::PATCH, "/v1/subscribers/acme", Some(patch)).await);
    app.advance(1);
    let resume = json!({"subscriber_ids": ["acme"]});
    ok(call(&app, Method::POST, "/v1/subscribers/resume", Some(resume)).await);
    app.advance(1);
    let rotate =
        json!({"secret": "whsec_QmVzdCBzZWNyZXQgZXZlciBjaG9zZW4hIQ==", "grace_seconds": 60});
    let rotated = ok(call(
        &app,
        Method::POST,
        "/v1/subscribers/acme/secret/rotate",
        Some(rotate),
    )
    .await);
    let rotated_secret = rotated["secret"].as_str().unwrap().to_owned();
    app.advance(1);
    let limit = json!({"max_in_flight": 3});
    ok(call(
        &app,
        Method::PUT,
        "/v1/destinations/EXAMPLE.com:443",
        Some(limit),
    )
    .await);
    app.advance(1);

    let body = job(
        "acme",
        "evt-1",
        json!({"delay_ms": 10_000, "ttl_ms": 3_600_000}),
    );
    let created = ok(call(&app, Method::POST, "/v1/jobs", Some(body)).await);
    let id = created["id"].as_str().unwrap().to_owned();
    let reschedule = json!({"deliver_at": at(5)});
    ok(call(
        &app,
        Method::PATCH,
        &format!("/v1/jobs/{id}"),
        Some(reschedule),
    )
    .await);
    app.advance(1);
    fail_once(&app).await;
    ok(call(&app, Method::POST, &format!("/v1/jobs/{id}/retry"), None).await);
    app.advance(1);
    ok(call(&app, Method::POST, &format!("/v1/jobs/{id}/cancel"), None).await);
    app.advance(1);

    let dry = json!({"all": true, "max_jobs": 10, "rate_per_second": 5, "dry_run": true});
    ok(call(&app, Method::POST, "/v1/replays", Some(dry)).await);
    let replay = json!({"all": true, "max_jobs": 10, "rate_per_second": 5});
    let replay = ok(call(&app, Method::POST, "/v1/replays", Some(replay)).await);
    let replay_id = replay["id"].as_str().unwrap().to_owned();
    app.advance(1);
    ok(call(
        &app,
        Method::POST,
        &format!("/v1/replays/{replay_id}/cancel"),
        None,
    )
    .await);
    app.advance(1);
    ok(call(&app, Method::DELETE, "/v1/subscribers/acme", None).await);

    let listed = audit(&app, "").await;
    let text = listed.to_string();
    for secret in [TOKEN, SECRET, rotated_secret.as_str()] {
        assert!(!text.contains(secret), "the trail shows a secret: {text}");
    }
    let items = listed["items"].as_array().unwrap();
    let seen: Vec<(&str, &Value)> = items
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), &e["target"]))
        .collect();
    let expected = [
        ("subscriber.delete", json!("acme")),
        ("replay.cancel", json!(replay_id)),
        ("replay.create", json!(replay_id)),
        ("job.cancel", json!(id)),
        ("job.retry", json!(id)),
        ("job.reschedule", json!(id)),
        ("destination.put", json!("example.com:443")),
        ("subscriber.rotate_secret", json!("acme")),
        ("subscriber.resume", Value::Null),
        ("subscriber.patch", json!("acme")),
        ("subscriber.put", json!("acme")),
    ];
    let expected: Vec<(&str, &Value)> = expected.iter().map(|(a, t)| (*a, t)).collect();
    assert_eq!(
        seen, expected,
        "newest first, no dry run, no producer request"
    );
    for entry in items {
        assert_eq!(entry["actor"], fingerprint(TOKEN), "{entry}");
        assert!(
            entry["request_id"]
                .as_str()
                .is_some_and(|id| !id.is_empty())
        );
    }
    let put = &items[10];
    // A URL is kept as its origin: its path and query may carry a credential.
    assert_eq!(put["parameters"], json!({"url": "https://example.com/…"}));
    assert_eq!(put["status"], 201);
    assert_eq!(put["at"], at(0));
    assert_eq!(items[9]["parameters"], json!({"enabled": false}));
    assert_eq!(items[9]["at"], at(1));
    assert_eq!(items[8]["parameters"], json!({"subscriber_ids": ["acme"]}));
    assert_eq!(items[7]["parameters"], json!({"grace_seconds": 60}));
    assert_eq!(items[0]["parameters"], Value::Null);

    // pages, filters
    let first = audit(&app, "?limit=4").await;
    assert_eq!(first["items"].as_array().unwrap().len(), 4);
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest = audit(&app, &format!("?limit=100&cursor={cursor}")).await;
    assert_eq!(rest["items"].as_array().unwrap().len(), 7);
    assert_eq!(rest["items"][0], items[4]);
    assert_eq!(rest["next_cursor"], Value::Null);
    let cancels = audit(&app, "?action=job.cancel").await;
    assert_eq!(cancels["items"], json!([items[3]]));
    let about_acme = audit(&app, "?target=acme").await;
    assert_eq!(
        about_acme["items"].as_array().unwrap().len(),
        4,
        "the resume names no target"
    );
    let bad = call(&app, Method::GET, "/v1/audit?action=launch", None).await;
    expect_fields(&bad, 422, &["action"]);
}

async fn a_refused_action_leaves_no_entry(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("acme").await;
    let count = |listed: &Value| listed["items"].as_array().unwrap().len();
    let before = app.get_json("/v1/audit").await;
    assert_eq!(count(&before), 1);
    assert_eq!(
        before["items"][0]["actor"],
        Value::Null,
        "no tokens: no actor"
    );

    let unknown = app
        .patch_json("/v1/subscribers/nobody", &json!({"enabled": true}))
        .await;
    expect_problem(&unknown, 404);
    let invalid = app
        .patch_json("/v1/subscribers/acme", &json!({"max_in_flight": 0}))
        .await;
    expect_fields(&invalid, 422, &["max_in_flight"]);
    let malformed = app
        .send(app.request(Method::POST, "/v1/jobs/nope/cancel"))
        .await;
    expect_problem(&malformed, 422);
    let missing = app
        .send(app.request(Method::DELETE, "/v1/subscribers/nobody"))
        .await;
    expect_problem(&missing, 404);
    assert_eq!(app.get_json("/v1/audit").await, before);
}

/// An actor copies the `x-request-id` of another's entry: the two entries share
/// `request_id`, but each has the server's own id of its request, as answered in
/// `x-server-request-id`, and the two differ.
async fn a_copied_request_id_does_not_copy_the_server_s(db: Db) {
    let app = app_with()
        .backend(db)
        .flag("--api-token", TOKEN)
        .start()
        .await;
    let put = json!({"url": "https://example.com/hooks"});
    let first = call(&app, Method::PUT, "/v1/subscribers/acme", Some(put)).await;
    assert_eq!(first.status, 201, "{}", first.text);
    let first_server_id = first.header("x-server-request-id").unwrap().to_owned();
    assert_eq!(
        first.header("x-request-id"),
        Some(first_server_id.as_str()),
        "a client that sends no id sees one: the server's"
    );
    let listed = audit(&app, "").await;
    let original = &listed["items"][0];
    assert_eq!(original["request_id"], first_server_id.as_str());
    assert_eq!(original["server_request_id"], first_server_id.as_str());

    let copied = original["request_id"].as_str().unwrap().to_owned();
    app.advance(1);
    let request = app
        .request(Method::PATCH, "/v1/subscribers/acme")
        .bearer_auth(TOKEN)
        .header("x-request-id", &copied)
        .json(&json!({"enabled": false}));
    let second = app.send(request).await;
    assert_eq!(second.status, 200, "{}", second.text);
    assert_eq!(second.header("x-request-id"), Some(copied.as_str()));
    let second_server_id = second.header("x-server-request-id").unwrap().to_owned();
    assert_ne!(second_server_id, first_server_id);

    let listed = audit(&app, "").await;
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{listed}");
    let (patch, put) = (&items[0], &items[1]);
    assert_eq!(patch["action"], "subscriber.patch");
    assert_eq!(patch["request_id"], put["request_id"], "the copy is kept");
    assert_eq!(patch["server_request_id"], second_server_id.as_str());
    assert_eq!(put["server_request_id"], first_server_id.as_str());
    assert_ne!(patch["server_request_id"], put["server_request_id"]);
}

/// The audit table is gone (dropped from outside the server), so every audit write
/// fails: the action still answers, and the failure is counted.
/// DESIGN §5.11: the entry is written before the action, so one that cannot be
/// written refuses the action (503, counted) instead of letting it go unrecorded.
async fn an_action_whose_entry_cannot_be_written_is_refused_and_not_taken(db: Db) {
    use sqlx::Connection;
    let app = app_with().backend(db).start().await;
    app.create_subscriber("acme").await;
    const DROP: &str = "DROP TABLE audit";
    match db {
        Db::Sqlite => {
            let mut connection = sqlx::SqliteConnection::connect(&app.database_url)
                .await
                .unwrap();
            sqlx::query(DROP).execute(&mut connection).await.unwrap();
        }
        Db::Postgres => {
            let mut connection = sqlx::PgConnection::connect(&app.database_url)
                .await
                .unwrap();
            sqlx::query(DROP).execute(&mut connection).await.unwrap();
        }
    }
    let failures = |text: &str| crate::app::metric(text, "deferhook_audit_write_failures_total");
    let before = failures(&app.metrics().await);
    let paused = app
        .patch_json("/v1/subscribers/acme", &json!({"enabled": false}))
        .await;
    expect_problem(&paused, 503);
    assert!(paused.header("retry-after").is_some());
    let after = failures(&app.metrics().await);
    assert!(after > before, "counted: {before} -> {after}");
    let read = app.get_json("/v1/subscribers/acme").await;
    assert_eq!(
        read["enabled"], true,
        "the action was taken without its entry"
    );
}

crate::on_both_backends!(
    every_operator_action_is_recorded_without_secrets,
    a_refused_action_leaves_no_entry,
    a_copied_request_id_does_not_copy_the_server_s,
    an_action_whose_entry_cannot_be_written_is_refused_and_not_taken,
);
