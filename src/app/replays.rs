//! Paced replays of dead letters (docs/DESIGN.md §5.7): their view, and the actions
//! — create, dry run, cancel — that the API's `/v1/replays` routes and the console's
//! replay page run.

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use super::error::AppError;
use crate::domain::policy::ErrorClass;
use crate::domain::replay::{ReplaySelection, ReplayState};
use crate::domain::replay_plan::ReplayPlan;
use crate::domain::{DeadReason, Timestamp};
use crate::store::{NewReplay, Replay};

/// The filter of a replay, as given.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplayFilterView {
    /// Only this subscriber.
    pub subscriber_id: Option<String>,
    /// Only these subscribers.
    pub subscriber_ids: Option<Vec<String>>,
    /// Only this event.
    pub event_id: Option<String>,
    /// Only this last error class.
    pub error_class: Option<ErrorClass>,
    /// Only this last HTTP status.
    pub last_status: Option<u16>,
    /// Only this reason.
    pub dead_reason: Option<DeadReason>,
    /// Dead at or after.
    pub dead_after: Option<Timestamp>,
    /// Dead before.
    pub dead_before: Option<Timestamp>,
    /// Every job selected.
    pub all: bool,
}

/// A replay and its progress. `requeued + skipped` reaches `matched` when it is
/// `done` (less if finished jobs were purged meanwhile).
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplayView {
    /// The replay's id (UUIDv7).
    pub id: Uuid,
    /// `running`, `done` or `cancelled`.
    pub state: ReplayState,
    /// `dead`: it requeues dead jobs; `retrying`: it brings retrying jobs forward.
    pub selects: ReplaySelection,
    /// Which jobs it selected.
    pub filter: ReplayFilterView,
    /// Most jobs it could take.
    pub max_jobs: u32,
    /// Most jobs requeued per second.
    pub rate_per_second: u32,
    /// Requeued jobs' time to their new deadline, in ms.
    pub ttl_ms: u64,
    /// Jobs matched when it was created.
    pub matched: u64,
    /// Jobs released so far: dead ones moved back to `scheduled` (same id, event id,
    /// payload and attempt history; a fresh deadline and attempt budget), or retrying
    /// ones made due (same deadline and attempts).
    pub requeued: u64,
    /// Matched jobs no longer in the selected state when their turn came (e.g.
    /// delivered after another replay), or retrying ones past their deadline or out of
    /// attempts; left alone, never resent.
    pub skipped: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it ended.
    pub finished_at: Option<Timestamp>,
}

impl From<Replay> for ReplayView {
    fn from(r: Replay) -> Self {
        ReplayView {
            id: r.id,
            state: r.state,
            selects: r.filter.selects,
            filter: ReplayFilterView {
                subscriber_id: r.filter.subscriber_id,
                subscriber_ids: (!r.filter.subscriber_ids.is_empty())
                    .then_some(r.filter.subscriber_ids),
                event_id: r.filter.event_id,
                error_class: r.filter.error_class,
                last_status: r.filter.last_status,
                dead_reason: r.filter.dead_reason,
                dead_after: r.filter.dead_after,
                dead_before: r.filter.dead_before,
                all: r.filter.all,
            },
            max_jobs: r.max_jobs,
            rate_per_second: r.rate_per_second,
            ttl_ms: r.ttl_ms,
            matched: r.matched,
            requeued: r.requeued,
            skipped: r.skipped,
            created_at: r.created_at,
            updated_at: r.updated_at,
            finished_at: r.finished_at,
        }
    }
}

/// The replay of `plan` as the store creates it, with id `id`, created at `now`.
pub fn replay_record(plan: ReplayPlan, id: Uuid, now: Timestamp) -> NewReplay {
    NewReplay {
        id,
        filter: plan.filter,
        max_jobs: plan.max_jobs,
        rate_per_second: plan.rate_per_second,
        ttl_ms: plan.ttl_ms,
        rate_budget: plan.rate_budget,
        created_at: now,
    }
}

pub fn replay_id(raw: &str) -> Result<Uuid, AppError> {
    Uuid::parse_str(raw).map_err(|_| AppError::invalid("replay_id", "must be a UUID"))
}

pub fn not_found(id: Uuid) -> AppError {
    AppError::NotFound(format!("replay {id} does not exist"))
}

/// Creates the replay of `plan` (checked) with id `id` (named in its audit entry
/// before it runs), at the clock's now: its first burst is due at once (409 when
/// running replays already use the server's `--max-replay-rate`).
pub async fn create(state: &AppState, plan: ReplayPlan, id: Uuid) -> Result<ReplayView, AppError> {
    let now = state.clock.now();
    let created = state
        .store
        .create_replay(replay_record(plan, id, now))
        .await?;
    tracing::info!(replay_id = %created.id, matched = created.matched,
        rate_per_second = created.rate_per_second, "replay created");
    Ok(ReplayView::from(created))
}

/// How many jobs a replay of `plan` would take now (at most its `max_jobs`); nothing
/// is changed.
pub async fn dry_run(state: &AppState, plan: &ReplayPlan) -> Result<u64, AppError> {
    Ok(state
        .store
        .count_replay_matches(&plan.filter, plan.max_jobs)
        .await?)
}

/// Stops running replay `raw` (a UUID, else a 422 naming `replay_id`; 404 when there
/// is no such replay). Jobs it already requeued stay requeued; a replay that has
/// ended is answered as it is.
pub async fn cancel(state: &AppState, raw: &str) -> Result<ReplayView, AppError> {
    let id = replay_id(raw)?;
    let now = state.clock.now();
    let replay = state
        .store
        .cancel_replay(id, now)
        .await?
        .ok_or_else(|| not_found(id))?;
    if replay.state == ReplayState::Cancelled && replay.finished_at == Some(now) {
        tracing::info!(replay_id = %id, requeued = replay.requeued, "replay cancelled");
    }
    Ok(replay.into())
}
