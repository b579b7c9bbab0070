//! Endpoint circuits, for both backends (docs/DESIGN.md §15.1): the row of one
//! subscriber's breaker, and the results of an outcome group applied to the breakers of
//! their subscribers in the transaction that records them.
//!
//! A row appears with the first result of a subscriber's attempt; no row reads as a
//! closed breaker with an empty window. Claims read the rows (never lock them): an
//! open breaker or the receiver's back-pressure holds the subscriber's due jobs, a
//! half-open one lets one probe go when none of its attempts is open, and
//! `long_running` feeds the time-fair share of its destination's places (§15.2): set
//! from the typical duration by each result, and by the worker as soon as an attempt
//! has been open for `--long-attempt-ms` ([`mark_long_running`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::Timestamp;
use crate::domain::circuit::CircuitPolicy;
use crate::domain::endpoint::{
    Counts, EndpointChange, EndpointCircuit, EndpointPolicy, EndpointResult, EndpointVerdict,
};
use crate::store::decode;
use crate::store::dialect::Query;
use crate::store::group_commit::{GroupCommit, GroupLimits, same_kind};
use crate::store::records::OutcomeRecord;
use crate::store::transactions::Transactions;
use crate::store::{LeaseRef, StoreError};

crate::store::lite_rows::row! {
    /// The columns of `endpoint_circuits` but `long_running` (derived from
    /// `duration_ms` when the row is written).
    #[derive(Clone, Debug, serde::Deserialize)]
    pub struct EndpointRow {
        subscriber_id: String,
        circuit: String,
        window_start: i64,
        results: i64,
        failures: i64,
        timeouts: i64,
        previous_results: i64,
        previous_failures: i64,
        previous_timeouts: i64,
        opened_at: Option<i64>,
        retry_at: Option<i64>,
        cooldown_ms: i64,
        changed_at: Option<i64>,
        hold_until: Option<i64>,
        duration_ms: Option<i64>,
        timeout_ms: Option<i64>,
        consecutive_timeouts: i64,
        last_result_at: i64,
    }
}

impl EndpointRow {
    /// The breaker.
    pub fn circuit(&self) -> Result<EndpointCircuit, StoreError> {
        let counts = |results, failures, timeouts| -> Result<Counts, StoreError> {
            Ok(Counts {
                results: decode::num("results", results)?,
                failures: decode::num("failures", failures)?,
                timeouts: decode::num("timeouts", timeouts)?,
            })
        };
        Ok(EndpointCircuit {
            state: decode::named("circuit", &self.circuit)?,
            window_start: Timestamp::from_millis(self.window_start),
            current: counts(self.results, self.failures, self.timeouts)?,
            previous: counts(
                self.previous_results,
                self.previous_failures,
                self.previous_timeouts,
            )?,
            opened_at: decode::opt_ts(self.opened_at),
            retry_at: decode::opt_ts(self.retry_at),
            cooldown_ms: decode::num("cooldown_ms", self.cooldown_ms)?,
            changed_at: decode::opt_ts(self.changed_at),
            hold_until: decode::opt_ts(self.hold_until),
            duration_ms: decode::opt_num("duration_ms", self.duration_ms)?,
            timeout_ms: decode::opt_num("timeout_ms", self.timeout_ms)?,
            consecutive_timeouts: decode::num("consecutive_timeouts", self.consecutive_timeouts)?,
            last_result_at: Timestamp::from_millis(self.last_result_at),
        })
    }
}

/// The statements of endpoint circuits, in the backend's dialect.
pub(crate) trait EndpointStatements: Transactions {
    /// Creates, at `$2`, the rows of subscribers `$1` (a JSON array of ids, ascending)
    /// that have none.
    const ENSURE: &'static str;
    /// The rows of subscribers `$1` (a JSON array of ids) in ascending id order
    /// ([`EndpointRow`]'s columns), held for this transaction (PostgreSQL: `FOR
    /// UPDATE`).
    const HOLD: &'static str;
    /// Writes each row of `$1`, a JSON array of objects with every column of
    /// [`EndpointRow`] (`long_running` as a boolean).
    const WRITE: &'static str;
    /// Marks long-running at `$2` the endpoints of the subscribers of the attempts
    /// `$1` (a JSON array of `[job id, lease token]`) whose lease still holds (the job
    /// `in_flight` under that token, its subscriber not deleted), creating the rows of
    /// those with none (PostgreSQL: rows held in ascending subscriber id, the order an
    /// outcome group holds them in).
    const MARK_LONG: &'static str;
}

