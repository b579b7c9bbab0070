//! PostgreSQL's lock order: every transaction that waits for row locks takes them
//! subscribers → jobs (ascending id) → attempts → destinations (ascending key), so two
//! writers can wait on each other only one way and never deadlock.
//!
//! Each case holds one row in a transaction of its own (as a deadline sweep, a
//! reclaiming claim or a deletion does), starts a store write that must wait for that
//! row, and then, while the write waits, takes with `NOWAIT` a row the lock order says
//! the write may not hold yet. Before the order was kept, an outcome group took its
//! attempt rows first and then waited for the job a sweep held, while the sweep waited
//! for that attempt: the chaos soak of issue #17 met "deadlock detected" dozens of
//! times at 200 jobs/s.

use std::future::Future;
use std::time::Duration;

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent, Timestamp};
use deferhook::store::{ClaimedJob, Fenced, ResumeSelection, SharedStore};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

use crate::support::{
    add_subscriber, at, claim, create_due, delivered, failed, lease, outcome, set_enabled,
};

/// How long a store write may take to reach its wait on the held row.
const REACH_WAIT: Duration = Duration::from_secs(10);

/// A database with subscriber `s` and two of its jobs claimed at [`at`]`(0)`, in
/// ascending id order.
struct Claimed {
    database: crate::pg::TestDatabase,
    store: SharedStore,
    low: ClaimedJob,
    high: ClaimedJob,
}

async fn two_claimed_jobs() -> Option<Claimed> {
    let database = crate::pg::TestDatabase::create().await?;
    let store = deferhook::store::open(&database.url).await.unwrap();
    add_subscriber(&store, "s").await;
    create_due(&store, "s", at(0)).await;
    create_due(&store, "s", at(0)).await;
    let mut claimed = claim(&store, at(0), 10).await;
    assert_eq!(claimed.len(), 2);
    claimed.sort_by_key(|c| c.job_id.to_string());
    let high = claimed.pop().unwrap();
    let low = claimed.pop().unwrap();
    // The lower id goes last in the table and in every index on `due_at` (its lease
    // ends 1 ms later), and batches below name the higher id first: a statement that
    // locks rows as it finds them (a scan of the table or an index, or a loop over
    // the batch) then takes the higher one first.
    let mut connection = PgConnection::connect(&database.url).await.unwrap();
    sqlx::query("UPDATE jobs SET due_at = due_at + 1 WHERE id = $1")
        .bind(low.job_id.to_string())
        .execute(&mut connection)
        .await
        .unwrap();
    let _ = connection.close().await;
    Some(Claimed {
        database,
        store,
        low,
        high,
    })
}

/// Runs `statement` (a locking `SELECT` of the row whose key is `$1`) in `tx`.
async fn lock(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    statement: String,
    key: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(sqlx::AssertSqlSafe(statement))
        .bind(key)
        .execute(&mut **tx)
        .await
        .map(|_| ())
}

