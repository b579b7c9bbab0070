//! Subscribers' health figures, for both backends (docs/DESIGN.md §5.3): read at one
//! instant from the jobs, the attempts and the destinations, never maintained on the
//! outcome path.
//!
//! Three set-based reads in one snapshot, whatever the number of subscribers, each
//! driven by the subscribers named: their non-terminal jobs (the partial index of
//! waiting work, `jobs_subscriber_due`), their jobs dead in the last hour
//! (`jobs_subscriber_dead`, a range each), and per subscriber its latest success,
//! latest failure and first failure after that success (one seek each in the partial
//! indexes `attempts_subscriber_success` / `_failure`; these two and
//! `jobs_subscriber_dead` come with migration 0008). The
//! destinations that may hold work back (paused, circuit not closed, requests open)
//! come from the gauges' query. A listing by health reads every subscriber's figures,
//! then sorts and pages in memory: 2,000 subscribers with 50,000 jobs read in tens of
//! milliseconds (measured, see DESIGN).

use std::collections::HashMap;

use crate::domain::Timestamp;
use crate::domain::circuit::CircuitState;
use crate::domain::destination_state::DestinationPolicy;
use crate::domain::endpoint::endpoint_hold;
use crate::domain::health::HealthStatus;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::destinations::{self, CountedRow};
use crate::store::dialect::Query;
use crate::store::figures::{FigureStatements, recent_results};
use crate::store::records::{
    AttemptFailure, DEAD_WINDOW_MS, HealthCursor, HealthFigures, PageRequest, SubscriberHealth,
};
use crate::store::subscribers::{self, SubscriberStatements};

crate::store::lite_rows::row! {
    /// A subscriber's waiting jobs.
    pub struct WaitingRow {
        subscriber_id: String,
        scheduled: i64,
        in_flight: i64,
        retrying: i64,
        next_attempt_at: Option<i64>,
    }
}

crate::store::lite_rows::row! {
    /// A subscriber's jobs dead in the window.
    pub struct DeadRow {
        subscriber_id: String,
        n: i64,
    }
}

crate::store::lite_rows::row! {
    /// A subscriber's latest success and failures, and its destination.
    pub struct AttemptsRow {
        id: String,
        destination: Option<String>,
        last_success_at: Option<i64>,
        failure_at: Option<i64>,
        failure_outcome: Option<String>,
        failure_class: Option<String>,
        failure_status: Option<i64>,
        failure_reason: Option<String>,
        first_failure_at: Option<i64>,
        endpoint_circuit: Option<String>,
        endpoint_retry_at: Option<i64>,
        endpoint_hold_until: Option<i64>,
        endpoint_timeouts: Option<i64>,
        own_timeout_ms: Option<i64>,
        endpoint_timeout_ms: Option<i64>,
    }
}

/// The statements of the health figures, in the backend's dialect. The subscribers
/// are given as a JSON array of ids.
pub(crate) trait HealthStatements: FigureStatements + SubscriberStatements {
    /// The waiting jobs at `$1` of the subscribers `$2`, grouped by subscriber
    /// ([`WaitingRow`]): an `in_flight` job whose lease expired at `$1` counts as
    /// `retrying`, due at the expiry.
    const WAITING: &'static str;
    /// The jobs of the subscribers `$3` dead in (`$1`, `$2`] ([`DeadRow`]).
    const DEAD_SINCE: &'static str;
    /// The subscribers `$1` with their destination, latest success, latest failure and
    /// first failure after that success ([`AttemptsRow`]).
    const ATTEMPTS: &'static str;
}

