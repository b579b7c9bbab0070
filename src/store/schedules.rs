//! Recurring schedules, for both backends (docs/DESIGN.md §5.14): the row they are
//! kept in, and the writes of the producer (put, delete), of the scheduler (advance
//! the cursor only if the schedule is as it read it) and of a manual run.

use crate::domain::Timestamp;
use crate::domain::recurring::CatchUp;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::{Query, Value};
use crate::store::records::{
    PageRequest, PeriodFence, Schedule, ScheduleAdvance, ScheduleDefinition, SchedulePut,
    ScheduleRun, ScheduleSeen, ScheduleTarget, ScheduleTiming,
};
use crate::store::transactions::Transactions;

/// The statements of schedules, in the backend's dialect. Every one that returns
/// schedules returns [`ScheduleRow`]s.
pub(crate) trait ScheduleStatements: Transactions {
    /// Inserts schedule `$1`, or replaces its definition keeping `created_at` and the
    /// last run: subscriber `$2`, event type `$3`, cron `$4`, time zone `$5`, every
    /// `$6`, anchor `$7`, event id `$8`, payload `$9`, ttl `$10`, max attempts `$11`,
    /// catch-up `$12`, enabled `$13` (kept unless `$16`), at `$14`; clears the last
    /// error. The cursor is `$15` on insert, and on a restart (a new cron, zone,
    /// interval or anchor, or `$16` enabling a paused one), which also counts in
    /// `cursor_version` and ends a scheduler's lease; otherwise it stays as stored.
    const PUT: &'static str;
    /// Taken first in a put's transaction so that puts count the schedules one at a
    /// time (PostgreSQL: a transaction-scoped advisory lock); `None` where
    /// transactions write one at a time already (SQLite's one writer).
    const SERIALIZE_PUTS: Option<&'static str>;
    /// One row, true when schedule `$1` does not exist and `$2` or more schedules do
    /// (a put of `$1` would create one over the limit).
    const FULL: &'static str;
    /// Schedule `$1`.
    const GET: &'static str;
    /// Schedules after id `$1` (all when NULL) in id order, at most `$2`.
    const LIST: &'static str;
    /// Deletes schedule `$1`.
    const DELETE: &'static str;
    /// The enabled schedules whose cursor is at or before `$1` and that no scheduler
    /// holds at `$3`, earliest first, at most `$2` (`schedules_due`).
    const DUE: &'static str;
    /// Holds schedule `$1` until `$4` if its cursor is `$2` (NULL included) at version
    /// `$3` and no scheduler holds it at `$5`.
    const LEASE: &'static str;
    /// Moves schedule `$1`'s cursor to `$4` and ends its lease if its cursor version is
    /// `$2` and its cursor `$3` (NULL included); with `$5`, records the run of period
    /// `$6` (event id `$7`, job `$8`, `$9` jobs); sets the last error to `$10` when not
    /// NULL, else clears it with `$5`.
    const ADVANCE: &'static str;
    /// Moves schedule `$1`'s cursor to `$5`, keeping its hold, if its cursor version is
    /// `$2`, its cursor `$3` (NULL included) and its hold ends at `$4` (the fence of a
    /// period's write, [`crate::store::PeriodFence`]); on PostgreSQL the row stays
    /// locked until the transaction ends.
    const FENCE: &'static str;
    /// Another schedule than `$2` (in id order, one) whose event id template is `$1`
    /// and whose jobs could take the same keys: one of subscriber `$3`, or any when
    /// `$3` is NULL (a schedule of an event type), or one of an event type.
    const SHARING_TEMPLATE: &'static str;
    /// Records on schedule `$1` the run of period `$2` (event id `$3`, job `$4`, `$5`
    /// jobs) unless a later period's is recorded; clears the last error.
    const RECORD_RUN: &'static str;
}

crate::store::lite_rows::row! {
    /// A row of `schedules`.
    pub struct ScheduleRow {
        id: String,
        subscriber_id: Option<String>,
        event_type: Option<String>,
        cron: Option<String>,
        time_zone: String,
        every_ms: Option<i64>,
        anchor: Option<i64>,
        event_id: String,
        payload: String,
        ttl_ms: Option<i64>,
        max_attempts: Option<i64>,
        catch_up: String,
        enabled: bool,
        created_at: i64,
        updated_at: i64,
        next_period: Option<i64>,
        cursor_version: i64,
        last_period: Option<i64>,
        last_event_id: Option<String>,
        last_job_id: Option<String>,
        last_jobs: Option<i64>,
        last_error: Option<String>,
    }
}

impl TryFrom<ScheduleRow> for Schedule {
    type Error = StoreError;

