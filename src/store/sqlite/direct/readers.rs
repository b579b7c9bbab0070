//! The SQLite reader threads: each owns one connection to the database file and runs
//! the reads made outside a transaction (`Transactions::read_*`), one whole read per
//! hand-off. Under WAL a reader never waits for the writer, and sees what was
//! committed when its statement started.

use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::statements::open;
use crate::store::StoreError;

/// A read waiting for a thread.
type Read = Box<dyn FnOnce(&Connection) + Send>;

/// A handle to the reader threads; cloning shares them. They end, closing their
/// connections, when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct Readers {
    queue: mpsc::Sender<Read>,
}

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readers").finish_non_exhaustive()
    }
}

impl Readers {
    /// Opens `count` connections to the file at `path` (see [`open`]), each on a
    /// thread of its own, taking reads from one queue; each connection only reads
    /// (`query_only`).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the file cannot be opened.
    pub(crate) fn open(
        path: &Path,
        busy_timeout: Duration,
        count: usize,
    ) -> Result<Self, StoreError> {
        let (queue, waiting) = mpsc::channel::<Read>();
        let waiting = Arc::new(Mutex::new(waiting));
        for index in 0..count.max(1) {
            let conn = open(path, busy_timeout)?;
            conn.pragma_update(None, "query_only", true)
                .map_err(|e| StoreError::Unavailable(format!("cannot open a reader: {e}")))?;
            let waiting = waiting.clone();
            std::thread::Builder::new()
                .name(format!("sqlite-reader-{index}"))
                .spawn(move || {
                    loop {
                        // The lock is held only while waiting for the next read.
                        let next = match waiting.lock() {
                            Ok(queue) => queue.recv(),
                            Err(_) => break,
                        };
                        match next {
                            Ok(read) => read(&conn),
                            Err(_) => break,
                        }
                    }
                })
                .map_err(|e| StoreError::Unavailable(format!("cannot start a reader: {e}")))?;
        }
        Ok(Readers { queue })
    }

    /// Runs `read` on the next free reader and answers its result.
    ///
    /// # Errors
    /// `read`'s error; [`StoreError::Unavailable`] when the readers have stopped;
    /// [`StoreError::Internal`] when `read` panicked.
    pub(crate) async fn run<R, F>(&self, read: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Read = Box::new(move |conn| {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(conn)))
                .unwrap_or_else(|_| Err(StoreError::Internal("a read panicked".into())));
            let _ = reply.send(result);
        });
        let stopped = || StoreError::Unavailable("the SQLite readers have stopped".into());
        self.queue.send(job).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}