/// Most subscribers marked long-running in one write.
pub const MAX_LONG_ATTEMPT_GROUP: usize = 512;

/// Marks long-running, in one write at `now`, the endpoints of the attempts `leases`
/// names: each has been open for at least `--long-attempt-ms` without an answer (the
/// worker's evidence, §15.2), so its subscriber's requests count against the share of
/// its destination's places long-running endpoints may hold from now on, not from its
/// first result (a new slow endpoint counted as quick until its first timeout, and
/// took every place of a shared host meanwhile: issue #33). Its next result sets the
/// flag again from its typical duration. Fenced by the lease: a note that arrives
/// after the attempt's outcome, or after its subscriber was deleted (and perhaps
/// registered again, a new endpoint), marks nothing. One statement whatever the
/// number.
pub(crate) async fn mark_long_running<S: EndpointStatements>(
    db: &S,
    leases: Vec<LeaseRef>,
    now: Timestamp,
) -> Result<(), StoreError> {
    if leases.is_empty() {
        return Ok(());
    }
    let pairs: Vec<(String, i64)> = leases
        .iter()
        .map(|lease| (lease.job_id.to_string(), lease.token))
        .collect();
    let attempts = serde_json::to_string(&pairs).map_err(internal)?;
    let query = Query::new(S::MARK_LONG).text(attempts).int(now.as_millis());
    db.write_alone(query).await?;
    Ok(())
}

/// Starts the group commit of `db`'s long attempts ([`mark_long_running`]): the notes
/// that arrive while a write runs share the next one (at most
/// [`MAX_LONG_ATTEMPT_GROUP`]), one write at a time, at the latest `now` among them.
pub(crate) fn spawn_long_attempts<S: EndpointStatements>(
    db: S,
) -> GroupCommit<(LeaseRef, Timestamp), ()> {
    let limits = GroupLimits {
        max_weight: MAX_LONG_ATTEMPT_GROUP,
        parallel: 1,
    };
    GroupCommit::spawn(
        limits,
        |_| 1,
        move |group: Vec<(LeaseRef, Timestamp)>| {
            let db = db.clone();
            async move {
                let size = group.len();
                let Some(now) = group.iter().map(|(_, now)| *now).max() else {
                    return Vec::new();
                };
                let leases = group.into_iter().map(|(lease, _)| lease).collect();
                match mark_long_running(&db, leases, now).await {
                    Ok(()) => (0..size).map(|_| Ok(())).collect(),
                    Err(error) => (0..size).map(|_| Err(same_kind(&error))).collect(),
                }
            }
        },
    )
}

/// The results of `records` that feed endpoint breakers, each with its subscriber.
fn results(records: &[OutcomeRecord]) -> Vec<(&str, EndpointResult)> {
    records
        .iter()
        .filter_map(|record| {
            let result = &record.result;
            let verdict =
                EndpointVerdict::of(result.error_class, result.status, record.retry_after)?;
            let read = EndpointResult {
                verdict,
                started_at: record.started_at,
                finished_at: record.finished_at,
                timeout_ms: record.attempt_timeout_ms,
            };
            Some((record.subscriber_id.as_str(), read))
        })
        .collect()
}

/// The subscribers whose endpoint breakers the results of `records` feed, as a JSON
/// array of ids in ascending order: the rows [`record_results`] holds.
pub(crate) fn with_results_json(records: &[OutcomeRecord]) -> Result<String, StoreError> {
    let subscribers: BTreeSet<&str> = results(records).iter().map(|(id, _)| *id).collect();
    serde_json::to_string(&subscribers).map_err(internal)
}