    fn try_from(row: ScheduleRow) -> Result<Self, StoreError> {
        let target = match (row.subscriber_id, row.event_type) {
            (Some(id), None) => ScheduleTarget::Subscriber(id),
            (None, Some(name)) => ScheduleTarget::EventType(name),
            _ => {
                return Err(StoreError::Internal(format!(
                    "schedule {}: no one target",
                    row.id
                )));
            }
        };
        let timing = match (row.cron, row.every_ms, row.anchor) {
            (Some(cron), None, _) => ScheduleTiming::Cron {
                cron,
                time_zone: row.time_zone,
            },
            (None, Some(every_ms), Some(anchor)) => ScheduleTiming::Every {
                every_ms: decode::num("every_ms", every_ms)?,
                anchor: Timestamp::from_millis(anchor),
            },
            _ => {
                return Err(StoreError::Internal(format!(
                    "schedule {}: no one timing",
                    row.id
                )));
            }
        };
        let last_run = match (row.last_period, row.last_event_id) {
            (Some(period), Some(event_id)) => Some(ScheduleRun {
                period: Timestamp::from_millis(period),
                event_id,
                job_id: row.last_job_id.as_deref().map(decode::uuid).transpose()?,
                jobs: decode::num("last_jobs", row.last_jobs.unwrap_or(0))?,
            }),
            _ => None,
        };
        Ok(Schedule {
            definition: ScheduleDefinition {
                id: row.id,
                target,
                timing,
                event_id: row.event_id,
                payload: row.payload,
                ttl_ms: decode::opt_num("ttl_ms", row.ttl_ms)?,
                max_attempts: decode::opt_num("max_attempts", row.max_attempts)?,
                catch_up: decode::named::<CatchUp>("catch_up", &row.catch_up)?,
                enabled: row.enabled,
            },
            created_at: Timestamp::from_millis(row.created_at),
            updated_at: Timestamp::from_millis(row.updated_at),
            next_period: decode::opt_ts(row.next_period),
            cursor_version: decode::num("cursor_version", row.cursor_version)?,
            last_run,
            last_error: row.last_error,
        })
    }
}

fn opt_int(value: Option<u64>) -> Value {
    Value::OptInt(value.map(|n| i64::try_from(n).unwrap_or(i64::MAX)))
}

/// Writes `definition` at `now`, with cursor `next_period` if it is created or
/// restarted (see [`crate::store::Store::put_schedule`]); refuses to create one over
/// `max_schedules`, counted in the same transaction.
pub(crate) async fn put<S: ScheduleStatements>(
    db: &S,
    put: SchedulePut,
    now: Timestamp,
) -> Result<Schedule, StoreError> {
    let SchedulePut {
        definition,
        next_period,
        enabled_given,
        max_schedules,
    } = put;
    let full = Query::new(S::FULL)
        .text(definition.id.clone())
        .int(i64::try_from(max_schedules).unwrap_or(i64::MAX));
    let (subscriber, event_type) = match definition.target {
        ScheduleTarget::Subscriber(id) => (Some(id), None),
        ScheduleTarget::EventType(name) => (None, Some(name)),
    };
    let (cron, time_zone, every_ms, anchor) = match definition.timing {
        ScheduleTiming::Cron { cron, time_zone } => (Some(cron), time_zone, None, None),
        ScheduleTiming::Every { every_ms, anchor } => (
            None,
            "UTC".to_owned(),
            Some(every_ms),
            Some(anchor.as_millis()),
        ),
    };
    let query = Query::new(S::PUT)
        .text(definition.id)
        .bind(Value::OptText(subscriber))
        .bind(Value::OptText(event_type))
        .bind(Value::OptText(cron))
        .text(time_zone)
        .bind(opt_int(every_ms))
        .bind(Value::OptInt(anchor))
        .text(definition.event_id)
        .text(definition.payload)
        .bind(opt_int(definition.ttl_ms))
        .bind(Value::OptInt(definition.max_attempts.map(i64::from)))
        .text(definition.catch_up.as_str())
        .bind(Value::Bool(definition.enabled))
        .int(now.as_millis())
        .bind(Value::OptInt(next_period.map(Timestamp::as_millis)))
        .bind(Value::Bool(enabled_given));
    let row: ScheduleRow = db
        .transaction(move |tx| {
            Box::pin(async move {
                if let Some(serialize) = S::SERIALIZE_PUTS {
                    S::execute(tx, Query::new(serialize)).await?;
                }
                let (full,): (bool,) = S::fetch_one(tx, full).await?;
                if full {
                    return Err(StoreError::TooManySchedules { max: max_schedules });
                }
                S::fetch_one(tx, query).await
            })
        })
        .await?;
    row.try_into()
}

/// Schedule `id`, or `None`.
pub(crate) async fn get<S: ScheduleStatements>(
    db: &S,
    id: &str,
) -> Result<Option<Schedule>, StoreError> {
    let row: Option<ScheduleRow> = db.read_optional(Query::new(S::GET).text(id)).await?;
    row.map(Schedule::try_from).transpose()
}