/// Waits (bounded) until a session of this database waits for a row lock.
async fn someone_waits(url: &str) {
    let mut connection = PgConnection::connect(url).await.unwrap();
    let deadline = tokio::time::Instant::now() + REACH_WAIT;
    loop {
        let (waiting,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut connection)
        .await
        .unwrap();
        if waiting > 0 {
            let _ = connection.close().await;
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the store write never waited for the held row"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Holds a row with `holding`, starts `write`, and once it waits, takes with
/// `NOWAIT` the row of `also` (`taking`) in the same transaction: that must succeed.
/// Then lets the write finish and returns its result.
async fn write_waits_holding_nothing_later<T: Send + 'static>(
    url: &str,
    holding: (&str, &str),
    write: impl Future<Output = T> + Send + 'static,
    taking: (&str, &str),
) -> T {
    let mut connection = PgConnection::connect(url).await.unwrap();
    let mut tx = connection.begin().await.unwrap();
    lock(&mut tx, holding.0.to_owned(), holding.1)
        .await
        .unwrap();
    let write = tokio::spawn(write);
    someone_waits(url).await;
    let taken = lock(&mut tx, format!("{} NOWAIT", taking.0), taking.1).await;
    assert!(
        taken.is_ok(),
        "the waiting write already held a row it should take later: {taken:?}"
    );
    tx.rollback().await.unwrap();
    let _ = connection.close().await;
    tokio::time::timeout(REACH_WAIT, write)
        .await
        .expect("the write finishes once the row is free")
        .unwrap()
}

const JOB: &str = "SELECT id FROM jobs WHERE id = $1 FOR UPDATE";
const ATTEMPT: &str = "SELECT job_id FROM attempts WHERE job_id = $1 FOR UPDATE";
const SUBSCRIBER: &str = "SELECT id FROM subscribers WHERE id = $1 FOR UPDATE";
const FIRST_ATTEMPT: &str =
    "SELECT job_id FROM attempts WHERE job_id = $1 AND number = 1 FOR UPDATE";

fn delivered_now(
    store: &SharedStore,
    claimed: &[&ClaimedJob],
    now: Timestamp,
) -> impl Future<Output = Vec<Fenced>> + Send + 'static {
    let store = store.clone();
    let records: Vec<_> = claimed
        .iter()
        .map(|c| outcome(c, JobEvent::Delivered, delivered(204), now))
        .collect();
    async move { store.record_outcomes(&records, now).await.unwrap() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_outcome_holds_its_job_before_its_attempt() {
    let Some(c) = two_claimed_jobs().await else {
        return;
    };
    let id = c.low.job_id.to_string();
    let write = delivered_now(&c.store, &[&c.low], at(100));
    let fenced =
        write_waits_holding_nothing_later(&c.database.url, (JOB, &id), write, (ATTEMPT, &id)).await;
    assert_eq!(fenced, vec![Fenced::Applied]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_outcome_group_holds_its_jobs_in_id_order() {
    let Some(c) = two_claimed_jobs().await else {
        return;
    };
    let (low, high) = (c.low.job_id.to_string(), c.high.job_id.to_string());
    // The batch names the higher id first: the order of the rows is the store's.
    let write = delivered_now(&c.store, &[&c.high, &c.low], at(100));
    let fenced =
        write_waits_holding_nothing_later(&c.database.url, (JOB, &low), write, (JOB, &high)).await;
    assert_eq!(fenced, vec![Fenced::Applied, Fenced::Applied]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_outcome_that_pauses_holds_the_subscriber_before_the_job() {
    let Some(c) = two_claimed_jobs().await else {
        return;
    };
    let id = c.low.job_id.to_string();
    let gone = failed(
        AttemptOutcome::Terminal,
        ErrorClass::Http4xx,
        Some(410),
        "HTTP 410 Gone",
        None,
    );
    let event = JobEvent::TerminalFailure {
        reason: DeadReason::NonRetryableResponse,
    };
    let mut record = outcome(&c.low, event, gone, at(100));
    record.pause_subscriber = true;
    let store = c.store.clone();
    let write = async move { store.record_outcomes(&[record], at(100)).await.unwrap() };
    let fenced =
        write_waits_holding_nothing_later(&c.database.url, (SUBSCRIBER, "s"), write, (JOB, &id))
            .await;
    assert_eq!(fenced, vec![Fenced::Applied]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_renewal_holds_its_jobs_in_id_order() {
    let Some(c) = two_claimed_jobs().await else {
        return;
    };
    let (low, high) = (c.low.job_id.to_string(), c.high.job_id.to_string());
    let store = c.store.clone();
    let leases = [lease(&c.high), lease(&c.low)];
    let write = async move {
        store
            .renew_leases(&leases, at(60_000), at(100))
            .await
            .unwrap()
    };
    let renewed =
        write_waits_holding_nothing_later(&c.database.url, (JOB, &low), write, (JOB, &high)).await;
    assert_eq!(renewed, vec![true, true]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deletion_holds_the_jobs_it_ends_in_id_order() {
    let Some(c) = two_claimed_jobs().await else {
        return;
    };
    let (low, high) = (c.low.job_id.to_string(), c.high.job_id.to_string());
    let store = c.store.clone();
    let write = async move {
        store
            .begin_subscriber_deletion("s", at(100))
            .await
            .unwrap()
            .expect("it existed")
            .jobs_dead
    };
    let dead =
        write_waits_holding_nothing_later(&c.database.url, (JOB, &low), write, (JOB, &high)).await;
    assert_eq!(dead, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn late_results_hold_their_attempts_in_order() {
    let Some(c) = two_claimed_jobs().await else {
        return;
    };
    let (low, high) = (c.low.job_id.to_string(), c.high.job_id.to_string());
    // Both leases expire and are taken over: the first attempts' results come late,
    // with no job lock to take first.
    assert_eq!(claim(&c.store, at(31_000), 10).await.len(), 2);
    let write = delivered_now(&c.store, &[&c.high, &c.low], at(31_100));
    let fenced = write_waits_holding_nothing_later(
        &c.database.url,
        (FIRST_ATTEMPT, &low),
        write,
        (FIRST_ATTEMPT, &high),
    )
    .await;
    assert_eq!(fenced, vec![Fenced::Late, Fenced::Late]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deletion_moves_the_history_in_id_order() {
    let Some(c) = two_claimed_jobs().await else {
        return;
    };
    let (low, high) = (c.low.job_id.to_string(), c.high.job_id.to_string());
    c.store
        .begin_subscriber_deletion("s", at(100))
        .await
        .unwrap()
        .expect("it existed");
    let store = c.store.clone();
    let write = async move {
        store
            .move_deleted_history("s", 10)
            .await
            .unwrap()
            .expect("being deleted")
    };
    let moved =
        write_waits_holding_nothing_later(&c.database.url, (JOB, &low), write, (JOB, &high)).await;
    assert_eq!((moved.jobs, moved.attempts), (2, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resume_holds_its_subscribers_in_id_order() {
    let Some(database) = crate::pg::TestDatabase::create().await else {
        return;
    };
    let store = deferhook::store::open(&database.url).await.unwrap();
    for id in ["a", "b"] {
        add_subscriber(&store, id).await;
        set_enabled(&store, id, false, at(0)).await;
    }
    let resuming = store.clone();
    let write = async move {
        resuming
            .resume_subscribers(ResumeSelection::Ids(vec!["b".into(), "a".into()]), at(10))
            .await
            .unwrap()
    };
    let resumed = write_waits_holding_nothing_later(
        &database.url,
        (SUBSCRIBER, "a"),
        write,
        (SUBSCRIBER, "b"),
    )
    .await;
    assert_eq!(resumed, 2);
}

const ENDPOINT: &str =
    "SELECT subscriber_id FROM endpoint_circuits WHERE subscriber_id = $1 FOR UPDATE";

/// Endpoint circuits are held in ascending subscriber id by the column's collation
/// (`"C"`), as every holder of them sorts them, whatever the database's collation: in
/// a database whose collation puts `a` before `B` (ICU `en-US`), an outcome group that
/// sorted its subscribers by the database's collation held `a` and then waited for `B`,
/// while a long-attempt note held `B` and waited for `a`: a deadlock (issue #36's
/// break-it review).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_outcome_group_holds_endpoint_circuits_in_the_key_columns_collation() {
    let icu = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'";
    let Some(database) = crate::pg::TestDatabase::create_with(icu).await else {
        return;
    };
    let store = deferhook::store::open(&database.url).await.unwrap();
    for id in ["B", "a"] {
        add_subscriber(&store, id).await;
        create_due(&store, id, at(0)).await;
        create_due(&store, id, at(0)).await;
    }
    // The first results make both endpoint rows.
    let first = claim(&store, at(0), 2).await;
    assert_eq!(first.len(), 2);
    let refs: Vec<&ClaimedJob> = first.iter().collect();
    let fenced = delivered_now(&store, &refs, at(10)).await;
    assert_eq!(fenced, vec![Fenced::Applied, Fenced::Applied]);
    let second = claim(&store, at(20), 2).await;
    assert_eq!(second.len(), 2);
    let mut connection = PgConnection::connect(&database.url).await.unwrap();
    let (order,): (String,) = sqlx::query_as(
        "SELECT string_agg(id, ' ' ORDER BY id) FROM unnest(ARRAY['B', 'a']) AS t(id)",
    )
    .fetch_one(&mut connection)
    .await
    .unwrap();
    let _ = connection.close().await;
    assert_eq!(
        order, "a B",
        "the database's collation puts a first (else this test proves nothing)"
    );
    let refs: Vec<&ClaimedJob> = second.iter().collect();
    let write = delivered_now(&store, &refs, at(30));
    let fenced =
        write_waits_holding_nothing_later(&database.url, (ENDPOINT, "B"), write, (ENDPOINT, "a"))
            .await;
    assert_eq!(fenced, vec![Fenced::Applied, Fenced::Applied]);
}
