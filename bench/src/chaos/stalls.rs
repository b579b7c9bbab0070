//! The soak's own pauses: a task that wakes every [`TICK`] and records how late it
//! woke. The receivers live in this process, so a pause here delays when a request is
//! seen to start or end; the report prints the longest, to tell a server's fault from
//! the harness's.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::super::clock::now_ms;
use super::history::Ms;

/// How often the watcher wakes.
const TICK: Duration = Duration::from_millis(50);
/// A wake-up this much later than planned is recorded, in ms.
const NOTED_MS: i64 = 200;

/// The pauses seen: `(when it ended, how long it was late in ms)`.
#[derive(Clone, Default)]
pub struct Stalls(Arc<Mutex<Vec<(Ms, i64)>>>);

impl Stalls {
    /// Starts watching until `stop` is cancelled.
    pub fn watch(stop: CancellationToken) -> Stalls {
        let stalls = Stalls::default();
        let record = stalls.clone();
        tokio::spawn(async move {
            loop {
                let planned = Instant::now() + TICK;
                tokio::select! {
                    () = tokio::time::sleep_until(planned.into()) => {}
                    () = stop.cancelled() => return,
                }
                let late = Instant::now()
                    .saturating_duration_since(planned)
                    .as_millis() as i64;
                if late >= NOTED_MS {
                    record
                        .0
                        .lock()
                        .expect("not poisoned")
                        .push((now_ms(), late));
                }
            }
        });
        stalls
    }

    /// The pauses of at least [`NOTED_MS`] so far.
    pub fn seen(&self) -> Vec<(Ms, i64)> {
        self.0.lock().expect("not poisoned").clone()
    }
}