/// The health figures of the subscribers `ids` at `now`, by id; an id that does not
/// exist is absent.
pub(crate) async fn figures<S: HealthStatements>(
    db: &S,
    ids: &[String],
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<HashMap<String, HealthFigures>, StoreError> {
    let ids = serde_json::to_string(ids).map_err(|e| StoreError::Internal(e.to_string()))?;
    let mut tx = db.snapshot().await?;
    let query = Query::new(S::ATTEMPTS).text(ids.clone());
    let rows: Vec<AttemptsRow> = S::fetch_all(&mut tx, query).await?;
    let query = Query::new(S::WAITING)
        .int(now.as_millis())
        .text(ids.clone());
    let waiting: Vec<WaitingRow> = S::fetch_all(&mut tx, query).await?;
    let since = now.as_millis() - i64::try_from(DEAD_WINDOW_MS).unwrap_or(i64::MAX);
    let query = Query::new(S::DEAD_SINCE)
        .int(since)
        .int(now.as_millis())
        .text(ids);
    let dead: Vec<DeadRow> = S::fetch_all(&mut tx, query).await?;
    let query = Query::new(S::GAUGED_DESTINATIONS).int(now.as_millis());
    let held: Vec<CountedRow> = S::fetch_all(&mut tx, query).await?;
    S::commit(tx).await?;

    let mut holds = HashMap::new();
    for row in &held {
        if let Some(hold) = destinations::hold_until(row, now, policy)? {
            holds.insert(row.key().to_owned(), hold);
        }
    }
    let mut figures = HashMap::with_capacity(rows.len());
    let mut endpoints = HashMap::with_capacity(rows.len());
    for row in rows {
        let hold = row.destination.as_deref().and_then(|key| holds.get(key));
        let last_failure = match row.failure_at {
            Some(at) => Some(AttemptFailure {
                at: Timestamp::from_millis(at),
                outcome: decode::named("outcome", row.failure_outcome.as_deref().unwrap_or(""))?,
                class: decode::opt_named("error_class", row.failure_class.as_deref())?,
                status: decode::opt_num("status", row.failure_status)?,
                reason: row.failure_reason,
            }),
            None => None,
        };
        endpoints.insert(
            row.id.clone(),
            (
                row.endpoint_circuit.as_deref() == Some(CircuitState::Open.as_str()),
                decode::opt_ts(row.endpoint_retry_at),
                decode::opt_ts(row.endpoint_hold_until),
            ),
        );
        let recent = recent_results(
            row.endpoint_timeouts,
            row.endpoint_timeout_ms,
            row.own_timeout_ms,
        );
        let entry = HealthFigures {
            recent,
            last_success_at: decode::opt_ts(row.last_success_at),
            last_failure,
            first_failure_after_success: decode::opt_ts(row.first_failure_at),
            destination_hold: hold.map(|(reason, _)| *reason),
            destination_hold_until: hold.and_then(|(_, until)| *until),
            ..HealthFigures::default()
        };
        figures.insert(row.id, entry);
    }
    for row in waiting {
        if let Some(entry) = figures.get_mut(&row.subscriber_id) {
            entry.scheduled = decode::count(row.scheduled);
            entry.in_flight = decode::count(row.in_flight);
            entry.retrying = decode::count(row.retrying);
            entry.next_attempt_at = decode::opt_ts(row.next_attempt_at);
        }
    }
    for row in dead {
        if let Some(entry) = figures.get_mut(&row.subscriber_id) {
            entry.dead_last_hour = decode::count(row.n);
        }
    }
    for (id, (open, retry_at, hold_until)) in endpoints {
        if let Some(entry) = figures.get_mut(&id) {
            let open_attempts = u32::try_from(entry.in_flight).unwrap_or(u32::MAX);
            let hold = endpoint_hold(open, retry_at, hold_until, open_attempts, now);
            entry.endpoint_hold = hold.map(|(reason, _)| reason);
            entry.endpoint_hold_until = hold.and_then(|(_, until)| until);
        }
    }
    Ok(figures)
}

/// The subscribers with health `status` at `now`, most `failing_jobs` first then by
/// id, strictly after `page.after`, at most `page.limit`.
pub(crate) async fn list_by_health<S: HealthStatements>(
    db: &S,
    status: HealthStatus,
    page: PageRequest<HealthCursor>,
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<Vec<SubscriberHealth>, StoreError> {
    let all = subscribers::list::<S>(
        db,
        PageRequest {
            after: None,
            limit: u32::MAX,
        },
    )
    .await?;
    let ids: Vec<String> = all.iter().map(|s| s.id.clone()).collect();
    let mut figures = figures(db, &ids, now, policy).await?;
    let mut listed: Vec<SubscriberHealth> = all
        .into_iter()
        .filter_map(|subscriber| {
            // A subscriber created between the two reads has no figures yet: it has
            // no jobs and no attempts.
            let figures = figures.remove(&subscriber.id).unwrap_or_default();
            let entry = SubscriberHealth {
                subscriber,
                figures,
            };
            (entry.health().status == status).then_some(entry)
        })
        .filter(|entry| {
            page.after.as_ref().is_none_or(|after| {
                after.precedes(entry.figures.failing_jobs(), &entry.subscriber.id)
            })
        })
        .collect();
    listed.sort_by(|a, b| {
        b.figures
            .failing_jobs()
            .cmp(&a.figures.failing_jobs())
            .then_with(|| a.subscriber.id.cmp(&b.subscriber.id))
    });
    listed.truncate(page.limit as usize);
    Ok(listed)
}
