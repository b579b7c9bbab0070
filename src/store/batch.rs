//! Rules both stores apply when creating a batch of jobs.

use crate::domain::payload::same_json_value;
use crate::store::StoreError;
use crate::store::records::{CreateOutcome, Job, NewJob};

/// The order to write `jobs` in: by (subscriber_id, event_id), whatever the request
/// order, so concurrent batches lock rows in the same order and cannot deadlock.
pub fn key_order(jobs: &[NewJob]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        (&jobs[a].subscriber_id, &jobs[a].event_id)
            .cmp(&(&jobs[b].subscriber_id, &jobs[b].event_id))
    });
    order
}

/// The outcome for `new` when a job with its key was already `stored` with
/// `stored_payload`: the same payload (as a JSON value) is a repeat; a different one a
/// [`StoreError::PayloadConflict`], on which the caller rolls back.
pub fn repeat(
    stored: Job,
    stored_payload: String,
    new: &NewJob,
) -> Result<CreateOutcome, StoreError> {
    if same_json_value(&stored_payload, &new.payload) {
        Ok(CreateOutcome::Existing {
            job: stored,
            payload: stored_payload,
        })
    } else {
        Err(StoreError::PayloadConflict {
            job_id: stored.id,
            subscriber_id: stored.subscriber_id,
            event_id: stored.event_id,
        })
    }
}

/// The outcomes back in request order.
pub fn in_request_order(
    outcomes: Vec<Option<CreateOutcome>>,
) -> Result<Vec<CreateOutcome>, StoreError> {
    outcomes
        .into_iter()
        .map(|outcome| {
            outcome.ok_or_else(|| StoreError::Internal("a job without an outcome".into()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;

    fn new(subscriber: &str, event: &str) -> NewJob {
        NewJob {
            id: uuid::Uuid::nil(),
            subscriber_id: subscriber.into(),
            event_id: event.into(),
            payload: "{}".into(),
            deliver_at: Timestamp::from_millis(0),
            deadline: Timestamp::from_millis(1),
            max_attempts: None,
            created_at: Timestamp::from_millis(0),
        }
    }

    #[test]
    fn batches_are_written_in_key_order() {
        let jobs = [new("b", "e"), new("a", "z"), new("a", "e")];
        assert_eq!(key_order(&jobs), [2, 1, 0]);
    }
}
