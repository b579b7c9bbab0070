//! Finishing subscriber deletions (docs/DESIGN.md §5.3.1): the second step of a
//! deletion moves the subscriber's jobs and attempts to its tombstone in batches, each
//! its own short write transaction, so other writers wait at most one batch, and then
//! deletes its row. The API runs it in a task of its own, where the request timeout
//! cannot cancel it; retention runs it at start-up and every interval for deletions a
//! crash or a failed batch left unfinished. Two movers of one deletion are harmless:
//! each batch moves what is left, and only an empty subscriber's row goes.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::{DELETION_MOVE_BATCH, SharedStore, StoreError};

/// Deletions [`finish_all`] looks up at once.
const IN_PROGRESS_PAGE: u32 = 100;

/// Moves the history of subscriber `id` (being deleted) in batches of at most `batch`
/// rows until its row is gone, yielding between batches so other writers get in, or
/// until `stop` is cancelled. Returns the jobs and attempts moved; `0` when `id` was
/// not being deleted (or another mover finished it).
pub async fn finish(
    store: &SharedStore,
    id: &str,
    batch: u32,
    stop: &CancellationToken,
) -> Result<u64, StoreError> {
    let mut moved = 0;
    while let Some(step) = store.move_deleted_history(id, batch).await? {
        moved += step.jobs + step.attempts;
        if step.jobs + step.attempts == 0 && !step.finished {
            return Err(StoreError::Internal(format!(
                "the deletion of subscriber `{id}` moved nothing and could not delete its row"
            )));
        }
        if step.finished || stop.is_cancelled() {
            break;
        }
        tokio::task::yield_now().await;
    }
    Ok(moved)
}

/// Finishes every deletion left in progress (see [`finish`]), in id order, pausing
/// `pause` between two deletions; stops early when `stop` is cancelled. Returns how
/// many it looked at.
pub async fn finish_all(
    store: &SharedStore,
    batch: u32,
    pause: Duration,
    stop: &CancellationToken,
) -> Result<usize, StoreError> {
    let mut finished = 0;
    loop {
        let ids = store.deletions_in_progress(IN_PROGRESS_PAGE).await?;
        if ids.is_empty() {
            return Ok(finished);
        }
        for id in &ids {
            let moved = finish(store, id, batch, stop).await?;
            tracing::info!(subscriber_id = %id, moved, "finished a subscriber's deletion");
            finished += 1;
            if stop.is_cancelled() {
                return Ok(finished);
            }
            tokio::time::sleep(pause).await;
        }
    }
}

/// Runs [`finish`] for subscriber `id` in a task of its own, in batches of
/// [`DELETION_MOVE_BATCH`]; a failure is logged, and retention finishes the deletion
/// later. The handle ends when the deletion does.
pub fn spawn(store: SharedStore, id: String) -> JoinHandle<()> {
    tokio::spawn(async move {
        let never = CancellationToken::new();
        match finish(&store, &id, DELETION_MOVE_BATCH, &never).await {
            Ok(moved) => tracing::debug!(subscriber_id = %id, moved, "subscriber deletion moved"),
            Err(error) => tracing::warn!(
                subscriber_id = %id,
                %error,
                "moving a deleted subscriber's history failed; retention finishes it later"
            ),
        }
    })
}
