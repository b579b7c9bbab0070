//! Reading database rows into records, shared by both stores: each backend only says
//! how to read one column as an integer, a text or a flag ([`Columns`]). Every instant
//! is a 64-bit integer of epoch milliseconds in both schemas.

use uuid::Uuid;

use crate::domain::waiting::SubscriberLoad;
use crate::domain::{JobState, Timestamp};
use crate::store::StoreError;
use crate::store::records::{
    Attempt, AttemptFailure, Job, JobCounts, JobFilter, LastError, LeaseInfo, NewJob, PageRequest,
    PurgedJobs, Subscriber, uuid_v7_floor,
};

/// The columns [`job`] reads, from `jobs j JOIN subscribers s`.
pub const JOB_COLUMNS: &str = "j.id, j.subscriber_id, j.event_id, j.state, j.attempts, \
    j.max_attempts, j.deliver_at, j.deadline, j.due_at, j.created_at, j.updated_at, \
    j.delivered_at, j.dead_at, j.dead_reason, j.last_error_class, j.last_error_status, \
    j.last_error_reason, j.last_error_body, j.lease_owner, j.lease_token, \
    j.lease_expires_at, s.enabled AS subscriber_enabled";

/// The columns [`subscriber`] reads.
pub const SUBSCRIBER_COLUMNS: &str =
    "id, url, max_in_flight, rate_limit_per_second, enabled, created_at, updated_at";

/// The columns [`attempt`] reads.
pub const ATTEMPT_COLUMNS: &str = "number, started_at, finished_at, outcome, status, \
    error_class, reason, body_excerpt, lease_owner, lease_token, possible_duplicate";

/// One row, read column by column.
pub trait Columns {
    /// A nullable integer column.
    fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError>;
    /// A nullable text column.
    fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError>;
    /// A boolean column (INTEGER 0/1 in SQLite, BOOLEAN in PostgreSQL).
    fn flag(&self, column: &str) -> Result<bool, StoreError>;

    /// A NOT NULL integer column.
    fn int(&self, column: &str) -> Result<i64, StoreError> {
        self.opt_int(column)?
            .ok_or_else(|| StoreError::Internal(format!("column {column} is NULL")))
    }

    /// A NOT NULL text column.
    fn text(&self, column: &str) -> Result<String, StoreError> {
        self.opt_text(column)?
            .ok_or_else(|| StoreError::Internal(format!("column {column} is NULL")))
    }
}

/// A job id stored as text.
pub fn uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|e| StoreError::Internal(format!("bad id `{text}`: {e}")))
}

fn opt_ts(row: &impl Columns, column: &str) -> Result<Option<Timestamp>, StoreError> {
    Ok(row.opt_int(column)?.map(Timestamp::from_millis))
}

fn ts(row: &impl Columns, column: &str) -> Result<Timestamp, StoreError> {
    Ok(Timestamp::from_millis(row.int(column)?))
}

/// A nullable integer column as a narrower type (a count, a status).
fn opt_num<T: TryFrom<i64>>(row: &impl Columns, column: &str) -> Result<Option<T>, StoreError> {
    row.opt_int(column)?
        .map(|n| T::try_from(n).map_err(|_| StoreError::Internal(format!("column {column}: {n}"))))
        .transpose()
}

fn num<T: TryFrom<i64>>(row: &impl Columns, column: &str) -> Result<T, StoreError> {
    opt_num(row, column)?.ok_or_else(|| StoreError::Internal(format!("column {column} is NULL")))
}

/// A nullable text column holding a name (`in_flight`, `http_5xx`).
fn opt_named<T: std::str::FromStr>(
    row: &impl Columns,
    column: &str,
) -> Result<Option<T>, StoreError>
where
    T::Err: std::fmt::Display,
{
    row.opt_text(column)?
        .map(|text| {
            text.parse()
                .map_err(|e| StoreError::Internal(format!("column {column}: {e}")))
        })
        .transpose()
}

fn named<T: std::str::FromStr>(row: &impl Columns, column: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    opt_named(row, column)?.ok_or_else(|| StoreError::Internal(format!("column {column} is NULL")))
}

/// A job from a row of [`JOB_COLUMNS`].
pub fn job(row: &impl Columns) -> Result<Job, StoreError> {
    let last_error = match opt_named(row, "last_error_class")? {
        Some(class) => Some(LastError {
            class,
            status: opt_num(row, "last_error_status")?,
            reason: row.opt_text("last_error_reason")?,
            body_excerpt: row.opt_text("last_error_body")?,
        }),
        None => None,
    };
    let lease = match (
        row.opt_text("lease_owner")?,
        opt_ts(row, "lease_expires_at")?,
    ) {
        (Some(owner), Some(expires_at)) => Some(LeaseInfo {
            owner,
            token: row.int("lease_token")?,
            expires_at,
        }),
        _ => None,
    };
    Ok(Job {
        id: uuid(&row.text("id")?)?,
        subscriber_id: row.text("subscriber_id")?,
        event_id: row.text("event_id")?,
        state: named(row, "state")?,
        attempts: num(row, "attempts")?,
        max_attempts: opt_num(row, "max_attempts")?,
        deliver_at: ts(row, "deliver_at")?,
        deadline: ts(row, "deadline")?,
        due_at: opt_ts(row, "due_at")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        delivered_at: opt_ts(row, "delivered_at")?,
        dead_at: opt_ts(row, "dead_at")?,
        dead_reason: opt_named(row, "dead_reason")?,
        last_error,
        lease,
        subscriber_enabled: row.flag("subscriber_enabled")?,
    })
}

