//! Read-only figures, for both backends: the worker's next wake-up, the metrics gauges,
//! a subscriber's load against its limits, and a subscriber's statistics.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use crate::domain::circuit::CircuitState;
use crate::domain::destination_state::DestinationPolicy;
use crate::domain::endpoint::{RecentResults, endpoint_hold};
use crate::domain::waiting::{SubscriberLoad, WaitingReason};
use crate::domain::{DeadReason, JobState, Timestamp, tombstone};
use crate::store::StoreError;
use crate::store::decode;
use crate::store::destinations::{self, Admissions, CountedRow, LoadedRow};
use crate::store::dialect::Query;
use crate::store::records::{AttemptFailure, JobCounts, StoreGauges, SubscriberStats};
use crate::store::replays::ReplayStatements;
use crate::store::transactions::Transactions;

crate::store::lite_rows::row! {
    /// A row, whatever its columns (an existence check).
    pub struct Exists {}
}

crate::store::lite_rows::row! {
    /// A `GROUP BY state` count.
    pub struct StateCount {
        state: String,
        n: i64,
    }
}

crate::store::lite_rows::row! {
    /// A `GROUP BY dead_reason` count of dead jobs.
    pub struct ReasonCount {
        reason: Option<String>,
        n: i64,
    }
}

crate::store::lite_rows::row! {
    /// A count (one column `n`).
    pub struct Count {
        pub(crate) n: i64,
    }
}

crate::store::lite_rows::row! {
    /// The gauges other than the counts per state.
    pub struct GaugeRow {
        oldest_eligible: Option<i64>,
        oldest_retrying: Option<i64>,
        past_slo: i64,
        near_deadline: i64,
    }
}

crate::store::lite_rows::row! {
    /// A subscriber's limits and use of them.
    pub struct LoadRow {
        subscriber_max_in_flight: i64,
        rate_limit_per_second: Option<i64>,
        open_attempts: i64,
        started_last_second: i64,
        last_started_at: Option<i64>,
        endpoint_circuit: Option<String>,
        endpoint_retry_at: Option<i64>,
        endpoint_hold_until: Option<i64>,
        endpoint_timeouts: Option<i64>,
        own_timeout_ms: Option<i64>,
        endpoint_timeout_ms: Option<i64>,
    }
}

crate::store::lite_rows::row! {
    /// A subscriber's id, limits and use of them, with its destination's row and
    /// requests open.
    pub struct IdLoadRow {
        subscriber_id: String,
        #[sqlx(flatten)]
        load: LoadRow,
        #[sqlx(flatten)]
        destination: CountedRow,
    }
}

impl LoadRow {
    /// The subscriber's load at `now`, its destination holding its work back for
    /// `destination_hold` (the reason, and until when if known), if it does.
    pub fn load(
        &self,
        destination_hold: Option<(WaitingReason, Option<Timestamp>)>,
        now: Timestamp,
    ) -> SubscriberLoad {
        let count = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
        let open_attempts = count(self.open_attempts);
        let endpoint = endpoint_hold(
            self.endpoint_circuit.as_deref() == Some(CircuitState::Open.as_str()),
            decode::opt_ts(self.endpoint_retry_at),
            decode::opt_ts(self.endpoint_hold_until),
            open_attempts,
            now,
        );
        SubscriberLoad {
            open_attempts,
            max_in_flight: count(self.subscriber_max_in_flight),
            started_last_second: count(self.started_last_second),
            rate_limit_per_second: self.rate_limit_per_second.map(count),
            last_started_at: decode::opt_ts(self.last_started_at),
            destination_hold: destination_hold.map(|(reason, _)| reason),
            destination_hold_until: destination_hold.and_then(|(_, until)| until),
            endpoint_hold: endpoint.map(|(reason, _)| reason),
            endpoint_hold_until: endpoint.and_then(|(_, until)| until),
            recent: recent_results(
                self.endpoint_timeouts,
                self.endpoint_timeout_ms,
                self.own_timeout_ms,
            ),
        }
    }
}

/// An endpoint's recent results from its row's columns (none without a row) and its
/// subscriber's own attempt timeout.
pub fn recent_results(
    consecutive_timeouts: Option<i64>,
    timeout_ms: Option<i64>,
    own_timeout_ms: Option<i64>,
) -> RecentResults {
    let ms = |n: Option<i64>| n.and_then(|ms| u64::try_from(ms).ok());
    RecentResults {
        consecutive_timeouts: u32::try_from(consecutive_timeouts.unwrap_or(0).max(0))
            .unwrap_or(u32::MAX),
        timeout_ms: ms(timeout_ms),
        own_timeout_ms: ms(own_timeout_ms),
    }
}

crate::store::lite_rows::row! {
    /// A subscriber's oldest eligible job and latest delivery.
    pub struct EligibleRow {
        oldest_eligible: Option<i64>,
        last_success: Option<i64>,
    }
}

crate::store::lite_rows::row! {
    /// A subscriber's latest failed attempt.
    pub struct FailureRow {
        finished_at: i64,
        outcome: String,
        error_class: Option<String>,
        status: Option<i64>,
        reason: Option<String>,
    }
}

