//! CASES C-08: deliveries never reach internal addresses unless allowed. A name that
//! resolves to 127.0.0.1 at send time (DNS rebinding) is never connected; its attempt
//! reads exactly as one to a name that does not resolve, a retryable `connect` failure,
//! so that attempts do not tell which internal names exist (issue #34, item 4.7). A
//! literal refused address, which the client typed, is `blocked` and the job goes
//! `dead` with `target_rejected` at once. With loopback allowed the same job is
//! delivered.

use deferhook::delivery::resolve::Resolver;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::app::{Db, TestApp, metric};
use crate::receiver::Receiver;
use crate::setup::{instance, instance_on, next_due};

/// Resolves `evil.test` to 127.0.0.1, as a rebinding DNS server would once the URL
/// has been registered; any other name (`nowhere.invalid`) fails, as a name that does
/// not exist would, without a query leaving the machine.
struct Rebinding;

impl Resolve for Rebinding {
    fn resolve(&self, name: Name) -> Resolving {
        let answer = (name.as_str() == "evil.test")
            .then(|| vec![SocketAddr::from(([127, 0, 0, 1], 0))])
            .ok_or_else(|| format!("{} does not resolve", name.as_str()));
        Box::pin(async move {
            let addrs = answer?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

fn rebinding() -> Resolver {
    Resolver(Arc::new(Rebinding))
}

/// `http://evil.test:PORT/hook?token=…` for the receiver's port.
fn evil_url(receiver: &Receiver) -> String {
    named_url(receiver, "evil.test")
}

/// `http://HOST:PORT/hook?token=…` for the receiver's port.
fn named_url(receiver: &Receiver, host: &str) -> String {
    let local = receiver.url("/hook?token=s3cret-query");
    local.replace("127.0.0.1", host)
}

/// Runs the job's attempt and checks it was blocked, with a reason that contains
/// `names` (the host, and for a literal address its range), never the URL's query.
async fn assert_blocked(app: &TestApp, job: &Value, names: &str) {
    assert_eq!(app.run_pending().await.attempted(), 1);
    let dead = app.job_now(job).await;
    assert_eq!(dead["state"], "dead", "{dead}");
    assert_eq!(dead["dead_reason"], "target_rejected", "{dead}");
    assert_eq!(dead["attempts"], 1, "{dead}");
    assert_eq!(dead["last_error"]["class"], "blocked", "{dead}");
    let attempts = app.attempts(job).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "blocked");
    assert_eq!(attempts[0]["error_class"], "blocked");
    assert_eq!(attempts[0]["status"], Value::Null);
    let reason = attempts[0]["reason"].as_str().unwrap();
    assert!(reason.contains(names), "{reason}");
    assert!(
        !reason.contains("s3cret"),
        "the URL's query leaked: {reason}"
    );
}

/// The reason of an attempt to a name that resolves only to refused addresses, or
/// that does not resolve: one text for both.
const NAME_UNUSABLE: &str =
    "could not connect to the target host (name not resolved or not a permitted address)";

/// Runs the job's first attempt and checks it failed as a retryable `connect` with the
/// reason [`NAME_UNUSABLE`], never the URL's query; returns the job and its attempt.
async fn assert_unusable_name(app: &TestApp, job: &Value) -> (Value, Value) {
    assert_eq!(app.run_pending().await.attempted(), 1);
    let retrying = app.job_now(job).await;
    assert_eq!(retrying["state"], "retrying", "{retrying}");
    assert_eq!(retrying["attempts"], 1, "{retrying}");
    assert_eq!(retrying["last_error"]["class"], "connect", "{retrying}");
    assert_eq!(
        retrying["last_error"]["reason"], NAME_UNUSABLE,
        "{retrying}"
    );
    let attempts = app.attempts(job).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "retryable");
    assert_eq!(attempts[0]["error_class"], "connect");
    assert_eq!(attempts[0]["status"], Value::Null);
    assert_eq!(attempts[0]["reason"], NAME_UNUSABLE);
    (retrying, attempts[0].clone())
}

/// Issue #15 part 5.4: the attempt and the job's last error say that the name was
/// refused by policy, without the addresses it resolves to or their ranges, which
/// would let any token holder map internal DNS.
async fn assert_no_address_shown(app: &TestApp, job: &Value) {
    let attempts = app.attempts(job).await;
    let shown = [
        attempts[0]["reason"].to_string(),
        app.job_now(job).await["last_error"].to_string(),
    ];
    for text in shown {
        for address in ["127.0.0.1", "127.0.0.0/8", "loopback"] {
            assert!(!text.contains(address), "{address} shown: {text}");
        }
    }
}

async fn c08_a_name_resolving_to_loopback_is_never_connected(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db)
        .default_targets()
        .resolver(rebinding())
        .start()
        .await;
    // A host name is accepted at registration: it is checked when it is resolved.
    app.subscriber("s", &evil_url(&receiver), None).await;
    let job = app.job("s", "evt-rebind", json!({})).await;
    assert_unusable_name(&app, &job).await;
    assert_no_address_shown(&app, &job).await;
    // Retried with the backoff, and refused again: the receiver never saw a request.
    app.advance(3_600_000);
    assert_eq!(app.run_pending().await.attempted(), 1);
    let attempts = app.attempts(&job).await;
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[1]["reason"], NAME_UNUSABLE);
    assert_eq!(receiver.requests().len(), 0);
    // (The metrics are process-wide: other tests may have counted some too.)
    let metrics = app.metrics().await;
    assert!(
        metric(
            &metrics,
            "deferhook_attempts_total{outcome=\"retryable\",class=\"connect\"}"
        ) >= 2.0
    );
}

