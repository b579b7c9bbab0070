//! The contract of the store's own connections (see [`super`]): writes waiting together
//! share one transaction, each keeps its own result, a failed one is rolled back alone,
//! every answer comes after the commit; a read never waits for a write in progress and
//! sees only what was committed.

use std::sync::mpsc;
use std::time::Duration;

use super::readers::Readers;
use super::statements;
use super::writer::Writer;
use crate::store::StoreError;
use crate::store::dialect::Query;
use crate::store::sqlite::{Pools, Tx};
use crate::store::transactions::Transactions;

/// A database file with table `t (n INTEGER PRIMARY KEY)`, and table `child` whose
/// foreign key to `t` is checked at commit; the writer on it.
fn writer() -> (tempfile::TempDir, std::path::PathBuf, Writer) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; CREATE TABLE t (n INTEGER PRIMARY KEY); \
         CREATE TABLE child (n INTEGER REFERENCES t (n) DEFERRABLE INITIALLY DEFERRED);",
    )
    .unwrap();
    drop(conn);
    let writer = Writer::open(&path, Duration::from_secs(1)).unwrap();
    (dir, path, writer)
}

/// The rows of `t`, read on a connection of its own.
fn committed(path: &std::path::Path) -> Vec<i64> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut statement = conn.prepare("SELECT n FROM t ORDER BY n").unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn insert(sql: &'static str, n: i64) -> Query {
    Query::new(sql).int(n)
}

/// Starts a write of `n` into `t` on `writer`.
fn write(writer: &Writer, n: i64) -> tokio::task::JoinHandle<Result<u64, StoreError>> {
    let writer = writer.clone();
    tokio::spawn(async move {
        writer
            .run(move |tx: &mut Tx| {
                Box::pin(Pools::execute(tx, insert("INSERT INTO t VALUES (?1)", n)))
            })
            .await
    })
}

/// Holds the writer's thread in a write until the returned sender is dropped; returns
/// once that write runs.
async fn hold(
    writer: &Writer,
) -> (
    mpsc::Sender<()>,
    tokio::task::JoinHandle<Result<(), StoreError>>,
) {
    hold_after(writer, None).await
}

/// [`hold`], the write having first inserted `n` into `t` (not committed yet).
async fn hold_after(
    writer: &Writer,
    n: Option<i64>,
) -> (
    mpsc::Sender<()>,
    tokio::task::JoinHandle<Result<(), StoreError>>,
) {
    let (release, held) = mpsc::channel::<()>();
    let (running, started) = tokio::sync::oneshot::channel::<()>();
    let writer = writer.clone();
    let task = tokio::spawn(async move {
        writer
            .run(move |tx: &mut Tx| {
                Box::pin(async move {
                    if let Some(n) = n {
                        Pools::execute(tx, insert("INSERT INTO t VALUES (?1)", n)).await?;
                    }
                    let _ = running.send(());
                    let _ = held.recv();
                    Ok(())
                })
            })
            .await
    });
    started.await.unwrap();
    (release, task)
}

