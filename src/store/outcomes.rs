//! Attempt outcomes, for both backends. A batch is one JSON array, read by set-based
//! statements (finish the attempts; apply the transitions whose lease still holds:
//! two on SQLite, one on PostgreSQL, see [`Apply`]), so a batch costs the same
//! statements whatever its size.
//!
//! Outcomes recorded one by one ([`crate::store::WorkerStore::record_outcome`]) are
//! group-committed: attempts that finish at about the same time share one write (one
//! transaction, one fsync), while each still learns its own result, fenced by its own
//! lease token (docs/DESIGN.md §3, throughput shape).

use std::collections::HashSet;

use crate::domain::destination_state::DestinationPolicy;
use crate::domain::{DeadReason, JobState, Timestamp};
use crate::store::StoreError;
use crate::store::destinations::{self, DestinationStatements};
use crate::store::dialect::Query;
use crate::store::endpoints::{self, EndpointStatements};
use crate::store::group_commit::{GroupCommit, GroupLimits, same_kind};
use crate::store::records::{Fenced, OutcomeRecord};
use crate::store::transactions::Transactions;

/// Most outcomes one group commit writes.
pub const MAX_OUTCOME_GROUP: usize = 256;

/// How a backend finishes a batch's attempts and applies its transitions. Each attempt
/// row is named by its lease token, so a late result still lands on its own attempt;
/// each transition applies only while its lease holds (fencing token, `in_flight`).
pub(crate) enum Apply {
    /// Two statements where writes take no row locks (SQLite: one writer): `finish`
    /// finishes each attempt of batch `$1` (see [`to_json`]); `apply` applies the
    /// transitions and returns the (job id, token) pairs applied.
    Separate {
        /// Finishes the attempts.
        finish: &'static str,
        /// Applies the transitions.
        apply: &'static str,
    },
    /// One statement where writes take row locks (PostgreSQL), which also holds and
    /// reads what the breakers need next: it holds, in the store's lock order
    /// (subscribers → jobs by id → attempts → endpoint circuits by subscriber →
    /// destinations by key, docs/DESIGN.md §3.6), the batch `$1`'s jobs whose lease
    /// still holds, then its attempt rows, then the endpoint circuits of subscribers
    /// `$2` (a JSON array of ids); and returns one row of three JSON arrays as text:
    /// the (job id, token) pairs applied, the endpoint rows held (the columns of
    /// [`endpoints::EndpointRow`]), and each batch job's destination (the columns of
    /// [`destinations::JobDestinationRow`]), read without holding it. Two statements
    /// fewer per group than reading those apart (issue #36).
    WithReads(&'static str),
}

/// The statements of a batch of outcomes, in the backend's dialect.
pub(crate) trait OutcomeStatements:
    Transactions + DestinationStatements + EndpointStatements
{
    /// Holds, before anything is written, the subscribers of the jobs in JSON array
    /// `$1` (job ids) in ascending id order; `None` where writes do not take row locks
    /// (SQLite: one writer). Run only when an outcome pauses its subscriber.
    const LOCK_SUBSCRIBERS: Option<&'static str>;
    /// How the batch is finished and applied ([`Apply`]).
    const APPLY: Apply;
    /// Pauses the subscriber of job `$1` at `$2` (its receiver answered `410`) with
    /// reason `gone`; one already paused keeps its reason and time.
    const PAUSE_SUBSCRIBER: &'static str;
}

/// Records `records` at `now` in one write transaction (see
/// [`crate::store::Store::record_outcomes`]).
///
/// The results also feed their subscribers' endpoint breakers and their destinations'
/// breakers (docs/DESIGN.md §15), late ones included: an answer is a fact about the
/// endpoint and the host, whoever holds the lease.
pub(crate) async fn record<S: OutcomeStatements>(
    db: &S,
    records: &[OutcomeRecord],
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<Vec<Fenced>, StoreError> {
    check(records)?;
    let (records, policy) = (records.to_vec(), *policy);
    db.transaction(move |tx| Box::pin(record_in::<S>(tx, records, now, policy)))
        .await
}

/// [`record`]'s statements, in `tx`.
async fn record_in<S: OutcomeStatements>(
    tx: &mut S::Tx,
    records: Vec<OutcomeRecord>,
    now: Timestamp,
    policy: DestinationPolicy,
) -> Result<Vec<Fenced>, StoreError> {
    let batch = to_json(&records, now);
    lock_subscribers::<S>(tx, &records).await?;
    let (applied, held) = match S::APPLY {
        Apply::Separate { finish, apply } => {
            S::execute(tx, Query::new(finish).text(batch.clone())).await?;
            let applied: Vec<(String, i64)> =
                S::fetch_all(tx, Query::new(apply).text(batch)).await?;
            (applied, Held::default())
        }
        Apply::WithReads(statement) => {
            let subscribers = endpoints::with_results_json(&records)?;
            let query = Query::new(statement).text(batch).text(subscribers);
            let (applied, endpoints, destinations): (String, String, String) =
                S::fetch_one(tx, query).await?;
            let held = Held {
                endpoints: Some(from_json("endpoint rows", &endpoints)?),
                destinations: Some(from_json("job destinations", &destinations)?),
            };
            (from_json("applied transitions", &applied)?, held)
        }
    };
    for record in records.iter().filter(|r| r.pause_subscriber) {
        let query = Query::new(S::PAUSE_SUBSCRIBER)
            .text(record.lease.job_id.to_string())
            .int(now.as_millis());
        S::execute(tx, query).await?;
    }
    let (circuit, endpoint) = (&policy.circuit, &policy.endpoint);
    let opened =
        endpoints::record_results::<S>(tx, &records, held.endpoints, now, endpoint, circuit)
            .await?;
    let of_jobs = held.destinations;
    destinations::record_results::<S>(tx, &records, of_jobs, &opened, now, circuit, endpoint)
        .await?;
    Ok(fenced_in_order(&records, applied.into_iter().collect()))
}

/// What [`Apply::WithReads`] read besides the transitions applied (`None`: read it
/// apart).
#[derive(Default)]
struct Held {
    endpoints: Option<Vec<endpoints::EndpointRow>>,
    destinations: Option<Vec<destinations::JobDestinationRow>>,
}

/// `text`, a JSON array that [`Apply::WithReads`] returned as `what`.
fn from_json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text)
        .map_err(|error| StoreError::Internal(format!("the outcome group's {what}: {error}")))
}