/// Issue #34 item 4.7: a name that resolves only to a refused address and a name that
/// does not resolve are accepted alike at registration (names are not looked up
/// then), and their attempts read the same in every field a client sees: outcome,
/// class, status, reason, the job's state, last error and retry advice, and the
/// backoff before the next attempt. Before the fix the first was `blocked` and dead at
/// once, the second a `connect` naming the DNS error: an oracle for internal names.
async fn c34_a_refused_name_reads_as_one_that_does_not_resolve(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db)
        .default_targets()
        .resolver(rebinding())
        .start()
        .await;
    app.subscriber("internal", &evil_url(&receiver), None).await;
    app.subscriber("missing", &named_url(&receiver, "nowhere.invalid"), None)
        .await;
    let internal = app.job("internal", "evt-internal", json!({})).await;
    let (internal_job, internal_attempt) = assert_unusable_name(&app, &internal).await;
    let missing = app.job("missing", "evt-missing", json!({})).await;
    let (missing_job, missing_attempt) = assert_unusable_name(&app, &missing).await;
    for field in ["outcome", "error_class", "status", "reason", "body_excerpt"] {
        assert_eq!(internal_attempt[field], missing_attempt[field], "{field}");
    }
    for field in ["state", "attempts", "last_error", "dead_reason"] {
        assert_eq!(internal_job[field], missing_job[field], "{field}");
    }
    for field in ["verdict", "reason"] {
        assert_eq!(
            internal_job["retry_advice"][field], missing_job["retry_advice"][field],
            "{field}"
        );
    }
    assert_eq!(internal_job["retry_advice"]["verdict"], "yes");
    // Both wait for the backoff's first step (base 100 ms, equal jitter: 50–100 ms).
    for job in [&internal_job, &missing_job] {
        let wait = next_due(job).millis_since(app.now());
        assert!((50..=100).contains(&wait), "{wait} ms: {job}");
    }
    assert_eq!(receiver.requests().len(), 0);
}

async fn c08_with_loopback_allowed_the_same_job_is_delivered(db: Db) {
    let receiver = Receiver::ok().await;
    let app = instance(db).resolver(rebinding()).start().await;
    app.subscriber("s", &evil_url(&receiver), None).await;
    let job = app.job("s", "evt-rebind", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&job).await["state"], "delivered");
    assert_eq!(receiver.requests().len(), 1);
    assert_eq!(receiver.requests()[0].header("webhook-id"), "evt-rebind");
}

on_both_backends!(
    c08_a_name_resolving_to_loopback_is_never_connected,
    c34_a_refused_name_reads_as_one_that_does_not_resolve,
    c08_with_loopback_allowed_the_same_job_is_delivered,
);

#[tokio::test]
async fn c08_a_matching_allowed_cidr_permits_the_name() {
    let receiver = Receiver::ok().await;
    let app = instance(Db::Sqlite)
        .flags(&["--allow-target-cidr", "127.0.0.0/8"])
        .default_targets()
        .resolver(rebinding())
        .start()
        .await;
    app.subscriber("s", &evil_url(&receiver), None).await;
    let job = app.job("s", "evt-cidr", json!({})).await;
    assert_eq!(app.run_pending().await.attempted(), 1);
    assert_eq!(app.job_now(&job).await["state"], "delivered");
    assert_eq!(receiver.requests().len(), 1);
}

#[tokio::test]
async fn c08_another_allowed_cidr_does_not_permit_loopback() {
    let receiver = Receiver::ok().await;
    let app = instance(Db::Sqlite)
        .flags(&["--allow-target-cidr", "10.0.0.0/8"])
        .default_targets()
        .resolver(rebinding())
        .start()
        .await;
    app.subscriber("s", &evil_url(&receiver), None).await;
    let job = app.job("s", "evt-cidr", json!({})).await;
    assert_unusable_name(&app, &job).await;
    assert_no_address_shown(&app, &job).await;
    assert_eq!(receiver.requests().len(), 0);
}

/// A literal address stored while it was allowed (or before this check existed) is
/// checked again before each attempt: literal hosts never reach the resolver.
#[tokio::test]
async fn c08_a_literal_address_is_checked_at_send_time_too() {
    let receiver = Receiver::ok().await;
    let mut before = instance(Db::Sqlite).start().await;
    before
        .subscriber("s", &receiver.url("/hook?token=s3cret-query"), None)
        .await;
    let job = before
        .job("s", "evt-literal", json!({ "delay_ms": 1500 }))
        .await;
    let database = before.keep_database().expect("the database");
    let clock = before.manual_clock();
    before.stop().await;
    let after = instance_on(&database.url)
        .default_targets()
        .shared_clock(clock)
        .start()
        .await;
    after.advance(1500);
    // The address is the URL's own host: naming it and its range reveals nothing.
    assert_blocked(
        &after,
        &job,
        "blocked before connecting: 127.0.0.1 is a loopback address (127.0.0.0/8)",
    )
    .await;
    assert_eq!(receiver.requests().len(), 0);
}