/// The statements of the figures, in the backend's dialect. The gauges and a
/// subscriber's load are read outside a transaction (SQLite: on its readers); a
/// subscriber's statistics in one snapshot.
pub(crate) trait FigureStatements: Transactions {
    /// Jobs per state ([`StateCount`]).
    const STATE_COUNTS_ALL: &'static str;
    /// Dead jobs per `dead_reason` ([`ReasonCount`]).
    const DEAD_REASON_COUNTS_ALL: &'static str;
    /// Jobs `in_flight` whose lease has expired at `$1` ([`Count`]).
    const EXPIRED_LEASES_ALL: &'static str;
    /// The other gauges at `$1` ([`GaugeRow`]); `$2` is `$1` minus the objective.
    const GAUGES: &'static str;
    /// Subscriber `$1`'s limits and their use at `$2` ([`LoadRow`]).
    const LOAD: &'static str;
    /// Whether subscriber `$1` exists (a row when it does).
    const SUBSCRIBER_EXISTS: &'static str;
    /// Subscriber `$1`'s jobs per state ([`StateCount`]).
    const STATE_COUNTS: &'static str;
    /// Subscriber `$1`'s jobs `in_flight` whose lease has expired at `$2` ([`Count`]).
    const EXPIRED_LEASES: &'static str;
    /// The earliest due time of subscriber `$1`'s waiting jobs due at `$2`, and its
    /// latest delivered attempt ([`EligibleRow`]).
    const ELIGIBLE_AND_SUCCESS: &'static str;
    /// Subscriber `$1`'s latest finished attempt that failed ([`FailureRow`]).
    const LAST_FAILURE: &'static str;

    /// [`Self::LOAD`] of each subscriber of `$1` (a JSON array of ids) with its id,
    /// its destination and that destination's requests open at `$2` in the same row
    /// ([`IdLoadRow`]); no row for a subscriber that does not exist or whose
    /// destination's row is missing (one assigned by an older version not yet).
    const LOADS_AT_DESTINATIONS: &'static str;
    /// The destinations with due work at `$1`, with their requests open then
    /// ([`LoadedRow`], quick endpoints active since `$2`), read without holding them.
    const DUE_DESTINATIONS: &'static str;
    /// The destinations the gauges describe at `$1` ([`CountedRow`]): those with
    /// requests open, and those paused or whose circuit is not plainly closed.
    const GAUGED_DESTINATIONS: &'static str;

    /// When a job (or a running replay's next burst) next needs a worker, as of `now`,
    /// in one statement (see [`crate::store::WorkerStore::next_wake_at`]), counting a subscriber's
    /// due work only when its destination is among `admitted` (a JSON object whose
    /// keys are the destinations that let work go now).
    fn next_job_wake(
        &self,
        now: Timestamp,
        admitted: String,
    ) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;
}

/// See [`crate::store::Store::gauges`].
pub(crate) async fn gauges<S: FigureStatements>(
    db: &S,
    now: Timestamp,
    slo_ms: u64,
    policy: &DestinationPolicy,
) -> Result<StoreGauges, StoreError> {
    let mut gauges = StoreGauges::default();
    // The counts and the expired leases in one snapshot, so that the ones moved to
    // `retrying` are among the `in_flight` ones counted and the dead ones per reason
    // add up to the `dead` count.
    let mut tx = db.snapshot().await?;
    let counts: Vec<StateCount> = S::fetch_all(&mut tx, Query::new(S::STATE_COUNTS_ALL)).await?;
    let reasons: Vec<ReasonCount> =
        S::fetch_all(&mut tx, Query::new(S::DEAD_REASON_COUNTS_ALL)).await?;
    let expired: Count = S::fetch_one(
        &mut tx,
        Query::new(S::EXPIRED_LEASES_ALL).int(now.as_millis()),
    )
    .await?;
    S::commit(tx).await?;
    let mut by_state = JobCounts::default();
    for row in counts {
        let state: JobState = decode::named("state", &row.state)?;
        by_state.add(state, decode::count(row.n));
    }
    by_state.lease_expired(decode::count(expired.n));
    gauges.jobs_by_state = JobState::ALL
        .into_iter()
        .map(|state| (state, by_state.get(state)))
        .filter(|&(_, n)| n > 0)
        .collect();
    let mut dead = Vec::new();
    for row in reasons {
        // A dead job always has a reason; one without it is left out of the gauge.
        if let Some(reason) = decode::opt_named::<DeadReason>("dead_reason", row.reason.as_deref())?
        {
            dead.push((reason, decode::count(row.n)));
        }
    }
    gauges.dead_by_reason = DeadReason::ALL
        .into_iter()
        .filter_map(|reason| {
            let n: u64 = dead
                .iter()
                .filter(|(r, _)| *r == reason)
                .map(|(_, n)| n)
                .sum();
            (n > 0).then_some((reason, n))
        })
        .collect();
    let slo_cutoff = now
        .as_millis()
        .saturating_sub(i64::try_from(slo_ms).unwrap_or(i64::MAX));
    let row: GaugeRow = db
        .read_one(Query::new(S::GAUGES).int(now.as_millis()).int(slo_cutoff))
        .await?;
    gauges.oldest_eligible_since = decode::opt_ts(row.oldest_eligible);
    gauges.oldest_retrying_since = decode::opt_ts(row.oldest_retrying);
    gauges.past_slo = decode::count(row.past_slo);
    gauges.near_deadline = decode::count(row.near_deadline);
    let destinations: Vec<CountedRow> = db
        .read_all(Query::new(S::GAUGED_DESTINATIONS).int(now.as_millis()))
        .await?;
    for row in &destinations {
        let view = row.view(now, policy)?;
        if view.in_flight >= u64::from(view.max_in_flight) {
            gauges.destinations_at_limit += 1;
        }
        match view.circuit.state {
            CircuitState::Open => gauges.circuits_open += 1,
            CircuitState::HalfOpen => gauges.circuits_half_open += 1,
            CircuitState::Closed => {}
        }
    }
    Ok(gauges)
}

