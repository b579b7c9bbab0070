//! Events, for both backends (docs/DESIGN.md §5.10): the events with jobs not
//! delivered, newest first, and one event's jobs with what holds its due ones back.
//!
//! Both reads are a few grouped statements in one snapshot, whatever the number of
//! subscribers an event was fanned out to: the affected events in one statement (after
//! reading which destinations hold work back), an event's jobs, its subscribers' loads
//! and their destinations in three.

use std::collections::HashMap;

use crate::domain::Timestamp;
use crate::domain::destination_state::{Admission, DestinationPolicy};
use crate::domain::waiting::SubscriberLoad;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::destinations::{self, CountedRow};
use crate::store::dialect::{Query, Value};
use crate::store::figures::{self, FigureStatements};
use crate::store::jobs::JobRow;
use crate::store::records::{AffectedEvent, EventJob, EventJobs, Job, JobCounts, PageRequest};
use uuid::Uuid;

crate::store::lite_rows::row! {
    /// An affected event with its counts ([`EventStatements::AFFECTED`]).
    pub struct AffectedRow {
        event_id: String,
        affected: i64,
        newest_id: String,
        created_at: i64,
        scheduled: i64,
        in_flight: i64,
        retrying: i64,
        delivered: i64,
        dead: i64,
        cancelled: i64,
    }
}

impl TryFrom<AffectedRow> for AffectedEvent {
    type Error = StoreError;

    fn try_from(row: AffectedRow) -> Result<Self, StoreError> {
        Ok(AffectedEvent {
            event_id: row.event_id,
            jobs: JobCounts {
                scheduled: decode::count(row.scheduled),
                in_flight: decode::count(row.in_flight),
                retrying: decode::count(row.retrying),
                delivered: decode::count(row.delivered),
                dead: decode::count(row.dead),
                cancelled: decode::count(row.cancelled),
            },
            affected: decode::count(row.affected),
            created_at: Timestamp::from_millis(row.created_at),
            newest_job_id: decode::uuid(&row.newest_id)?,
        })
    }
}

crate::store::lite_rows::row! {
    /// A job of an event ([`EventStatements::JOBS`]).
    pub struct EventJobRow {
        #[sqlx(flatten)]
        job: JobRow,
        last_error_at: Option<i64>,
    }
}

crate::store::lite_rows::row! {
    /// A subscriber's limits and their use, with its destination ([`EventStatements::LOADS`]).
    pub struct LoadRow {
        subscriber_id: String,
        destination: Option<String>,
        #[sqlx(flatten)]
        load: figures::LoadRow,
    }
}

/// The statements of the event reads, in the backend's dialect.
pub(crate) trait EventStatements: FigureStatements {
    /// The events with an affected job at `$1` ([`AffectedRow`]), newest job id first,
    /// those whose newest job id is below `$4` (all when NULL), at most `$5`. A job is
    /// affected when it is `retrying` (an `in_flight` one whose lease expired at `$1`
    /// included), `dead` since `$2` (inclusive; not `subscriber_deleted`), or `scheduled`, due at `$1` and held
    /// back: its subscriber paused or at its `max_in_flight`, or its subscriber's
    /// destination among `$3` (a JSON array of the destinations holding work back).
    /// The counts are over all the event's jobs, as read at `$1`; `created_at` is its
    /// first job's.
    const AFFECTED: &'static str;
    /// Every job of event `$1` ([`EventJobRow`]: `last_error_body` NULL, and the
    /// `finished_at` of its latest failed attempt), in subscriber id order.
    const JOBS: &'static str;
    /// The limits and their use at `$2` ([`LoadRow`]) of each enabled subscriber with a
    /// job of event `$1` that is `retrying` (due or not: its advice reads its
    /// destination), or due at `$2` and waiting for a claim (`scheduled`, or
    /// `in_flight` with its lease expired).
    const LOADS: &'static str;
    /// The destinations of the subscribers [`Self::LOADS`] reads, with their requests
    /// open at `$2` ([`CountedRow`]).
    const DESTINATIONS: &'static str;
}

/// See [`crate::store::Store::list_affected_events`].
pub(crate) async fn list_affected<S: EventStatements>(
    db: &S,
    since: Timestamp,
    page: PageRequest<Uuid>,
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<Vec<AffectedEvent>, StoreError> {
    let mut tx = db.snapshot().await?;
    // The destinations that may hold work back: paused, circuit not closed, or with
    // requests open (the only ones that can be at their limit).
    let query = Query::new(S::GAUGED_DESTINATIONS).int(now.as_millis());
    let candidates: Vec<CountedRow> = S::fetch_all(&mut tx, query).await?;
    let mut held = Vec::new();
    for row in &candidates {
        if destinations::hold_until(row, now, policy)?.is_some() {
            held.push(row.key());
        }
    }
    let query = Query::new(S::AFFECTED)
        .int(now.as_millis())
        .int(since.as_millis())
        .text(destinations::json_array(held.into_iter())?)
        .bind(Value::OptText(page.after.map(|id| id.to_string())))
        .int(i64::from(page.limit));
    let rows: Vec<AffectedRow> = S::fetch_all(&mut tx, query).await?;
    S::commit(tx).await?;
    rows.into_iter().map(AffectedEvent::try_from).collect()
}

/// See [`crate::store::Store::event_jobs`].
pub(crate) async fn event_jobs<S: EventStatements>(
    db: &S,
    event_id: &str,
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<Option<EventJobs>, StoreError> {
    let mut tx = db.snapshot().await?;
    let rows: Vec<EventJobRow> = S::fetch_all(&mut tx, Query::new(S::JOBS).text(event_id)).await?;
    if rows.is_empty() {
        S::commit(tx).await?;
        return Ok(None);
    }
    let query = Query::new(S::LOADS).text(event_id).int(now.as_millis());
    let loads: Vec<LoadRow> = S::fetch_all(&mut tx, query).await?;
    let query = Query::new(S::DESTINATIONS)
        .text(event_id)
        .int(now.as_millis());
    let destinations: Vec<CountedRow> = S::fetch_all(&mut tx, query).await?;
    S::commit(tx).await?;
    let jobs = rows
        .into_iter()
        .map(|row| {
            Ok(EventJob {
                job: Job::try_from(row.job)?.as_of(now),
                last_error_at: decode::opt_ts(row.last_error_at),
            })
        })
        .collect::<Result<Vec<EventJob>, StoreError>>()?;
    let mut admissions = HashMap::new();
    for row in &destinations {
        admissions.insert(row.key().to_owned(), row.admission(now, policy)?);
    }
    let holds = loads
        .into_iter()
        .map(|row| {
            let admission = row.destination.as_ref().and_then(|d| admissions.get(d));
            (row.subscriber_id.clone(), hold_of(&row, admission, now))
        })
        .collect();
    Ok(Some(EventJobs { jobs, holds }))
}

/// The load of the subscriber of `row` against its limits at `now`, its destination
/// admitting `admission`.
fn hold_of(row: &LoadRow, admission: Option<&Admission>, now: Timestamp) -> SubscriberLoad {
    let hold = match admission {
        Some(Admission::Held(reason, until)) => Some((*reason, *until)),
        _ => None,
    };
    row.load.load(hold, now)
}
