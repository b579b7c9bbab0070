//! Edges of the on-call API (issue #16) a review found, on both backends: cursors that
//! belong to one listing, the audit trail's credentials, targets and slow writes, the
//! retry advice at the edges of the retry route, a deleted subscriber's history, the
//! reserved subscriber id `resume`, and query strings on routes that take none. Each
//! test failed before its fix.

use deferhook::domain::JobEvent;
use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::job::transition;
use deferhook::domain::policy::ErrorClass;
use deferhook::store::{AttemptResult, LeaseRef, OutcomeRecord};
use serde_json::{Value, json};

use crate::app::{Db, TestApp, answer};
use crate::support::{app_with, expect_fields, expect_json, expect_problem};

fn cursor_of(page: &Value) -> String {
    page["next_cursor"]
        .as_str()
        .unwrap_or_else(|| panic!("a next page: {page}"))
        .to_owned()
}

/// DESIGN §5.1: "a cursor this listing did not return is a 422". `:` is legal in a
/// subscriber id, so without a listing's tag a health cursor (`h:<n>:<id>`) would pass
/// as an id cursor, and the id cursor of a subscriber named `h:0:…` as a health
/// cursor, each silently skipping subscribers.
async fn cursors_of_the_two_subscriber_listings_are_not_interchangeable(db: Db) {
    let app = app_with().backend(db).start().await;
    for id in ["h:0:b", "m", "z"] {
        app.create_subscriber(id).await;
    }
    // id order: "h:0:b" < "m" < "z"; its cursor after the first page is "h:0:b".
    let by_id = app.get_json("/v1/subscribers?limit=1").await;
    assert_eq!(by_id["items"][0]["id"], "h:0:b");
    let id_cursor = cursor_of(&by_id);
    let reply = app
        .get(&format!(
            "/v1/subscribers?health=healthy&cursor={id_cursor}"
        ))
        .await;
    expect_fields(&reply, 422, &["cursor"]);

    // health order (all 0 failing jobs): by id; its cursor after "h:0:b" is "h:0:h:0:b".
    let by_health = app.get_json("/v1/subscribers?health=healthy&limit=1").await;
    let health_cursor = cursor_of(&by_health);
    let reply = app
        .get(&format!("/v1/subscribers?cursor={health_cursor}"))
        .await;
    expect_fields(&reply, 422, &["cursor"]);
}

/// DESIGN §5.11: a subscriber URL that carries its receiver's credential in the query
/// string (`?access_token=…`, the usual alternative when userinfo is refused) would
/// stay in the trail for the audit retention, readable by every API token: the trail
/// keeps a URL's origin only.
async fn the_audit_trail_does_not_keep_a_credential_from_a_urls_query(db: Db) {
    let app = app_with().backend(db).start().await;
    let leaked = "tok_3bd1f0e7c2a94c55";
    let url = format!("https://example.com/hook?access_token={leaked}");
    app.put_subscriber("acme", &json!({ "url": url })).await;
    let changed = app
        .patch_json(
            "/v1/subscribers/acme",
            &json!({"url": "https://example.com/hook?access_token=rotated"}),
        )
        .await;
    expect_json(&changed, 200);
    let reply = app.get("/v1/subscribers/acme").await;
    assert!(
        !reply.text.contains(leaked),
        "the current view no longer has it"
    );
    let trail = app.get("/v1/audit").await;
    assert_eq!(trail.status, 200);
    assert!(
        !trail.text.contains(leaked),
        "the rotated-away credential is still in the audit trail: {}",
        trail.text
    );
}

/// Reads `job` and asks to retry it now: the advice read must not be `yes` when the
/// retry route refuses it (409). `context` names the case in the failure.
async fn assert_no_yes_for_a_refused_retry(app: &TestApp, job: &Value, context: &str) {
    let read = app.job_now(job).await;
    let retry = app
        .post_json(
            &format!("/v1/jobs/{}/retry", job["id"].as_str().unwrap()),
            &json!({}),
        )
        .await;
    let advice = read["retry_advice"]["verdict"].clone();
    assert!(
        !(advice == "yes" && retry.status == 409),
        "{context}: state {}, advice {advice}, but the retry is refused: {}",
        read["state"],
        retry.text
    );
}

/// DESIGN §5.9: `yes` means "POST /v1/jobs/{id}/retry sends it now", so it is never
/// advised for a job that route refuses (409): here one whose last allowed attempt
/// lost its lease, which reads `retrying` (§2.2) until the sweep ends it.
async fn retry_advice_yes_is_never_given_for_a_job_the_retry_route_refuses(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("acme").await;
    // (a) max_attempts 1, its only attempt's lease expired (30 s)
    let spent = app
        .job("acme", "evt-spent", json!({"max_attempts": 1}))
        .await;
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 1);
    app.advance(31_000);
    let read = app.job_now(&spent).await;
    assert_eq!(read["state"], "retrying", "{read}");
    assert_no_yes_for_a_refused_retry(&app, &spent, "every attempt spent").await;
}

