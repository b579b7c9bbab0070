//! Jobs, for both backends: the row a read of a job decodes; reading one, listing
//! them, and an operator's transition of a waiting one. Every read is as of a `now`:
//! an `in_flight` job whose lease has expired is `retrying` (see [`Job::as_of`]).

use uuid::Uuid;

use crate::domain::{JobState, Timestamp, Transition, tombstone};
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::listing::job_listings;
use crate::store::dialect::{Query, Value};
use crate::store::records::{Job, JobFilter, JobVersion, LastError, LeaseInfo, PageRequest};
use crate::store::sweep::{self, SweepStatements};
use crate::store::transactions::Transactions;

/// The statements of reading and changing one job, in the backend's dialect.
pub(crate) trait JobStatements: Transactions + SweepStatements {
    /// Job `$1` ([`JobRow`]).
    const GET: &'static str;
    /// An operator's transition of waiting job `$1` to state `$3`, due at `$4`, with
    /// deadline `$5`, at `$6`; only if it is still as it was read (`updated_at` `$7`,
    /// and state `$2`, `scheduled` or `retrying` — or, read as `retrying`, still
    /// `in_flight` with its lease expired at `$6`). Ends the lease, if any.
    const TRANSITION_WAITING: &'static str;
}

/// Job `id` as read at `now`, or `None`.
pub(crate) async fn get<S: JobStatements>(
    db: &S,
    id: Uuid,
    now: Timestamp,
) -> Result<Option<Job>, StoreError> {
    let query = Query::new(S::GET).text(id.to_string());
    let row: Option<JobRow> = db.read_optional(query).await?;
    Ok(row
        .map(Job::try_from)
        .transpose()?
        .map(|job| job.as_of(now)))
}

/// The jobs `filter` matches as read at `now`, newest first, strictly older than
/// `page.after`, at most `page.limit` (see [`job_listings`]; its listings are read
/// in one snapshot and merged).
pub(crate) async fn list<S: Transactions>(
    db: &S,
    filter: &JobFilter,
    page: PageRequest<Uuid>,
    now: Timestamp,
) -> Result<Vec<Job>, StoreError> {
    let mut listings = job_listings(S::DIALECT, filter, &page, now);
    let rows: Vec<JobRow> = if listings.is_empty() {
        Vec::new()
    } else if listings.len() == 1 {
        db.read_all(Query::from(listings.remove(0))).await?
    } else {
        let mut tx = db.snapshot().await?;
        let mut rows = Vec::new();
        for listing in listings {
            rows.extend(S::fetch_all::<JobRow>(&mut tx, Query::from(listing)).await?);
        }
        S::commit(tx).await?;
        rows
    };
    let mut jobs = rows
        .into_iter()
        .map(|row| Ok(Job::try_from(row)?.as_of(now)))
        .collect::<Result<Vec<Job>, StoreError>>()?;
    jobs.sort_by_key(|job| std::cmp::Reverse(job.id));
    jobs.truncate(usize::try_from(page.limit).unwrap_or(usize::MAX));
    Ok(jobs)
}

/// Applies `transition` to waiting job `id` at `now` if it is still as `seen`; whether
/// it did. A job read as `retrying` because its lease had expired is still `in_flight`
/// in the store: the write also ends that lease (so its worker's late result is
/// fenced out, docs/DESIGN.md §2.2) and records its attempt as `unknown`, in the same
/// transaction. A job left waiting (due at a new time) is announced to the workers of
/// every instance ([`Transactions::announce`]).
pub(crate) async fn transition_waiting<S: JobStatements>(
    db: &S,
    id: Uuid,
    seen: JobVersion,
    transition: Transition,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let lease_may_end = seen.state == JobState::Retrying;
    let due = transition.due_at.is_some();
    if !lease_may_end && !due {
        let query = waiting_query::<S>(id, seen, transition, now);
        return Ok(db.write_alone(query).await? == 1);
    }
    db.transaction(move |tx| {
        Box::pin(async move {
            let applied = apply_waiting::<S>(tx, id, seen, transition, now).await?;
            if applied && due {
                // Its due time may now be sooner than other instances' workers plan to wake.
                S::announce(tx).await?;
            }
            Ok(applied)
        })
    })
    .await
}

/// [`transition_waiting`]'s write in `tx`, without the announcement: also how a replay
/// step brings a retrying job forward ([`crate::store::replays`]), so both apply
/// [`crate::domain::JobEvent::RetryNow`] the same way.
pub(crate) async fn apply_waiting<S: JobStatements>(
    tx: &mut S::Tx,
    id: Uuid,
    seen: JobVersion,
    transition: Transition,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let query = waiting_query::<S>(id, seen, transition, now);
    let applied = S::execute(tx, query).await? == 1;
    if applied && seen.state == JobState::Retrying {
        // An attempt is in progress only if the job's expired lease was just ended.
        sweep::mark_attempt_unknown::<S>(tx, &id.to_string(), now).await?;
    }
    Ok(applied)
}

