//! Events as an operator reads them: the events with jobs not delivered (affected),
//! and everything about one event's jobs a summary is drawn from.

use std::collections::HashMap;

use uuid::Uuid;

use super::figures::JobCounts;
use super::jobs::Job;
use crate::domain::Timestamp;
use crate::domain::waiting::SubscriberLoad;

/// An event with jobs not delivered (see [`crate::store::Store::list_affected_events`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AffectedEvent {
    /// The producer's event id.
    pub event_id: String,
    /// All of its jobs per state, as read at `now` (an expired lease counts as
    /// `retrying`).
    pub jobs: JobCounts,
    /// How many of its jobs are affected.
    pub affected: u64,
    /// When its first job was created.
    pub created_at: Timestamp,
    /// Its newest job's id: the listing's order and cursor.
    pub newest_job_id: Uuid,
}

/// One job of an event, with when its last failure was recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventJob {
    /// The job as read at `now` (see [`Job::as_of`]); `last_error.body_excerpt` is not
    /// read (always `None`).
    pub job: Job,
    /// `finished_at` of its latest attempt that failed (`retryable`, `terminal` or
    /// `blocked`), if any.
    pub last_error_at: Option<Timestamp>,
}

/// One event's jobs as read in one snapshot at `now` (see
/// [`crate::store::Store::event_jobs`]).
#[derive(Clone, Debug, Default)]
pub struct EventJobs {
    /// Every job of the event, in subscriber id order.
    pub jobs: Vec<EventJob>,
    /// For each enabled subscriber with a `retrying` job, or a due one waiting for a
    /// claim: its load against its limits, with its destination's hold and when that
    /// ends; keyed by subscriber id.
    pub holds: HashMap<String, SubscriberLoad>,
}