/// As above: a `retrying` job read after its deadline, before the sweep ends it.
async fn retry_advice_yes_is_never_given_past_the_deadline(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("acme").await;
    let late = app.job("acme", "evt-late", json!({"ttl_ms": 10_000})).await;
    let claimed = app.claim().await.remove(0);
    assert_eq!(claimed.job_id.to_string(), late["id"].as_str().unwrap());
    let retry_at = app.now().plus_ms(5_000);
    let result = answer(
        AttemptOutcome::Retryable,
        Some(503),
        Some(ErrorClass::Http5xx),
    );
    app.record(&claimed, JobEvent::RetryableFailure { retry_at }, result)
        .await;
    app.advance(11_000);
    assert_no_yes_for_a_refused_retry(&app, &late, "past its deadline").await;
}

/// DESIGN §5.3.1: a deleted subscriber's id may be created again as a new subscriber
/// that "shares nothing" with the deleted one; "A late `410` of the old subscriber's
/// attempt pauses the tombstone, never the new subscriber". Also its health and the
/// event reads must not mix the two.
async fn a_late_410_after_delete_and_recreate_leaves_the_new_subscriber_alone(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("acme").await;
    let old = app.job("acme", "evt-1", json!({})).await;
    let claimed = app.claim().await.remove(0);
    app.advance(1_000);
    let deleted = app
        .send(app.request(reqwest::Method::DELETE, "/v1/subscribers/acme"))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    app.create_subscriber("acme").await;
    let new = app.job("acme", "evt-1", json!({})).await;
    assert_ne!(new["id"], old["id"]);
    app.advance(1_000);
    // the old attempt's receiver answers 410, late
    let now = app.now();
    let record = OutcomeRecord {
        lease: LeaseRef {
            job_id: claimed.job_id,
            token: claimed.lease_token,
        },
        subscriber_id: claimed.subscriber_id.clone(),
        attempt: claimed.attempt,
        started_at: now,
        finished_at: now,
        attempt_timeout_ms: 10_000,
        result: AttemptResult {
            outcome: AttemptOutcome::Terminal,
            status: Some(410),
            error_class: Some(ErrorClass::Http4xx),
            reason: Some("410 Gone".into()),
            body_excerpt: None,
            resent: false,
        },
        retry_after: None,
        transition: transition(
            &claimed.snapshot,
            JobEvent::TerminalFailure {
                reason: deferhook::domain::DeadReason::NonRetryableResponse,
            },
            now,
        )
        .unwrap(),
        pause_subscriber: true,
    };
    let fenced = app.store.record_outcomes(&[record], now).await;
    assert!(fenced.is_ok(), "{fenced:?}");
    let acme = app.get_json("/v1/subscribers/acme").await;
    assert_eq!(acme["enabled"], true, "{acme}");
    assert_eq!(acme["health"]["status"], "healthy", "{acme}");
    assert_eq!(acme["health"]["last_error"], Value::Null, "{acme}");
    let old_read = app.job_now(&old).await;
    assert_eq!(old_read["state"], "dead", "{old_read}");
    assert_eq!(old_read["dead_reason"], "subscriber_deleted", "{old_read}");
    let attempts = app.attempts(&old).await;
    assert_eq!(
        attempts[0]["status"], 410,
        "the late answer lands: {attempts:?}"
    );
    let failing = app.get_json("/v1/subscribers?health=failing").await;
    assert_eq!(failing["items"], json!([]), "{failing}");
    let paused = app.get_json("/v1/subscribers?health=paused").await;
    assert_eq!(paused["items"], json!([]), "{paused}");
    let resumed = expect_json(
        &app.post_json("/v1/subscribers/resume", &json!({"paused_reason": "gone"}))
            .await,
        200,
    );
    assert_eq!(
        resumed["resumed"], 0,
        "a tombstone is never resumed: {resumed}"
    );
    let summary = app.get_json("/v1/events/evt-1").await;
    assert_eq!(summary["jobs"]["scheduled"], 1, "{summary}");
    assert_eq!(summary["jobs"]["dead"], 1, "{summary}");
    let stats = app.get_json("/v1/subscribers/acme/stats").await;
    assert_eq!(stats["last_failure"], Value::Null, "{stats}");
}