/// Lets queued writes reach the writer's channel.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_waiting_together_commit_together_and_keep_their_own_results() {
    let (_dir, path, writer) = writer();
    let (release, first) = hold(&writer).await;
    let ones = [write(&writer, 1), write(&writer, 1)];
    let two = write(&writer, 2);
    settle().await;
    drop(release);
    first.await.unwrap().unwrap();
    // An answer of the batch already sees every kept write of it committed.
    assert_eq!(two.await.unwrap().unwrap(), 1);
    assert_eq!(committed(&path), vec![1, 2]);
    let mut results = Vec::new();
    for task in ones {
        results.push(task.await.unwrap());
    }
    // Whichever of the two ran first wrote 1; the other failed alone.
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    let error = results.into_iter().find_map(Result::err).unwrap();
    assert!(matches!(error, StoreError::Internal(_)), "{error}");
    assert!(error.to_string().contains("UNIQUE"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_is_rolled_back_alone() {
    let (_dir, path, writer) = writer();
    let (release, first) = hold(&writer).await;
    let half = writer.clone();
    let failing = tokio::spawn(async move {
        half.run(move |tx: &mut Tx| {
            Box::pin(async move {
                Pools::execute(tx, insert("INSERT INTO t VALUES (?1)", 7)).await?;
                Err::<(), _>(StoreError::UnknownSubscriber("s".into()))
            })
        })
        .await
    });
    let kept = write(&writer, 8);
    settle().await;
    drop(release);
    first.await.unwrap().unwrap();
    let error = failing.await.unwrap().unwrap_err();
    assert!(matches!(error, StoreError::UnknownSubscriber(_)), "{error}");
    kept.await.unwrap().unwrap();
    assert_eq!(
        committed(&path),
        vec![8],
        "7 was written by the failed write only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_write_is_answered_and_the_writer_goes_on() {
    let (_dir, path, writer) = writer();
    let result = writer
        .run(
            |_tx: &mut Tx| -> crate::store::transactions::TxFuture<'_, ()> {
                panic!("a body that panics")
            },
        )
        .await;
    assert!(matches!(result, Err(StoreError::Internal(_))), "{result:?}");
    write(&writer, 3).await.unwrap().unwrap();
    assert_eq!(committed(&path), vec![3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_fails_every_write_of_the_batch_and_keeps_none() {
    let (_dir, path, writer) = writer();
    let (release, first) = hold(&writer).await;
    let good = write(&writer, 4);
    let orphan = {
        let writer = writer.clone();
        tokio::spawn(async move {
            writer
                .run(|tx: &mut Tx| {
                    Box::pin(Pools::execute(
                        tx,
                        insert("INSERT INTO child VALUES (?1)", 99),
                    ))
                })
                .await
        })
    };
    settle().await;
    drop(release);
    // The held write was in a batch of its own, committed before the others queued.
    first.await.unwrap().unwrap();
    for task in [good, orphan] {
        let error = task.await.unwrap().unwrap_err();
        assert!(matches!(error, StoreError::Internal(_)), "{error}");
    }
    assert!(committed(&path).is_empty());
    write(&writer, 5).await.unwrap().unwrap();
    assert_eq!(
        committed(&path),
        vec![5],
        "the writer goes on after a failed commit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_connection_holding_the_file_makes_a_write_transient() {
    let (_dir, path, writer) = writer();
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let error = write(&writer, 6).await.unwrap().unwrap_err();
    assert!(error.is_transient(), "{error}");
    other.execute_batch("ROLLBACK").unwrap();
    write(&writer, 6).await.unwrap().unwrap();
    assert_eq!(committed(&path), vec![6]);
}

/// How many times `sql` was prepared again over three runs with values bound anew.
fn prepared_again(conn: &rusqlite::Connection, sql: &str) -> i32 {
    let mut statement = conn.prepare(sql).unwrap();
    for _ in 0..3 {
        for index in 1..=statement.parameter_count() {
            statement.raw_bind_parameter(index, 1_i64).unwrap();
        }
        let mut rows = statement.raw_query();
        while rows.next().unwrap().is_some() {}
    }
    statement.get_status(rusqlite::StatementStatus::RePrepare)
}

/// The statements each claim, outcome, sweep and replay step runs are prepared once
/// and reused: none is parsed again because a value was bound (SQLite does that to a
/// bare `LIMIT ?`, see [`crate::store::dialect::Dialect::limit`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hot_statements_are_not_prepared_again_when_values_are_bound() {
    use crate::store::replays::ReplayStatements;
    use crate::store::sweep::SweepStatements;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let url = format!("sqlite://{}", path.display());
    let _store = crate::store::sqlite::SqliteStore::open(&url, crate::store::Sealer::plaintext())
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert!(
        prepared_again(&conn, "SELECT id FROM jobs LIMIT ?1") > 0,
        "SQLite prepares a bare bound LIMIT again (else this test proves nothing)"
    );
    for sql in [
        crate::store::sqlite::destinations::DUE,
        crate::store::sqlite::claims::CLAIM_CANDIDATES,
        crate::store::sqlite::claims::MARK_IN_FLIGHT,
        crate::store::sqlite::claims::START_ATTEMPTS,
        crate::store::sqlite::outcomes::FINISH_ATTEMPTS,
        crate::store::sqlite::outcomes::APPLY_TRANSITIONS,
        <Pools as SweepStatements>::OVERDUE,
        <Pools as ReplayStatements>::DUE,
        <Pools as ReplayStatements>::CANDIDATES,
    ] {
        assert_eq!(prepared_again(&conn, sql), 0, "{sql}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_does_not_wait_for_a_write_in_progress_and_sees_only_commits() {
    let (_dir, path, writer) = writer();
    let readers = Readers::open(&path, Duration::from_secs(1), 2).unwrap();
    let count = || {
        readers.run(|conn| {
            let rows: Vec<(i64,)> =
                statements::fetch(conn, Query::new("SELECT COUNT(*) FROM t"), None)?;
            Ok(rows[0].0)
        })
    };
    write(&writer, 1).await.unwrap().unwrap();
    // The writer's thread is now inside a batch that has written 2, not committed.
    let (release, task) = hold_after(&writer, Some(2)).await;
    let seen = tokio::time::timeout(Duration::from_secs(5), count())
        .await
        .expect("a read waited for the writer");
    assert_eq!(seen.unwrap(), 1, "the uncommitted row is not seen");
    drop(release);
    task.await.unwrap().unwrap();
    assert_eq!(count().await.unwrap(), 2);
    let error = readers
        .run(|conn| statements::execute(conn, insert("INSERT INTO t VALUES (?1)", 3)))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("readonly"),
        "a reader only reads: {error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_caller_gave_up_before_it_began_writes_nothing() {
    let (_dir, path, writer) = writer();
    let (release, first) = hold(&writer).await;
    let abandoned = write(&writer, 9);
    settle().await;
    abandoned.abort();
    let _ = abandoned.await;
    let kept = write(&writer, 10);
    settle().await;
    drop(release);
    first.await.unwrap().unwrap();
    kept.await.unwrap().unwrap();
    assert_eq!(committed(&path), vec![10]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_cannot_begin_in_time_is_answered_busy_and_never_runs() {
    let (_dir, path, writer) = writer();
    let (release, first) = hold(&writer).await;
    // The writer's wait is its busy timeout, 1 s here.
    let late = tokio::time::timeout(Duration::from_secs(10), write(&writer, 12))
        .await
        .expect("the wait is bounded")
        .unwrap();
    let error = late.unwrap_err();
    assert!(error.is_transient(), "{error}");
    drop(release);
    first.await.unwrap().unwrap();
    write(&writer, 13).await.unwrap().unwrap();
    assert_eq!(committed(&path), vec![13]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_caller_left_while_it_ran_is_rolled_back() {
    let (_dir, path, writer) = writer();
    let (release, caller) = hold_after(&writer, Some(14)).await;
    caller.abort();
    let _ = caller.await;
    drop(release);
    write(&writer, 15).await.unwrap().unwrap();
    assert_eq!(committed(&path), vec![15]);
}
