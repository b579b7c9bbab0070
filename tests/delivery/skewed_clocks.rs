//! Two instances on one PostgreSQL database, one on a machine whose clock is 90 s off
//! (issue #15 part 1, docs/DESIGN.md §12): both work on the database's time, so the
//! skewed one neither sends a job early nor takes the other's live leases, and the other
//! does not take its leases or send the jobs it created early; every job is delivered
//! once. The skewed instance's clock is the system clock 90 s off, set by the
//! database's as `deferhook serve` sets a machine's; its judgements are checked by
//! stepping its worker once at a moment when it must find nothing to do (no waiting
//! for a schedule). `black_box_clocks.rs` runs the real binary under libfaketime.

use std::time::Duration;

use deferhook::domain::{SystemClock, Timestamp};
use serde_json::{Value, json};

use crate::app::{Db, TestApp};
use crate::receiver::Receiver;
use crate::setup::{instance, instance_on};

/// How far the skewed machine's clock is off.
const SKEW_MS: i64 = 90_000;
/// Jobs whose leases one instance holds while the other judges them.
const HELD: usize = 10;
/// How long after its creation a job is due: far more than a loaded machine takes to
/// step a worker, so a step that claims it judged by a wrong clock.
const LATER_MS: u64 = 30_000;
/// How far a set clock may be from the database's: half the round trip of its best
/// reading, plus rounding (a few milliseconds between processes on one machine; this
/// leaves room for a loaded one).
const SYNC_ERROR_MS: u64 = 50;
/// The instance that holds leases: leases and attempts long enough that none expires
/// or times out during a test on a loaded machine, so a lease judged expired here is
/// one judged by a wrong clock.
const HOLDER: &[&str] = &["--lease-ms", "20000", "--attempt-timeout-ms", "15000"];
/// The instance that judges them: should it wrongly take a held job, its request times
/// out soon and the test fails without waiting long.
const JUDGE: &[&str] = &["--lease-ms", "20000", "--attempt-timeout-ms", "2000"];

/// The instance's `now` is the database's (this machine's, where PostgreSQL runs too),
/// to within a second, whatever its own clock says.
fn assert_on_the_database_time(app: &TestApp) {
    let off = app
        .now()
        .millis_since(deferhook::domain::Clock::now(&SystemClock));
    assert!(off.abs() < 1_000, "the instance's now is {off} ms off");
}

/// Subscribers `held` (at a receiver that holds every request until released) and
/// `ok` (at one that answers 200 at once), both allowing `HELD` requests at once.
async fn subscribers(app: &TestApp, held: &Receiver, ok: &Receiver) {
    for (id, receiver) in [("held", held), ("ok", ok)] {
        app.put_subscriber(
            id,
            &json!({ "url": receiver.url("/"), "max_in_flight": 100 }),
        )
        .await;
    }
}

/// Creates `HELD` jobs due now for `held` through `app`, and waits until its running
/// worker holds all their leases (their requests open at the receiver).
async fn hold_leases(app: &TestApp, held: &Receiver) {
    for n in 0..HELD {
        app.job("held", &format!("evt-held-{n}"), json!({})).await;
    }
    held.wait_for(HELD, Duration::from_secs(10)).await;
}

/// Cancels `job` (due later) so that the test need not wait for it.
async fn cancel(app: &TestApp, job: &Value) {
    let id = job["id"].as_str().unwrap();
    let reply = app
        .post_json(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// Lets the held requests answer and waits until every held job is delivered: each
/// was sent exactly once, and the job due later (cancelled) never.
async fn assert_each_delivered_once(app: &TestApp, held: &Receiver, ok: &Receiver) {
    held.release();
    let jobs = app.get_json("/v1/jobs?subscriber_id=held&limit=100").await;
    let jobs = jobs["items"].as_array().unwrap();
    assert_eq!(jobs.len(), HELD);
    for job in jobs {
        app.wait_state(job, "delivered", Duration::from_secs(10))
            .await;
    }
    let counts = held.counts_by_id();
    assert_eq!(counts.len(), HELD, "{counts:?}");
    assert!(counts.values().all(|n| *n == 1), "sent twice: {counts:?}");
    assert_eq!(held.max_open_per_id(), 1);
    assert!(ok.requests().is_empty(), "the cancelled job was sent");
}

/// B's clock 90 s ahead: A holds leases that B, stepped, must leave alone; a job A
/// created for 30 s later is not due for B either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_clock_is_ahead_sends_nothing_early_and_takes_no_live_lease() {
    if !crate::pg::reachable().await {
        return;
    }
    let (held, ok) = (Receiver::holding(200).await, Receiver::ok().await);
    let a = instance(Db::Postgres)
        .skewed_clock(0)
        .running_worker()
        .flags(HOLDER)
        .start()
        .await;
    subscribers(&a, &held, &ok).await;
    hold_leases(&a, &held).await;
    let b = instance_on(&a.database_url)
        .skewed_clock(SKEW_MS)
        .stepped_worker()
        .flags(JUDGE)
        .start()
        .await;
    assert_on_the_database_time(&b);

    let later = a
        .job("ok", "evt-later", json!({ "delay_ms": LATER_MS }))
        .await;
    let pending = b.run_pending().await;
    assert_eq!(
        pending.attempted(),
        0,
        "B claimed jobs that were not due or were leased by A: {:?}",
        pending.completed
    );
    assert_eq!(held.requests().len(), HELD, "a held job was sent twice");
    assert!(ok.requests().is_empty(), "a job was sent before its time");

    cancel(&a, &later).await;
    assert_each_delivered_once(&a, &held, &ok).await;
}

/// B's clock 90 s behind: the leases B holds and a job created through B for 30 s later
/// are left alone by A, stepped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_clock_is_behind_neither_writes_jobs_due_early_nor_loses_its_leases() {
    if !crate::pg::reachable().await {
        return;
    }
    let (held, ok) = (Receiver::holding(200).await, Receiver::ok().await);
    let b = instance(Db::Postgres)
        .skewed_clock(-SKEW_MS)
        .running_worker()
        .flags(HOLDER)
        .start()
        .await;
    assert_on_the_database_time(&b);
    subscribers(&b, &held, &ok).await;
    hold_leases(&b, &held).await;
    let a = instance_on(&b.database_url)
        .skewed_clock(0)
        .stepped_worker()
        .flags(JUDGE)
        .start()
        .await;

    let before = deferhook::domain::Clock::now(&SystemClock);
    let later = b
        .job("ok", "evt-later", json!({ "delay_ms": LATER_MS }))
        .await;
    let after = deferhook::domain::Clock::now(&SystemClock);
    let due = Timestamp::parse_rfc3339(later["deliver_at"].as_str().unwrap()).unwrap();
    assert!(
        before.plus_ms(LATER_MS - SYNC_ERROR_MS) <= due
            && due <= after.plus_ms(LATER_MS + SYNC_ERROR_MS),
        "delay_ms {LATER_MS} stored as due {} ms after the request",
        due.millis_since(before)
    );
    let pending = a.run_pending().await;
    assert_eq!(
        pending.attempted(),
        0,
        "A claimed jobs that were not due or were leased by B: {:?}",
        pending.completed
    );
    assert_eq!(held.requests().len(), HELD, "a held job was sent twice");
    assert!(ok.requests().is_empty(), "a job was sent before its time");

    cancel(&b, &later).await;
    assert_each_delivered_once(&b, &held, &ok).await;
}
