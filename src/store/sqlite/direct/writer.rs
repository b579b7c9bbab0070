//! The SQLite batch writer: every write of a database file runs on one connection
//! owned by one thread, which takes whatever writes are waiting as one batch, runs
//! them in one transaction, commits once (one fsync), and only then answers each
//! caller (docs/DESIGN.md §3, "The write path").
//!
//! A write is a body over the transaction ([`Transactions::transaction`]): its
//! statements run on the thread, straight on the connection (see [`super::statements`]),
//! with no hand-off per statement. Each body runs inside a savepoint of its own: one
//! that fails (an unknown subscriber, a payload conflict, any error it returns) is
//! rolled back alone and answered its error, and the others of its batch still
//! commit. A failed `BEGIN` or `COMMIT` answers every caller of the batch with an
//! error of the same kind (transient or not), nothing of the batch written.
//!
//! No timer forms a batch: the thread takes the first waiting write, then everything
//! queued behind it (at most [`MAX_BATCH`]), so an idle store writes a lone write at
//! once and a busy one amortises each commit over many.
//!
//! [`Transactions::transaction`]: crate::store::transactions::Transactions::transaction

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::statements::{control, open};
use crate::store::StoreError;
use crate::store::group_commit::same_kind;
use crate::store::sqlite::Tx;
use crate::store::transactions::TxFuture;

/// Most writes in one batch: bounds how long the last of them waits for the commit.
pub(crate) const MAX_BATCH: usize = 128;

/// What the batch does with a write once its body has run: keep its changes or roll
/// back to its savepoint; then, after the commit (`None`) or its failure, answer it.
struct Ran {
    kept: bool,
    /// The body's error, of the same kind, when it failed: the cause told to the
    /// batch's other writes when SQLite itself rolled the whole transaction back.
    cause: Option<StoreError>,
    answer: Answer,
}

/// Answers a write's caller: its own result, unless its batch failed (`Some`).
type Answer = Box<dyn FnOnce(Option<&StoreError>) + Send>;

/// What the thread does with a waiting write.
enum Step<'a> {
    /// Runs its body in the batch's transaction.
    Run(&'a mut Tx, &'a Handle),
    /// Answers it this error without running it (its batch could not begin).
    Refuse(&'a StoreError),
}

/// A write waiting for the thread, its result type erased; `Step::Run` returns what
/// the batch does with it, or `None` when its caller has gone (it is not run).
type Command = Box<dyn for<'a> FnOnce(Step<'a>) -> Option<Ran> + Send>;

/// A handle to the writer thread; cloning shares it. The thread ends, closing its
/// connection, when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct Writer {
    queue: mpsc::Sender<Command>,
    /// How long a write waits to begin before its caller hears the store is busy.
    wait: Duration,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer {
    /// Opens the database file at `path` (it exists: the migrations have run) on a new
    /// thread (see [`super::statements::open`]).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the file cannot be opened.
    pub(crate) fn open(path: &Path, busy_timeout: Duration) -> Result<Self, StoreError> {
        Ok(Self::start(open(path, busy_timeout)?, busy_timeout))
    }

    /// Starts the thread on `conn`; a write that has not begun within `wait` is
    /// answered [`StoreError::Unavailable`] and never runs.
    fn start(conn: Connection, wait: Duration) -> Self {
        let (queue, waiting) = mpsc::channel::<Command>();
        let runtime = Handle::current();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || write_batches(Tx::Direct(conn), &waiting, &runtime))
            .expect("the OS refused a thread for the SQLite writer");
        Writer { queue, wait }
    }

    /// Runs `body` in the next batch's transaction and answers its result once that
    /// batch has committed. A caller that stops waiting writes nothing: a write whose
    /// caller has gone before it begins is not run, and one whose caller has gone
    /// when its body ends is rolled back (as a dropped sqlx transaction was), unless
    /// the batch's `COMMIT` had already begun.
    ///
    /// # Errors
    /// The body's own error (its writes rolled back, the batch's others kept); an
    /// error of the batch's `BEGIN` or `COMMIT`; [`StoreError::Unavailable`] when the
    /// write did not begin within the busy timeout (5 s: the writer is overloaded or
    /// another process holds the file), or the thread has stopped;
    /// [`StoreError::Internal`] when the body panicked.
    pub(crate) async fn run<R, F>(&self, body: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: for<'a> FnOnce(&'a mut Tx) -> TxFuture<'a, R> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<R, StoreError>>();
        let (began, begun) = oneshot::channel::<()>();
        let command: Command = Box::new(move |step| {
            let (tx, runtime) = match step {
                // A caller that gave up before its write began writes nothing.
                Step::Run(..) if reply.is_closed() => return None,
                Step::Run(tx, runtime) => (tx, runtime),
                Step::Refuse(error) => {
                    let _ = reply.send(Err(same_kind(error)));
                    return None;
                }
            };
            let _ = began.send(());
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(body(tx))))
                .unwrap_or_else(|_| Err(StoreError::Internal("a write panicked".into())));
            // A caller gone while its body ran: nobody to answer, nothing kept.
            let kept = result.is_ok() && !reply.is_closed();
            Some(Ran {
                kept,
                cause: result.as_ref().err().map(same_kind),
                answer: Box::new(move |failed| {
                    let _ = reply.send(match (result, failed) {
                        (Ok(_), Some(error)) => Err(same_kind(error)),
                        (result, _) => result,
                    });
                }),
            })
        });
        let stopped = || StoreError::Unavailable("the SQLite writer has stopped".into());
        self.queue.send(command).map_err(|_| stopped())?;
        // Refused or dropped unrun, `begun` ends at once and `answer` says why.
        if tokio::time::timeout(self.wait, begun).await.is_err() {
            return Err(StoreError::Unavailable(format!(
                "the database is busy: a write did not begin within {} ms",
                self.wait.as_millis()
            )));
        }
        answer.await.map_err(|_| stopped())?
    }
}

