//! A fan-out by event type (docs/DESIGN.md §5.13), for `POST /v1/events` and for the
//! periods of a schedule of an event type: one job per subscriber whose event types
//! match at that moment, created in one request (all or nothing), with the same
//! idempotency on (subscriber, event id) as every create.

use crate::store::{CreateOutcome, NewJob, SharedStore, StoreError};

/// Most subscribers one fan-out reaches: named in `subscriber_ids`, or matched by an
/// event type.
pub const MAX_FAN_OUT: usize = 10_000;

/// How many times a fan-out matches again when a matched subscriber was deleted before
/// its job was written.
const MATCH_ATTEMPTS: usize = 3;

/// Why a fan-out by event type created nothing.
#[derive(Debug, thiserror::Error)]
pub enum FanOutError {
    /// More subscribers match than [`MAX_FAN_OUT`].
    #[error(
        "more than {MAX_FAN_OUT} subscribers are subscribed to event type `{0}`; at most \
         {MAX_FAN_OUT} per event (name them in subscriber_ids, in parts)"
    )]
    TooMany(String),
    /// The store's error (a payload conflict included).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Creates, for every subscriber subscribed to `event_type` now, the job `job_for`
/// makes of its id, in one request: all or nothing. Outcomes in subscriber id order;
/// empty when no subscriber matches. Subscribers are matched again (at most three
/// times) when one of them was deleted between the match and the write.
pub async fn create_for_event_type(
    store: &SharedStore,
    event_type: &str,
    job_for: impl Fn(String) -> NewJob,
) -> Result<Vec<CreateOutcome>, FanOutError> {
    let limit = u32::try_from(MAX_FAN_OUT + 1).unwrap_or(u32::MAX);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let ids = store.subscribers_of_event_type(event_type, limit).await?;
        if ids.len() > MAX_FAN_OUT {
            return Err(FanOutError::TooMany(event_type.to_owned()));
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let jobs = ids.into_iter().map(&job_for).collect();
        match store.create_jobs(jobs).await {
            Err(StoreError::UnknownSubscriber(id)) if attempt < MATCH_ATTEMPTS => {
                tracing::debug!(subscriber_id = %id, event_type,
                    "a matched subscriber was deleted before its job was written; matching again");
            }
            result => return Ok(result?),
        }
    }
}
