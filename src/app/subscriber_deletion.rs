//! Deleting a subscriber (docs/DESIGN.md §5.3): its waiting jobs end `dead`
//! (`subscriber_deleted`), its history stays readable by job and event id until
//! retention, and its id may be registered again as a new subscriber that inherits
//! nothing of it. The first, short step commits at once; the history moves after, in
//! a task of its own ([`crate::delivery::deletions`]), waited for at most [`wait`].

use std::time::Duration;

use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::AppError;
use crate::delivery::deletions;
use crate::domain::Timestamp;
use crate::metrics;

/// The longest a deletion's answer waits for its history to move.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// How long a deletion's answer waits for its history to move when requests time out
/// after `request_timeout`: half of it, at most [`MAX_WAIT`].
pub fn wait(request_timeout: Duration) -> Duration {
    (request_timeout / 2).min(MAX_WAIT)
}

/// What a deletion did.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriberDeletedView {
    /// The id of the deleted subscriber, free again for a new one.
    pub deleted: String,
    /// Its waiting jobs (`scheduled`, `retrying`, `in_flight`) now `dead` with reason
    /// `subscriber_deleted`.
    pub jobs_dead: u64,
    /// When it was deleted.
    pub deleted_at: Timestamp,
}

/// Deletes subscriber `id` (404 when there is no such subscriber, or it is already
/// being deleted; nothing written then): commits the first, short step — its waiting
/// jobs `dead` with `subscriber_deleted`, the subscriber gone for every read, change
/// and claim — then calls `committed` (the caller's audit settles there, before the
/// wait), then moves its history in a task of its own, waiting for it at most the
/// state's `deletion_wait`.
pub async fn delete(
    state: &AppState,
    id: &str,
    committed: impl FnOnce(),
) -> Result<SubscriberDeletedView, AppError> {
    let deleted = state
        .store
        .begin_subscriber_deletion(id, state.clock.now())
        .await?
        .ok_or_else(|| AppError::NotFound(format!("subscriber `{id}` does not exist")))?;
    committed();
    metrics::deleted_dead(deleted.jobs_dead);
    tracing::info!(subscriber_id = %id, jobs_dead = deleted.jobs_dead, "subscriber deleted");
    // The move runs in its own task: neither the request timeout nor a client that
    // goes away cancels it. Waiting a moment lets a short history be gone (and the id
    // free) when the answer comes.
    let moving = deletions::spawn(state.store.clone(), id.to_owned());
    if tokio::time::timeout(state.deletion_wait, moving)
        .await
        .is_err()
    {
        tracing::info!(subscriber_id = %id, "the deleted subscriber's history is still moving");
    }
    Ok(SubscriberDeletedView {
        deleted: deleted.subscriber_id,
        jobs_dead: deleted.jobs_dead,
        deleted_at: deleted.deleted_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_waits_half_the_request_timeout_and_five_seconds_at_most() {
        assert_eq!(wait(Duration::from_secs(30)), Duration::from_secs(5));
        assert_eq!(wait(Duration::from_secs(1)), Duration::from_millis(500));
        assert_eq!(wait(Duration::from_millis(1)), Duration::from_micros(500));
    }
}