/// Applies the results of `records` at `now` to their subscribers' endpoint breakers in
/// `tx` (late results included: an answer is a fact about the endpoint); returns the
/// subscribers whose breaker opened from closed (a failed probe's reopening is no new
/// evidence about the host: a host whose healthy subscribers went quiet would
/// otherwise look, from its failing ones' probes alone, as if most of what it served
/// failed). `held`: the rows of [`with_results_json`]'s subscribers already held in
/// this transaction (by the outcome statement), else `None` and they are held here.
/// Costs at most three statements whatever the group's size: create the missing rows,
/// hold them in subscriber order, write them back.
pub(crate) async fn record_results<S: EndpointStatements>(
    tx: &mut S::Tx,
    records: &[OutcomeRecord],
    held: Option<Vec<EndpointRow>>,
    now: Timestamp,
    policy: &EndpointPolicy,
    circuit: &CircuitPolicy,
) -> Result<BTreeSet<String>, StoreError> {
    let results = results(records);
    if results.is_empty() {
        return Ok(BTreeSet::new());
    }
    let subscribers: BTreeSet<&str> = results.iter().map(|(id, _)| *id).collect();
    let mut rows = match held {
        Some(rows) => rows,
        None => {
            let ids = serde_json::to_string(&subscribers).map_err(internal)?;
            S::fetch_all(tx, Query::new(S::HOLD).text(ids)).await?
        }
    };
    // A subscriber's first result makes its row: written, then held, only for those
    // (one statement fewer per group once every endpoint has a row). The new rows are
    // held after the others, which cannot deadlock: they are inserted in id order, and
    // no other transaction can hold a row before it exists.
    let missing: Vec<&str> = subscribers
        .iter()
        .copied()
        .filter(|id| !rows.iter().any(|row| row.subscriber_id == *id))
        .collect();
    if !missing.is_empty() {
        let missing = serde_json::to_string(&missing).map_err(internal)?;
        let query = Query::new(S::ENSURE)
            .text(missing.clone())
            .int(now.as_millis());
        S::execute(tx, query).await?;
        rows.extend(S::fetch_all::<EndpointRow>(tx, Query::new(S::HOLD).text(missing)).await?);
    }
    let mut circuits: BTreeMap<String, EndpointCircuit> = BTreeMap::new();
    for row in &rows {
        circuits.insert(row.subscriber_id.clone(), row.circuit()?);
    }
    let mut opened = BTreeSet::new();
    for (subscriber, result) in results {
        let Some(breaker) = circuits.get_mut(subscriber) else {
            continue;
        };
        match breaker.record(result, now, policy, circuit) {
            EndpointChange::Opened => {
                tracing::warn!(
                    subscriber_id = subscriber,
                    cooldown_ms = breaker.cooldown_ms,
                    "endpoint circuit opened: the subscriber's jobs wait until a probe succeeds"
                );
                opened.insert(subscriber.to_owned());
            }
            EndpointChange::Reopened => {
                tracing::info!(
                    subscriber_id = subscriber,
                    cooldown_ms = breaker.cooldown_ms,
                    "endpoint circuit probe failed: open again"
                );
            }
            EndpointChange::Closed => {
                tracing::info!(
                    subscriber_id = subscriber,
                    "endpoint circuit closed: the probe succeeded"
                );
            }
            EndpointChange::None => {}
        }
    }
    let written: Vec<serde_json::Value> = circuits
        .iter()
        .map(|(id, breaker)| to_json(id, breaker, policy))
        .collect();
    let query = Query::new(S::WRITE).text(serde_json::Value::Array(written).to_string());
    S::execute(tx, query).await?;
    Ok(opened)
}

/// One row of [`EndpointStatements::WRITE`]'s batch.
fn to_json(
    subscriber_id: &str,
    breaker: &EndpointCircuit,
    policy: &EndpointPolicy,
) -> serde_json::Value {
    let ms = |t: Option<Timestamp>| t.map(Timestamp::as_millis);
    serde_json::json!({
        "subscriber_id": subscriber_id,
        "circuit": breaker.state.as_str(),
        "window_start": breaker.window_start.as_millis(),
        "results": breaker.current.results,
        "failures": breaker.current.failures,
        "timeouts": breaker.current.timeouts,
        "previous_results": breaker.previous.results,
        "previous_failures": breaker.previous.failures,
        "previous_timeouts": breaker.previous.timeouts,
        "opened_at": ms(breaker.opened_at),
        "retry_at": ms(breaker.retry_at),
        "cooldown_ms": breaker.cooldown_ms,
        "changed_at": ms(breaker.changed_at),
        "hold_until": ms(breaker.hold_until),
        "duration_ms": breaker.duration_ms,
        "timeout_ms": breaker.timeout_ms,
        "consecutive_timeouts": breaker.consecutive_timeouts,
        "long_running": breaker.long_running(policy),
        "last_result_at": breaker.last_result_at.as_millis(),
    })
}

fn internal(error: serde_json::Error) -> StoreError {
    StoreError::Internal(error.to_string())
}