/// DESIGN §5.11: a slow audit write (here the `audit` table locked by another session,
/// as a `VACUUM FULL`, a backup or a migration would) never turns an action into a 408
/// (the client would not know whether it happened). The entry is written before the
/// action; when it is not written within half the request timeout (here 500 ms) the
/// action is refused with a prompt 503 and not taken, and the entry, written once the
/// lock goes, is withdrawn. Once the table is free the same action is taken and
/// recorded.
async fn a_slow_audit_write_refuses_the_action_promptly_and_leaves_no_entry() {
    use sqlx::Connection;
    let app = app_with()
        .backend(Db::Postgres)
        .flag("--request-timeout-ms", 1_000)
        .start()
        .await;
    app.create_subscriber("acme").await;
    let mut locker = sqlx::PgConnection::connect(&app.database_url)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut locker).await.unwrap();
    sqlx::query("LOCK TABLE audit IN ACCESS EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .unwrap();
    let failures = |text: &str| crate::app::metric(text, "deferhook_audit_write_failures_total");
    let before = failures(&app.metrics().await);
    let paused = app
        .patch_json("/v1/subscribers/acme", &json!({"enabled": false}))
        .await;
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    expect_problem(&paused, 503);
    assert!(paused.header("retry-after").is_some());
    assert!(failures(&app.metrics().await) > before);
    let left = std::time::Instant::now();
    loop {
        let trail = app.get_json("/v1/audit?action=subscriber.patch").await;
        if trail["items"].as_array().unwrap().is_empty() {
            break;
        }
        assert!(
            left.elapsed() < std::time::Duration::from_secs(10),
            "the entry of an action not taken stayed: {trail}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let read = app.get_json("/v1/subscribers/acme").await;
    assert_eq!(read["enabled"], true, "the action was taken");

    let paused = app
        .patch_json("/v1/subscribers/acme", &json!({"enabled": false}))
        .await;
    assert_eq!(expect_json(&paused, 200)["enabled"], false);
    let trail = app.get_json("/v1/audit?action=subscriber.patch").await;
    assert_eq!(trail["items"][0]["status"], 200, "{trail}");
}

#[tokio::test]
async fn a_slow_audit_write_on_postgres() {
    if crate::pg::reachable().await {
        a_slow_audit_write_refuses_the_action_promptly_and_leaves_no_entry().await
    }
}

/// DESIGN §5.3.1: "A replay never matches a deleted subscriber's jobs (whatever their
/// `dead_reason`)". A job that died of transient failures *before* its subscriber was
/// deleted keeps `dead_reason: max_attempts`; its view and its event summary must not
/// advise a `replay` no replay can do: the advice is `no`.
async fn no_replay_advice_for_a_deleted_subscribers_dead_job(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("acme").await;
    let dead = app
        .job("acme", "evt-dead", json!({"max_attempts": 1}))
        .await;
    let claimed = app.claim().await.remove(0);
    let retry_at = app.now().plus_ms(1_000);
    let result = answer(
        AttemptOutcome::Retryable,
        Some(503),
        Some(ErrorClass::Http5xx),
    );
    app.record(&claimed, JobEvent::RetryableFailure { retry_at }, result)
        .await;
    let read = app.job_now(&dead).await;
    assert_eq!(read["state"], "dead", "{read}");
    assert_eq!(
        read["retry_advice"]["verdict"], "replay",
        "before the deletion: {read}"
    );

    let deleted = app
        .send(app.request(reqwest::Method::DELETE, "/v1/subscribers/acme"))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    let dry = expect_json(
        &app.post_json(
            "/v1/replays",
            &json!({"event_id": "evt-dead", "max_jobs": 10, "rate_per_second": 1, "dry_run": true}),
        )
        .await,
        200,
    );
    assert_eq!(dry["matched"], 0, "no replay matches it: {dry}");
    let read = app.job_now(&dead).await;
    assert_ne!(
        read["retry_advice"]["verdict"], "replay",
        "after the deletion: {read}"
    );
    let summary = app.get_json("/v1/events/evt-dead").await;
    assert_eq!(summary["retry_advice"].get("replay"), None, "{summary}");
}

/// DESIGN §5.1: "a cursor this listing did not return is a 422". The UUID-keyed
/// listings (`/v1/events`, `/v1/replays`, `/v1/audit`) have keys of one shape: only
/// the listing's tag keeps one from starting at an arbitrary place with another's.
async fn a_cursor_of_the_audit_trail_is_refused_by_the_event_and_replay_listings(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("a").await;
    app.create_subscriber("b").await;
    let trail = app.get_json("/v1/audit?limit=1").await;
    let cursor = cursor_of(&trail);
    for listing in ["/v1/events", "/v1/replays"] {
        let reply = app.get(&format!("{listing}?cursor={cursor}")).await;
        assert_eq!(reply.status, 422, "{listing}: {}", reply.text);
    }
}

/// DESIGN §5.11: `target` is filtered exactly, and a job id in the path is parsed by
/// `Uuid::parse_str`, which also takes upper case and no hyphens: the entry keeps the
/// id in the form every view shows, so no spelling keeps an action out of a search of
/// the trail (`GET /v1/audit?target=<job id>`).
async fn the_audit_target_of_a_job_action_is_the_jobs_id_whatever_its_spelling(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("acme").await;
    let cancelled = app.job("acme", "evt-a", json!({})).await;
    let rescheduled = app.job("acme", "evt-b", json!({})).await;
    let id = |job: &Value| job["id"].as_str().unwrap().to_owned();
    let upper = id(&cancelled).to_uppercase();
    expect_json(
        &app.post_json(&format!("/v1/jobs/{upper}/cancel"), &json!({}))
            .await,
        200,
    );
    let simple = id(&rescheduled).replace('-', "");
    expect_json(
        &app.patch_json(
            &format!("/v1/jobs/{simple}"),
            &json!({"deliver_at": "2026-11-30T13:00:00Z"}),
        )
        .await,
        200,
    );
    for (job, action) in [(&cancelled, "job.cancel"), (&rescheduled, "job.reschedule")] {
        let trail = app.get_json(&format!("/v1/audit?target={}", id(job))).await;
        let actions: Vec<&Value> = trail["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| &e["action"])
            .collect();
        assert_eq!(actions, [&json!(action)], "found by the job's id: {trail}");
    }
}

/// DESIGN §5.3: `resume` is not a subscriber id, however encoded: `PUT
/// /v1/subscribers/%72esume` would otherwise create a subscriber whose URL
/// (`Location: /v1/subscribers/resume`) is the resume route (GET/PATCH/DELETE there
/// answer 405). Refused with 422, as `..` is.
async fn resume_is_refused_as_a_subscriber_id(db: Db) {
    let app = app_with().backend(db).start().await;
    let reply = app
        .put_json(
            "/v1/subscribers/%72esume",
            &json!({"url": "https://example.com/hook"}),
        )
        .await;
    assert_eq!(
        reply.status,
        422,
        "created? Location {:?}: {}",
        reply.header("location"),
        reply.text
    );
}

/// DESIGN §5.1: "unknown or repeated query parameters are 422", on routes that take
/// none too: `DELETE /v1/subscribers/acme?dry_run=true` must not delete (an operator
/// who expects the replays' dry run would get the real thing), nor PATCH or resume
/// apply; `GET /v1/events/{id}?x=1` is refused as well.
async fn the_new_routes_refuse_an_unknown_query_parameter_and_write_nothing(db: Db) {
    let app = app_with().backend(db).start().await;
    app.put_subscriber(
        "acme",
        &json!({"url": "https://example.com/a", "enabled": false}),
    )
    .await;
    app.job("acme", "evt-1", json!({})).await;
    let send = |method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut request = app.request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        app.send(request)
    };
    let patched = send(
        reqwest::Method::PATCH,
        "/v1/subscribers/acme?dry_run=true",
        Some(json!({"max_in_flight": 3})),
    )
    .await;
    let resumed = send(
        reqwest::Method::POST,
        "/v1/subscribers/resume?dry_run=true",
        Some(json!({"subscriber_ids": ["acme"]})),
    )
    .await;
    let summary = send(reqwest::Method::GET, "/v1/events/evt-1?x=1", None).await;
    let deleted = send(
        reqwest::Method::DELETE,
        "/v1/subscribers/acme?dry_run=true",
        None,
    )
    .await;
    let still = app.get("/v1/subscribers/acme").await;
    // A method the route does not have stays a 405, query string or not.
    let traced = send(reqwest::Method::TRACE, "/v1/audit?limit=1", None).await;
    assert_eq!(traced.status, 405, "{}", traced.text);
    assert_eq!(
        [
            patched.status,
            resumed.status,
            summary.status,
            deleted.status,
            still.status
        ],
        [422, 422, 422, 422, 200],
        "PATCH {} | resume {} | summary {} | DELETE {}",
        patched.text,
        resumed.text,
        summary.text,
        deleted.text
    );
}

crate::on_both_backends!(
    cursors_of_the_two_subscriber_listings_are_not_interchangeable,
    the_audit_trail_does_not_keep_a_credential_from_a_urls_query,
    retry_advice_yes_is_never_given_for_a_job_the_retry_route_refuses,
    retry_advice_yes_is_never_given_past_the_deadline,
    a_late_410_after_delete_and_recreate_leaves_the_new_subscriber_alone,
    no_replay_advice_for_a_deleted_subscribers_dead_job,
    a_cursor_of_the_audit_trail_is_refused_by_the_event_and_replay_listings,
    the_audit_target_of_a_job_action_is_the_jobs_id_whatever_its_spelling,
    resume_is_refused_as_a_subscriber_id,
    the_new_routes_refuse_an_unknown_query_parameter_and_write_nothing,
);