/// See [`crate::store::WorkerStore::next_wake_at`]: the sooner of the jobs' next wake-up
/// and a running replay's next burst (read in the same statement).
/// A destination held by its circuit counts from the end of its cool-down.
pub(crate) async fn next_wake_at<S: FigureStatements + ReplayStatements>(
    db: &S,
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<Option<Timestamp>, StoreError> {
    let since = now.minus_ms(policy.endpoint.window_ms);
    let query = Query::new(S::DUE_DESTINATIONS)
        .int(now.as_millis())
        .int(since.as_millis());
    let due: Vec<LoadedRow> = db.read_all(query).await?;
    let admissions = Admissions::of(&due, now, policy)?;
    let jobs = db.next_job_wake(now, admissions.json_object()?).await?;
    Ok(jobs.into_iter().chain(admissions.next_change).min())
}

/// See [`crate::store::Store::subscriber_loads`].
pub(crate) async fn subscriber_loads<S: FigureStatements>(
    db: &S,
    ids: &[String],
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<HashMap<String, SubscriberLoad>, StoreError> {
    let wanted: BTreeSet<&str> = ids
        .iter()
        .map(String::as_str)
        .filter(|id| !tombstone::is_tombstone(id))
        .collect();
    let mut loads = HashMap::new();
    if wanted.is_empty() {
        return Ok(loads);
    }
    // One read for all (issue #36: the view of every created job reads its
    // subscriber's load; a group of creates over many subscribers read one each).
    let ids = serde_json::to_string(&wanted)
        .map_err(|error| StoreError::Internal(format!("subscriber ids: {error}")))?;
    let query = Query::new(S::LOADS_AT_DESTINATIONS)
        .text(ids)
        .int(now.as_millis());
    let rows: Vec<IdLoadRow> = db.read_all(query).await?;
    for row in rows {
        let hold = destinations::hold_until(&row.destination, now, policy)?;
        loads.insert(row.subscriber_id, row.load.load(hold, now));
    }
    // No such subscriber, or no destination row of it yet: its own load alone.
    for id in wanted {
        if loads.contains_key(id) {
            continue;
        }
        let query = Query::new(S::LOAD).text(id).int(now.as_millis());
        let row: Option<LoadRow> = db.read_optional(query).await?;
        if let Some(row) = row {
            loads.insert(id.to_owned(), row.load(None, now));
        }
    }
    Ok(loads)
}

/// The figures of subscriber `id` at `now`, read in one snapshot (see
/// [`crate::store::Store::subscriber_stats`]); `None` when it does not exist.
pub(crate) async fn subscriber_stats<S: FigureStatements>(
    db: &S,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberStats>, StoreError> {
    if tombstone::is_tombstone(id) {
        return Ok(None);
    }
    let mut tx = db.snapshot().await?;
    let known: Option<Exists> =
        S::fetch_optional(&mut tx, Query::new(S::SUBSCRIBER_EXISTS).text(id)).await?;
    if known.is_none() {
        return Ok(None);
    }
    let mut stats = SubscriberStats::default();
    let counts: Vec<StateCount> =
        S::fetch_all(&mut tx, Query::new(S::STATE_COUNTS).text(id)).await?;
    for row in counts {
        let state: JobState = decode::named("state", &row.state)?;
        stats.jobs.add(state, decode::count(row.n));
    }
    let query = Query::new(S::EXPIRED_LEASES).text(id).int(now.as_millis());
    let expired: Count = S::fetch_one(&mut tx, query).await?;
    stats.jobs.lease_expired(decode::count(expired.n));
    let query = Query::new(S::ELIGIBLE_AND_SUCCESS)
        .text(id)
        .int(now.as_millis());
    let row: EligibleRow = S::fetch_one(&mut tx, query).await?;
    stats.oldest_eligible_since = decode::opt_ts(row.oldest_eligible);
    stats.last_success_at = decode::opt_ts(row.last_success);
    let failure: Option<FailureRow> =
        S::fetch_optional(&mut tx, Query::new(S::LAST_FAILURE).text(id)).await?;
    stats.last_failure = failure
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