/// A subscriber from a row of [`SUBSCRIBER_COLUMNS`].
pub fn subscriber(row: &impl Columns) -> Result<Subscriber, StoreError> {
    Ok(Subscriber {
        id: row.text("id")?,
        url: row.text("url")?,
        max_in_flight: num(row, "max_in_flight")?,
        rate_limit_per_second: opt_num(row, "rate_limit_per_second")?,
        enabled: row.flag("enabled")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
    })
}

/// An attempt from a row of [`ATTEMPT_COLUMNS`].
pub fn attempt(row: &impl Columns) -> Result<Attempt, StoreError> {
    Ok(Attempt {
        number: num(row, "number")?,
        started_at: ts(row, "started_at")?,
        finished_at: opt_ts(row, "finished_at")?,
        outcome: named(row, "outcome")?,
        status: opt_num(row, "status")?,
        error_class: opt_named(row, "error_class")?,
        reason: row.opt_text("reason")?,
        body_excerpt: row.opt_text("body_excerpt")?,
        lease_owner: row.text("lease_owner")?,
        lease_token: row.int("lease_token")?,
        possible_duplicate: row.flag("possible_duplicate")?,
    })
}

/// A subscriber's load from a row with `max_in_flight`, `rate_limit_per_second`,
/// `open_attempts`, `started_last_second` and `last_started_at`.
pub fn subscriber_load(row: &impl Columns) -> Result<SubscriberLoad, StoreError> {
    let count = |column: &str| -> Result<u32, StoreError> {
        Ok(u32::try_from(row.int(column)?.max(0)).unwrap_or(u32::MAX))
    };
    Ok(SubscriberLoad {
        open_attempts: count("open_attempts")?,
        max_in_flight: count("max_in_flight")?,
        started_last_second: count("started_last_second")?,
        rate_limit_per_second: row
            .opt_int("rate_limit_per_second")?
            .map(|n| u32::try_from(n.max(0)).unwrap_or(u32::MAX)),
        last_started_at: opt_ts(row, "last_started_at")?,
    })
}

/// Adds a row of `state` and `n` (a `GROUP BY state` count) to `counts`.
pub fn add_state_count(counts: &mut JobCounts, row: &impl Columns) -> Result<(), StoreError> {
    let state: JobState = named(row, "state")?;
    counts.add(state, u64::try_from(row.int("n")?.max(0)).unwrap_or(0));
    Ok(())
}

/// A failed attempt from a row with `finished_at`, `outcome`, `error_class`, `status`
/// and `reason`.
pub fn attempt_failure(row: &impl Columns) -> Result<AttemptFailure, StoreError> {
    Ok(AttemptFailure {
        at: ts(row, "finished_at")?,
        outcome: named(row, "outcome")?,
        class: opt_named(row, "error_class")?,
        status: opt_num(row, "status")?,
        reason: row.opt_text("reason")?,
    })
}

/// Counts a row of a purge's `RETURNING state`; a state that is not terminal is a
/// fault (the caller rolls back).
pub fn count_purged(purged: &mut PurgedJobs, row: &impl Columns) -> Result<(), StoreError> {
    let state: JobState = named(row, "state")?;
    if !state.is_terminal() {
        return Err(StoreError::Internal(format!(
            "a purge matched a job in state {state}; nothing was deleted"
        )));
    }
    purged.add(state);
    Ok(())
}

/// The job listing query for any backend: [`JOB_COLUMNS`] matching `filter`, newest
/// first (descending id), strictly older than `page.after`. `QueryBuilder` writes each
/// backend's placeholders.
pub fn job_listing<DB>(filter: &JobFilter, page: &PageRequest<Uuid>) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'static str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut query = sqlx::QueryBuilder::<DB>::new("");
    push_job_listing(&mut query, filter, page);
    query
}

/// Most rows one multi-row job insert writes (10 parameters each, under SQLite's
/// 32,766 and PostgreSQL's 65,535).
pub const INSERT_CHUNK: usize = 500;