/// The conditional write of [`JobStatements::TRANSITION_WAITING`].
fn waiting_query<S: JobStatements>(
    id: Uuid,
    seen: JobVersion,
    transition: Transition,
    now: Timestamp,
) -> Query {
    Query::new(S::TRANSITION_WAITING)
        .text(id.to_string())
        .text(seen.state.as_str())
        .text(transition.to.as_str())
        .bind(Value::OptInt(transition.due_at.map(Timestamp::as_millis)))
        .int(transition.deadline.as_millis())
        .int(now.as_millis())
        .int(seen.updated_at.as_millis())
}

/// The columns [`JobRow`] reads, from `jobs j JOIN subscribers s`.
pub const JOB_COLUMNS: &str = "j.id, j.subscriber_id, j.event_id, j.state, j.attempts, \
    j.max_attempts, j.deliver_at, j.deadline, j.due_at, j.created_at, j.updated_at, \
    j.delivered_at, j.dead_at, j.dead_reason, j.dead_detail, j.last_error_class, j.last_error_status, \
    j.last_error_reason, j.last_error_body, j.lease_owner, j.lease_token, \
    j.lease_expires_at, s.enabled AS subscriber_enabled, j.event_type, j.schedule_id";

crate::store::lite_rows::row! {
    /// A row of [`JOB_COLUMNS`].
    pub struct JobRow {
        id: String,
        subscriber_id: String,
        event_id: String,
        state: String,
        attempts: i64,
        max_attempts: Option<i64>,
        deliver_at: i64,
        deadline: i64,
        due_at: Option<i64>,
        created_at: i64,
        updated_at: i64,
        delivered_at: Option<i64>,
        dead_at: Option<i64>,
        dead_reason: Option<String>,
        dead_detail: Option<String>,
        last_error_class: Option<String>,
        last_error_status: Option<i64>,
        last_error_reason: Option<String>,
        last_error_body: Option<String>,
        lease_owner: Option<String>,
        lease_token: i64,
        lease_expires_at: Option<i64>,
        subscriber_enabled: bool,
        event_type: Option<String>,
        schedule_id: Option<String>,
    }
}

crate::store::lite_rows::row! {
    /// A row of [`JOB_COLUMNS`], `j.payload` and `j.payload_id`.
    pub struct StoredJobRow {
        /// The job.
        #[sqlx(flatten)]
        pub job: JobRow,
        /// Its own payload text; empty when its payload is shared.
        pub payload: String,
        /// The `payloads` row of its shared payload, if it has one.
        pub payload_id: Option<String>,
    }
}

impl TryFrom<JobRow> for Job {
    type Error = StoreError;

    fn try_from(row: JobRow) -> Result<Self, StoreError> {
        let last_error =
            match decode::opt_named("last_error_class", row.last_error_class.as_deref())? {
                Some(class) => Some(LastError {
                    class,
                    status: decode::opt_num("last_error_status", row.last_error_status)?,
                    reason: row.last_error_reason,
                    body_excerpt: row.last_error_body,
                }),
                None => None,
            };
        let lease = match (row.lease_owner, row.lease_expires_at) {
            (Some(owner), Some(expires_at)) => Some(LeaseInfo {
                owner,
                token: row.lease_token,
                expires_at: Timestamp::from_millis(expires_at),
            }),
            _ => None,
        };
        Ok(Job {
            id: decode::uuid(&row.id)?,
            subscriber_id: tombstone::shown_id(&row.subscriber_id).to_owned(),
            subscriber_deleted: tombstone::is_tombstone(&row.subscriber_id),
            event_id: row.event_id,
            state: decode::named("state", &row.state)?,
            attempts: decode::num("attempts", row.attempts)?,
            max_attempts: decode::opt_num("max_attempts", row.max_attempts)?,
            deliver_at: Timestamp::from_millis(row.deliver_at),
            deadline: Timestamp::from_millis(row.deadline),
            due_at: decode::opt_ts(row.due_at),
            created_at: Timestamp::from_millis(row.created_at),
            updated_at: Timestamp::from_millis(row.updated_at),
            delivered_at: decode::opt_ts(row.delivered_at),
            dead_at: decode::opt_ts(row.dead_at),
            dead_reason: decode::opt_named("dead_reason", row.dead_reason.as_deref())?,
            dead_detail: decode::opt_named("dead_detail", row.dead_detail.as_deref())?,
            last_error,
            lease,
            subscriber_enabled: row.subscriber_enabled,
            event_type: row.event_type,
            schedule_id: row.schedule_id,
        })
    }
}