/// The thread: batch after batch until every handle is gone.
fn write_batches(mut tx: Tx, waiting: &mpsc::Receiver<Command>, runtime: &Handle) {
    while let Ok(first) = waiting.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match waiting.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        write_batch(&mut tx, batch, runtime);
    }
}

/// One batch: `BEGIN IMMEDIATE`, each write in its savepoint, `COMMIT`, the answers.
fn write_batch(tx: &mut Tx, batch: Vec<Command>, runtime: &Handle) {
    // A transaction left open by a failed ROLLBACK would fail every BEGIN after it.
    let begun = on_connection(tx, |conn| {
        if !conn.is_autocommit() {
            control(conn, "ROLLBACK")?;
        }
        control(conn, "BEGIN IMMEDIATE")
    });
    if let Err(error) = begun {
        tracing::warn!(%error, writes = batch.len(), "the SQLite writer could not begin a batch");
        for command in batch {
            command(Step::Refuse(&error));
        }
        return;
    }
    let mut answers = Vec::with_capacity(batch.len());
    let mut failed: Option<StoreError> = None;
    for command in batch {
        if let Some(error) = &failed {
            command(Step::Refuse(error));
            continue;
        }
        if let Err(error) = on_connection(tx, |conn| control(conn, "SAVEPOINT write")) {
            command(Step::Refuse(&error));
            failed = Some(error);
            continue;
        }
        let Some(ran) = command(Step::Run(tx, runtime)) else {
            // Not run: its caller had gone.
            if let Err(error) = on_connection(tx, |conn| control(conn, "RELEASE write")) {
                failed = Some(error);
            }
            continue;
        };
        let closed = if ran.kept {
            on_connection(tx, |conn| control(conn, "RELEASE write"))
        } else {
            on_connection(tx, |conn| {
                control(conn, "ROLLBACK TO write")?;
                control(conn, "RELEASE write")
            })
        };
        answers.push(ran.answer);
        if let Err(error) = closed {
            // SQLite rolled the whole transaction back itself (a full disk, an I/O
            // error): the others of the batch hear the cause, not the lost savepoint.
            let whole = matches!(tx, Tx::Direct(conn) if conn.is_autocommit());
            failed = Some(match ran.cause {
                Some(cause) if whole => cause,
                _ => error,
            });
        }
    }
    if failed.is_none()
        && let Err(error) = on_connection(tx, |conn| control(conn, "COMMIT"))
    {
        failed = Some(error);
    }
    if let Some(error) = &failed {
        tracing::warn!(%error, writes = answers.len(), "a batch of SQLite writes failed");
        let _ = on_connection(tx, |conn| {
            if conn.is_autocommit() {
                Ok(())
            } else {
                control(conn, "ROLLBACK")
            }
        });
    }
    for answer in answers {
        answer(failed.as_ref());
    }
}

/// Runs `statement` on the writer's connection.
fn on_connection(
    tx: &mut Tx,
    statement: impl FnOnce(&Connection) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    match tx {
        Tx::Direct(conn) => statement(conn),
        Tx::Pooled(_) => Err(StoreError::Internal(
            "the SQLite writer lost its connection".into(),
        )),
    }
}
