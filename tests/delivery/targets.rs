//! CASES C-08: deliveries never reach internal addresses unless allowed. A name that
//! resolves to 127.0.0.1 at send time (DNS rebinding) is never connected: the attempt is
//! recorded `blocked` and the job goes `dead` with `target_rejected` at once; with
//! loopback allowed the same job is delivered.

use deferhook::delivery::resolve::Resolver;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::app::{Db, TestApp, metric};
use crate::receiver::Receiver;
use crate::setup::{instance, instance_on};

/// Resolves `evil.test` to 127.0.0.1, as a rebinding DNS server would once the URL
/// has been registered; any other name fails.
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
    let local = receiver.url("/hook?token=s3cret-query");
    local.replace("127.0.0.1", "evil.test")
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

/// The reason of an attempt blocked because `evil.test` resolves to refused addresses.
const NAME_REFUSED: &str = "blocked before connecting: evil.test is refused by the \
    outbound-target policy: it resolves to no permitted address";

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
    assert_blocked(&app, &job, NAME_REFUSED).await;
    assert_no_address_shown(&app, &job).await;
    // No retry follows, and the receiver never saw a connection's request.
    app.advance(3_600_000);
    assert_eq!(app.run_pending().await.attempted(), 0);
    assert_eq!(app.attempts(&job).await.len(), 1);
    assert_eq!(receiver.requests().len(), 0);
    // (The metrics are process-wide: other tests may have counted some too.)
    let metrics = app.metrics().await;
    assert!(
        metric(
            &metrics,
            "deferhook_dead_letters_total{reason=\"target_rejected\"}"
        ) >= 1.0
    );
    assert!(
        metric(
            &metrics,
            "deferhook_attempts_total{outcome=\"blocked\",class=\"blocked\"}"
        ) >= 1.0
    );
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
    assert_blocked(&app, &job, NAME_REFUSED).await;
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
