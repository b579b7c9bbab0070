//! C-01 and C-02 in-process: leases are renewed while an attempt lives, two workers
//! never send the same job at once, and shutdown releases leases without a terminal
//! state.

use std::time::Duration;

use serde_json::json;

use crate::app::{Db, metric};
use crate::receiver::{Receiver, Reply};
use crate::setup::{instance, instance_on};

#[tokio::test]
async fn c01_an_attempt_timeout_not_below_the_lease_is_refused_at_start() {
    let refused = instance(Db::Sqlite)
        .flags(&["--lease-ms", "2000", "--attempt-timeout-ms", "8000"])
        .try_start()
        .await;
    let message = refused.err().expect("refused").to_string();
    assert!(
        message.contains("--attempt-timeout-ms (8000) must be shorter than --lease-ms (2000)"),
        "{message}"
    );
}

/// Two running workers (the loop renews leases); the attempt outlives the lease it was
/// claimed with.
async fn c01_two_workers_never_send_one_job_twice_while_it_is_open(db: Db) {
    let receiver =
        Receiver::start(vec![Reply::status(200).after(Duration::from_millis(1200))]).await;
    let flags = ["--lease-ms", "1500", "--attempt-timeout-ms", "1400"];
    let first = instance(db)
        .flags(&flags)
        .system_clock()
        .running_worker()
        .start()
        .await;
    let second = instance_on(&first.database_url)
        .flags(&flags)
        .system_clock()
        .running_worker()
        .start()
        .await;
    first.subscriber("s", &receiver.url("/"), None).await;
    let before = metric(&first.metrics().await, "deferhook_lease_extensions_total");
    let job = second.job("s", "evt-c01", json!({})).await;
    let done = first
        .wait_state(&job, "delivered", Duration::from_secs(5))
        .await;
    assert_eq!(done["attempts"], 1);
    // Every claim persists its attempt before anything is sent, and a delivered job is
    // never claimed again: one attempt row means one request, ever.
    let attempts = first.attempts(&job).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["outcome"], "delivered");
    assert_eq!(receiver.requests().len(), 1);
    assert_eq!(receiver.max_open_per_id(), 1);
    let after = metric(&first.metrics().await, "deferhook_lease_extensions_total");
    assert!(
        after > before,
        "the lease was never renewed during a 1.2 s attempt"
    );
}

/// The first instance's loop is shut down mid-attempt; the second, stepped at the same
/// instant of the manual clock, can claim the job only if the lease was released (it
/// would not expire for 20 s).
async fn c02_shutdown_releases_the_lease_with_the_outcome_unknown(db: Db) {
    let receiver = Receiver::start(vec![
        Reply::status(200).after(Duration::from_secs(10)),
        Reply::status(200),
    ])
    .await;
    let flags = [
        "--shutdown-grace-ms",
        "1000",
        "--attempt-timeout-ms",
        "9000",
        "--lease-ms",
        "20000",
    ];
    let mut first = instance(db).flags(&flags).running_worker().start().await;
    first.subscriber("s", &receiver.url("/"), None).await;
    let job = first.job("s", "evt-c02", json!({})).await;
    receiver.wait_for(1, Duration::from_secs(3)).await;
    let url = first.database_url.clone();
    let clock = first.manual_clock();
    let database = first.keep_database();
    let stopping = std::time::Instant::now();
    first.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(4),
        "shutdown took {:?}",
        stopping.elapsed()
    );

    let second = instance_on(&url)
        .flags(&flags)
        .shared_clock(clock)
        .start()
        .await;
    // Released, not expired: the job is due at once, long before the 20 s lease.
    assert_eq!(second.run_pending().await.attempted(), 1);
    let done = second.job_now(&job).await;
    assert_eq!(done["state"], "delivered");
    assert_eq!(done["attempts"], 2);
    let attempts = second.attempts(&job).await;
    assert_eq!(attempts[0]["outcome"], "unknown");
    assert!(attempts[0]["reason"].as_str().unwrap().contains("shutdown"));
    assert_eq!(attempts[1]["outcome"], "delivered");
    assert_eq!(attempts[1]["possible_duplicate"], true);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].header("webhook-id"),
        requests[1].header("webhook-id")
    );
    assert_eq!(requests[0].body, requests[1].body);
    drop(database);
}

/// The running loop holds at most `--max-in-flight` attempts open.
async fn a_worker_limits_its_attempts_to_max_in_flight(db: Db) {
    let receiver =
        Receiver::start(vec![Reply::status(200).after(Duration::from_millis(300))]).await;
    let app = instance(db)
        .flags(&["--max-in-flight", "3"])
        .running_worker()
        .start()
        .await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let mut jobs = Vec::new();
    for n in 0..9 {
        jobs.push(app.job("s", &format!("evt-mif-{n}"), json!({})).await);
    }
    for job in &jobs {
        app.wait_state(job, "delivered", Duration::from_secs(10))
            .await;
    }
    assert_eq!(receiver.requests().len(), 9);
    assert!(
        receiver.max_open() <= 3,
        "{} open at once",
        receiver.max_open()
    );
    assert!(
        receiver.max_open() >= 2,
        "attempts did not run concurrently"
    );
}

crate::on_both_backends!(
    c01_two_workers_never_send_one_job_twice_while_it_is_open,
    c02_shutdown_releases_the_lease_with_the_outcome_unknown,
    a_worker_limits_its_attempts_to_max_in_flight,
);