/// Schedules in id order, strictly after `page.after`.
pub(crate) async fn list<S: ScheduleStatements>(
    db: &S,
    page: PageRequest<String>,
) -> Result<Vec<Schedule>, StoreError> {
    let query = Query::new(S::LIST)
        .bind(Value::OptText(page.after))
        .int(i64::from(page.limit));
    let rows: Vec<ScheduleRow> = db.read_all(query).await?;
    rows.into_iter().map(Schedule::try_from).collect()
}

/// Deletes schedule `id`; whether it existed.
pub(crate) async fn delete<S: ScheduleStatements>(db: &S, id: &str) -> Result<bool, StoreError> {
    Ok(db.write_alone(Query::new(S::DELETE).text(id)).await? > 0)
}

/// The enabled schedules whose cursor is at or before `until` and that no scheduler
/// holds at `now`, earliest first.
pub(crate) async fn due<S: ScheduleStatements>(
    db: &S,
    until: Timestamp,
    limit: u32,
    now: Timestamp,
) -> Result<Vec<Schedule>, StoreError> {
    let query = Query::new(S::DUE)
        .int(until.as_millis())
        .int(i64::from(limit))
        .int(now.as_millis());
    let rows: Vec<ScheduleRow> = db.read_all(query).await?;
    rows.into_iter().map(Schedule::try_from).collect()
}

/// The run's columns: period, event id, job id, jobs.
fn run_values(query: Query, run: Option<&ScheduleRun>) -> Query {
    query
        .bind(Value::OptInt(run.map(|r| r.period.as_millis())))
        .bind(Value::OptText(run.map(|r| r.event_id.clone())))
        .bind(Value::OptText(
            run.and_then(|r| r.job_id).map(|id| id.to_string()),
        ))
        .bind(Value::OptInt(run.map(|r| i64::from(r.jobs))))
}

/// The fence statement of `fence` ([`ScheduleStatements::FENCE`]).
pub(crate) fn fence_query<S: ScheduleStatements>(fence: &PeriodFence) -> Query {
    Query::new(S::FENCE)
        .text(fence.schedule_id.as_str())
        .int(version(fence.seen))
        .bind(Value::OptInt(
            fence.seen.next_period.map(Timestamp::as_millis),
        ))
        .int(fence.held_until.as_millis())
        .bind(Value::OptInt(fence.next_period.map(Timestamp::as_millis)))
}

fn version(seen: ScheduleSeen) -> i64 {
    i64::try_from(seen.cursor_version).unwrap_or(i64::MAX)
}

/// Holds schedule `id` until `until` if its cursor is still as `seen` and no scheduler
/// holds it at `now`; whether it is now held.
pub(crate) async fn lease<S: ScheduleStatements>(
    db: &S,
    id: &str,
    seen: ScheduleSeen,
    until: Timestamp,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let query = Query::new(S::LEASE)
        .text(id)
        .bind(Value::OptInt(seen.next_period.map(Timestamp::as_millis)))
        .int(version(seen))
        .int(until.as_millis())
        .int(now.as_millis());
    Ok(db.write_alone(query).await? > 0)
}

/// Applies `advance` to schedule `id` if its cursor is still as `seen`; whether it
/// applied.
pub(crate) async fn advance<S: ScheduleStatements>(
    db: &S,
    id: &str,
    seen: ScheduleSeen,
    advance: ScheduleAdvance,
) -> Result<bool, StoreError> {
    let query = Query::new(S::ADVANCE)
        .text(id)
        .int(version(seen))
        .bind(Value::OptInt(seen.next_period.map(Timestamp::as_millis)))
        .bind(Value::OptInt(advance.next_period.map(Timestamp::as_millis)))
        .bind(Value::Bool(advance.run.is_some()));
    let query = run_values(query, advance.run.as_ref()).bind(Value::OptText(advance.error));
    Ok(db.write_alone(query).await? > 0)
}

/// Another schedule than `definition`'s whose periods could take its jobs' keys: the
/// same event id template, and the same subscriber or an event type on either side.
pub(crate) async fn sharing_template<S: ScheduleStatements>(
    db: &S,
    definition: &ScheduleDefinition,
) -> Result<Option<String>, StoreError> {
    let subscriber = match &definition.target {
        ScheduleTarget::Subscriber(id) => Some(id.clone()),
        ScheduleTarget::EventType(_) => None,
    };
    let query = Query::new(S::SHARING_TEMPLATE)
        .text(definition.event_id.as_str())
        .text(definition.id.as_str())
        .bind(Value::OptText(subscriber));
    let row: Option<(String,)> = db.read_optional(query).await?;
    Ok(row.map(|(id,)| id))
}

/// Records a manual run of schedule `id`; whether it was recorded.
pub(crate) async fn record_run<S: ScheduleStatements>(
    db: &S,
    id: &str,
    run: ScheduleRun,
) -> Result<bool, StoreError> {
    let query = run_values(Query::new(S::RECORD_RUN).text(id), Some(&run));
    Ok(db.write_alone(query).await? > 0)
}
