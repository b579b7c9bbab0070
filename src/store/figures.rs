//! Read-only figures, for both backends: the worker's next wake-up, the metrics gauges,
//! a subscriber's load against its limits, and a subscriber's statistics.

use std::future::Future;

use crate::domain::waiting::SubscriberLoad;
use crate::domain::{JobState, Timestamp};
use crate::store::StoreError;
use crate::store::decode;
use crate::store::records::{AttemptFailure, StoreGauges, SubscriberStats};
use crate::store::replays::ReplayStatements;
use crate::store::transactions::Transactions;

/// A `GROUP BY state` count.
#[derive(sqlx::FromRow)]
pub struct StateCount {
    state: String,
    n: i64,
}

/// The gauges other than the counts per state.
#[derive(sqlx::FromRow)]
pub struct GaugeRow {
    oldest_eligible: Option<i64>,
    oldest_retrying: Option<i64>,
    past_slo: i64,
    near_deadline: i64,
}

/// A subscriber's limits and use of them.
#[derive(sqlx::FromRow)]
pub struct LoadRow {
    max_in_flight: i64,
    rate_limit_per_second: Option<i64>,
    open_attempts: i64,
    started_last_second: i64,
    last_started_at: Option<i64>,
}

/// A subscriber's oldest eligible job and latest delivery.
#[derive(sqlx::FromRow)]
pub struct EligibleRow {
    oldest_eligible: Option<i64>,
    last_success: Option<i64>,
}

/// A subscriber's latest failed attempt.
#[derive(sqlx::FromRow)]
pub struct FailureRow {
    finished_at: i64,
    outcome: String,
    error_class: Option<String>,
    status: Option<i64>,
    reason: Option<String>,
}

/// The statements of the figures. Those taking `&self` read outside a transaction
/// (SQLite: on its readers).
pub(crate) trait FigureStatements: Transactions {
    /// Jobs per state.
    fn state_counts(&self) -> impl Future<Output = Result<Vec<StateCount>, StoreError>> + Send;

    /// The other gauges at `now` (see [`StoreGauges`]); `slo_cutoff` is `now` minus
    /// the objective, in ms.
    fn gauge_row(
        &self,
        now: Timestamp,
        slo_cutoff: i64,
    ) -> impl Future<Output = Result<GaugeRow, StoreError>> + Send;

    /// When a job next needs a worker, as of `now` (see
    /// [`crate::store::Store::next_wake_at`]; replays aside).
    fn next_job_wake(
        &self,
        now: Timestamp,
    ) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// Subscriber `id`'s limits and their use at `now`; `None` when it does not exist.
    fn load(
        &self,
        id: &str,
        now: Timestamp,
    ) -> impl Future<Output = Result<Option<LoadRow>, StoreError>> + Send;

    /// Whether subscriber `id` exists.
    fn subscriber_exists(
        tx: &mut Self::Tx,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Subscriber `id`'s jobs per state.
    fn subscriber_state_counts(
        tx: &mut Self::Tx,
        id: &str,
    ) -> impl Future<Output = Result<Vec<StateCount>, StoreError>> + Send;

    /// The earliest due time of subscriber `id`'s waiting jobs due at `now`, and its
    /// latest delivered attempt.
    fn eligible_and_success(
        tx: &mut Self::Tx,
        id: &str,
        now: Timestamp,
    ) -> impl Future<Output = Result<EligibleRow, StoreError>> + Send;

    /// Subscriber `id`'s latest finished attempt that failed.
    fn last_failure(
        tx: &mut Self::Tx,
        id: &str,
    ) -> impl Future<Output = Result<Option<FailureRow>, StoreError>> + Send;
}

/// See [`crate::store::Store::gauges`].
pub(crate) async fn gauges<S: FigureStatements>(
    db: &S,
    now: Timestamp,
    slo_ms: u64,
) -> Result<StoreGauges, StoreError> {
    let mut gauges = StoreGauges::default();
    for row in db.state_counts().await? {
        let state: JobState = decode::named("state", &row.state)?;
        gauges.jobs_by_state.push((state, decode::count(row.n)));
    }
    let slo_cutoff = now
        .as_millis()
        .saturating_sub(i64::try_from(slo_ms).unwrap_or(i64::MAX));
    let row = db.gauge_row(now, slo_cutoff).await?;
    gauges.oldest_eligible_since = decode::opt_ts(row.oldest_eligible);
    gauges.oldest_retrying_since = decode::opt_ts(row.oldest_retrying);
    gauges.past_slo = decode::count(row.past_slo);
    gauges.near_deadline = decode::count(row.near_deadline);
    Ok(gauges)
}

/// See [`crate::store::Store::next_wake_at`]: the sooner of the jobs' next wake-up
/// and a running replay's next burst.
pub(crate) async fn next_wake_at<S: FigureStatements + ReplayStatements>(
    db: &S,
    now: Timestamp,
) -> Result<Option<Timestamp>, StoreError> {
    let jobs = db.next_job_wake(now).await?;
    let replay = db.next_replay_at().await?;
    Ok(jobs.into_iter().chain(replay).min())
}

/// See [`crate::store::Store::subscriber_load`].
pub(crate) async fn subscriber_load<S: FigureStatements>(
    db: &S,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberLoad>, StoreError> {
    let count = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
    Ok(db.load(id, now).await?.map(|row| SubscriberLoad {
        open_attempts: count(row.open_attempts),
        max_in_flight: count(row.max_in_flight),
        started_last_second: count(row.started_last_second),
        rate_limit_per_second: row.rate_limit_per_second.map(count),
        last_started_at: decode::opt_ts(row.last_started_at),
    }))
}

/// The figures of subscriber `id` at `now`, read in one snapshot (see
/// [`crate::store::Store::subscriber_stats`]); `None` when it does not exist.
pub(crate) async fn subscriber_stats<S: FigureStatements>(
    db: &S,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberStats>, StoreError> {
    let mut tx = db.snapshot().await?;
    if !S::subscriber_exists(&mut tx, id).await? {
        return Ok(None);
    }
    let mut stats = SubscriberStats::default();
    for row in S::subscriber_state_counts(&mut tx, id).await? {
        let state: JobState = decode::named("state", &row.state)?;
        stats.jobs.add(state, decode::count(row.n));
    }
    let row = S::eligible_and_success(&mut tx, id, now).await?;
    stats.oldest_eligible_since = decode::opt_ts(row.oldest_eligible);
    stats.last_success_at = decode::opt_ts(row.last_success);
    stats.last_failure = S::last_failure(&mut tx, id)
        .await?
        .map(|row| -> Result<AttemptFailure, StoreError> {
            Ok(AttemptFailure {
                at: Timestamp::from_millis(row.finished_at),
                outcome: decode::named("outcome", &row.outcome)?,
                class: decode::opt_named("error_class", row.error_class.as_deref())?,
                status: decode::opt_num("status", row.status)?,
                reason: row.reason,
            })
        })
        .transpose()?;
    S::commit(tx).await?;
    Ok(Some(stats))
}