/// Holds the subscribers that `records` pause (a `410`), first in the store's lock
/// order (see [`OutcomeStatements::APPLY_TRANSITIONS`]).
async fn lock_subscribers<S: OutcomeStatements>(
    tx: &mut S::Tx,
    records: &[OutcomeRecord],
) -> Result<(), StoreError> {
    let pausing: Vec<String> = records
        .iter()
        .filter(|r| r.pause_subscriber)
        .map(|r| r.lease.job_id.to_string())
        .collect();
    if let (Some(lock), false) = (S::LOCK_SUBSCRIBERS, pausing.is_empty()) {
        let ids = serde_json::Value::from(pausing).to_string();
        let _: Vec<(String,)> = S::fetch_all(tx, Query::new(lock).text(ids)).await?;
    }
    Ok(())
}

/// Starts the group commit of `db`'s outcomes: groups of at most
/// [`MAX_OUTCOME_GROUP`], one written at a time. A group is written at the latest
/// `now` among its records (each record's own `now` is when its attempt asked to be
/// written; the latest is the instant of the write).
pub(crate) fn spawn<S: OutcomeStatements>(
    db: S,
    policy: DestinationPolicy,
) -> GroupCommit<(OutcomeRecord, Timestamp), Fenced> {
    let limits = GroupLimits {
        max_weight: MAX_OUTCOME_GROUP,
        parallel: 1,
    };
    GroupCommit::spawn(
        limits,
        |_| 1,
        move |group: Vec<(OutcomeRecord, Timestamp)>| {
            let db = db.clone();
            async move {
                let now = group.iter().map(|(_, now)| *now).max();
                let records: Vec<OutcomeRecord> =
                    group.into_iter().map(|(record, _)| record).collect();
                let Some(now) = now else {
                    return Vec::new();
                };
                match record(&db, &records, now, &policy).await {
                    Ok(results) => results.into_iter().map(Ok).collect(),
                    Err(error) => records.iter().map(|_| Err(same_kind(&error))).collect(),
                }
            }
        },
    )
}

/// Refuses a batch holding a transition into `in_flight` (only a claim may start one).
pub fn check(records: &[OutcomeRecord]) -> Result<(), StoreError> {
    match records
        .iter()
        .find(|r| r.transition.to == JobState::InFlight)
    {
        Some(bad) => Err(StoreError::Internal(format!(
            "an outcome must move job {} out of in_flight",
            bad.lease.job_id
        ))),
        None => Ok(()),
    }
}

/// The batch as a JSON array of objects with the keys `id`, `token`, `number`,
/// `finished_at` (ms), `outcome`, `status`, `error_class`, `reason`, `body_excerpt`,
/// `state`, `due_at` (ms), `attempts`, `dead_reason`, `deadline` (ms),
/// `possible_duplicate`, `resent` and `now` (ms). Only the first record of a lease is written: a
/// set-based update given two rows for one target applies either, so a repeat (which
/// [`fenced_in_order`] answers `Late`) is left out.
pub fn to_json(records: &[OutcomeRecord], now: Timestamp) -> String {
    let mut seen = HashSet::new();
    let first = records
        .iter()
        .filter(|r| seen.insert((r.lease.job_id, r.lease.token)));
    let rows = first.map(|record| {
        let (result, transition) = (&record.result, &record.transition);
        serde_json::json!({
            "id": record.lease.job_id.to_string(),
            "token": record.lease.token,
            "number": record.attempt,
            "finished_at": record.finished_at.as_millis(),
            "outcome": result.outcome.as_str(),
            "status": result.status,
            "error_class": result.error_class.map(|c| c.as_str()),
            "reason": result.reason,
            "body_excerpt": result.body_excerpt,
            "state": transition.to.as_str(),
            "due_at": transition.due_at.map(Timestamp::as_millis),
            "attempts": transition.attempts,
            "dead_reason": transition.dead_reason.map(DeadReason::as_str),
            "deadline": transition.deadline.as_millis(),
            "possible_duplicate": transition.possible_duplicate,
            "resent": result.resent,
            "now": now.as_millis(),
        })
    });
    serde_json::Value::Array(rows.collect()).to_string()
}

/// Each record's result, given the (job id, token) pairs whose transition applied: as
/// if written one by one, the same lease twice in a batch applies once, first.
pub fn fenced_in_order(
    records: &[OutcomeRecord],
    mut applied: HashSet<(String, i64)>,
) -> Vec<Fenced> {
    records
        .iter()
        .map(|r| {
            if applied.remove(&(r.lease.job_id.to_string(), r.lease.token)) {
                Fenced::Applied
            } else {
                Fenced::Late
            }
        })
        .collect()
}