/// `INSERT` of `jobs` (at most [`INSERT_CHUNK`]) as new `scheduled` rows in one
/// statement; a job whose (subscriber_id, event_id) exists (or repeats an earlier row)
/// is skipped. Returns the ids it inserted. `QueryBuilder` writes each backend's
/// placeholders.
pub fn insert_new_jobs<DB>(jobs: &[&NewJob]) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> Option<i64>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut query = sqlx::QueryBuilder::<DB>::new(
        "INSERT INTO jobs (id, subscriber_id, event_id, payload, state, max_attempts, \
         deliver_at, deadline, due_at, created_at, updated_at) ",
    );
    query.push_values(jobs, |mut row, job| {
        row.push_bind(job.id.to_string())
            .push_bind(job.subscriber_id.clone())
            .push_bind(job.event_id.clone())
            .push_bind(job.payload.clone())
            .push("'scheduled'")
            .push_bind(job.max_attempts.map(i64::from))
            .push_bind(job.deliver_at.as_millis())
            .push_bind(job.deadline.as_millis())
            .push_bind(job.deliver_at.as_millis())
            .push_bind(job.created_at.as_millis())
            .push_bind(job.created_at.as_millis());
    });
    query.push(" ON CONFLICT (subscriber_id, event_id) DO NOTHING RETURNING id");
    query
}

/// The states retention purges, each with its cutoff: delivered and cancelled jobs
/// before `finished_before`, dead ones before `dead_before` (`None`: kept).
pub fn purge_order(
    finished_before: Option<Timestamp>,
    dead_before: Option<Timestamp>,
) -> [(JobState, Option<Timestamp>); 3] {
    [
        (JobState::Delivered, finished_before),
        (JobState::Cancelled, finished_before),
        (JobState::Dead, dead_before),
    ]
}

/// The index SQLite must use for `filter`: its planner has no statistics and, given a
/// state, prefers `jobs_state` — walking every dead job even when the listing names
/// one subscriber or event. The most selective condition's index is named instead
/// (each keeps the listing's id order, except a `dead_at` range). PostgreSQL plans from
/// statistics.
fn sqlite_index_hint(filter: &JobFilter) -> Option<&'static str> {
    if filter.event_id.is_some() {
        Some("jobs_event_id")
    } else if filter.subscriber_id.is_some() {
        Some("jobs_subscriber_id")
    } else if filter.dead_reason.is_some() {
        Some("jobs_dead_reason")
    } else if filter.dead_after.is_some() || filter.dead_before.is_some() {
        Some("jobs_dead_at")
    } else {
        None
    }
}

/// Appends the [`job_listing`] query to `query` (e.g. after `EXPLAIN QUERY PLAN`).
///
/// Each filter is written so an index serves it: a state as a literal (SQLite uses a
/// partial index only when the query's text implies its predicate), `dead_reason`
/// through `jobs_dead_reason (dead_reason, id)`, `dead_at` bounds through
/// `jobs_dead_at`, and creation bounds as bounds on the UUIDv7 id (the primary key and
/// the `(…, id)` indexes).
pub fn push_job_listing<DB>(
    query: &mut sqlx::QueryBuilder<DB>,
    filter: &JobFilter,
    page: &PageRequest<Uuid>,
) where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'static str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let hint = match sqlite_index_hint(filter) {
        Some(index) if DB::NAME == "SQLite" => format!(" INDEXED BY {index}"),
        _ => String::new(),
    };
    query.push(format!(
        "SELECT {JOB_COLUMNS} FROM jobs j{hint} JOIN subscribers s ON s.id = j.subscriber_id \
         WHERE 1 = 1"
    ));
    push_job_conditions(query, filter);
    if let Some(after) = page.after {
        query.push(" AND j.id < ").push_bind(after.to_string());
    }
    query
        .push(" ORDER BY j.id DESC LIMIT ")
        .push_bind(i64::from(page.limit));
}

/// Appends ` AND …` for each condition of `filter` on `jobs j` (after a `WHERE`), each
/// written so an index serves it (see [`push_job_listing`]).
pub fn push_job_conditions<DB>(query: &mut sqlx::QueryBuilder<DB>, filter: &JobFilter)
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'static str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    if let Some(event_id) = &filter.event_id {
        query.push(" AND j.event_id = ").push_bind(event_id.clone());
    }
    if let Some(subscriber_id) = &filter.subscriber_id {
        query
            .push(" AND j.subscriber_id = ")
            .push_bind(subscriber_id.clone());
    }
    // A fixed name, never input: safe to write as a literal.
    let mut states: Vec<&'static str> = filter.state.iter().map(|s| s.as_str()).collect();
    if filter.implies_dead() && filter.state != Some(JobState::Dead) {
        states.push(JobState::Dead.as_str());
    }
    for state in states {
        query.push(format!(" AND j.state = '{state}'"));
    }
    if let Some(reason) = filter.dead_reason {
        query
            .push(" AND j.dead_reason = ")
            .push_bind(reason.as_str());
    }
    if let Some(after) = filter.dead_after {
        query
            .push(" AND j.dead_at >= ")
            .push_bind(after.as_millis());
    }
    if let Some(before) = filter.dead_before {
        query
            .push(" AND j.dead_at < ")
            .push_bind(before.as_millis());
    }
    if let Some(after) = filter.created_after {
        query
            .push(" AND j.id >= ")
            .push_bind(uuid_v7_floor(after).to_string());
    }
    if let Some(before) = filter.created_before {
        query
            .push(" AND j.id < ")
            .push_bind(uuid_v7_floor(before).to_string());
    }
}
