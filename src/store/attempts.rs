//! A job's attempt history, for both backends: the row a read of it decodes, and
//! the read.

use uuid::Uuid;

use crate::domain::attempt::AttemptOutcome;
use crate::domain::{JobState, Timestamp};
use crate::store::StoreError;
use crate::store::claims::LEASE_EXPIRED_REASON;
use crate::store::decode;
use crate::store::dialect::Query;
use crate::store::records::{Attempt, RecentAttempt};
use crate::store::transactions::Transactions;

/// The statements of the attempt history, in the backend's dialect.
pub(crate) trait AttemptStatements: Transactions {
    /// Job `$1`'s attempts ([`AttemptRow`]), oldest first.
    const LIST: &'static str;
    /// Job `$1`'s state, due time and fencing token ([`LeaseRow`]).
    const LEASE: &'static str;
    /// Subscriber `$1`'s latest attempts ([`RecentAttemptRow`]), latest started first,
    /// at most `$2` (a range of `attempts_subscriber_started`).
    const RECENT: &'static str;
}

crate::store::lite_rows::row! {
    /// A job's lease, as its attempt history needs it.
    pub struct LeaseRow {
        state: String,
        due_at: Option<i64>,
        lease_token: i64,
    }
}

/// Job `job_id`'s attempts as read at `now`, oldest first, read in one snapshot with
/// the job. The attempt of a lease that has expired at `now` (the job `in_flight`, its
/// due time passed, the attempt under its token and still `in_progress`) reads as
/// `unknown`, for [`LEASE_EXPIRED_REASON`], not finished (no result was recorded):
/// what a claim or the sweep will record for it (docs/DESIGN.md §2.2).
pub(crate) async fn list<S: AttemptStatements>(
    db: &S,
    job_id: Uuid,
    now: Timestamp,
) -> Result<Vec<Attempt>, StoreError> {
    let mut tx = db.snapshot().await?;
    let lease: Option<LeaseRow> =
        S::fetch_optional(&mut tx, Query::new(S::LEASE).text(job_id.to_string())).await?;
    let rows: Vec<AttemptRow> =
        S::fetch_all(&mut tx, Query::new(S::LIST).text(job_id.to_string())).await?;
    S::commit(tx).await?;
    let expired_token = lease
        .filter(|l| {
            l.state == JobState::InFlight.as_str() && l.due_at.is_some_and(|d| d <= now.as_millis())
        })
        .map(|l| l.lease_token);
    rows.into_iter()
        .map(|row| {
            let mut attempt = Attempt::try_from(row)?;
            if attempt.outcome == AttemptOutcome::InProgress
                && expired_token == Some(attempt.lease_token)
            {
                attempt.outcome = AttemptOutcome::Unknown;
                attempt.reason = Some(LEASE_EXPIRED_REASON.to_owned());
            }
            Ok(attempt)
        })
        .collect()
}

crate::store::lite_rows::row! {
    /// A row of `attempts`.
    pub struct AttemptRow {
        number: i64,
        started_at: i64,
        finished_at: Option<i64>,
        outcome: String,
        status: Option<i64>,
        error_class: Option<String>,
        reason: Option<String>,
        body_excerpt: Option<String>,
        lease_owner: String,
        lease_token: i64,
        possible_duplicate: bool,
    }
}

impl TryFrom<AttemptRow> for Attempt {
    type Error = StoreError;

    fn try_from(row: AttemptRow) -> Result<Self, StoreError> {
        Ok(Attempt {
            number: decode::num("number", row.number)?,
            started_at: Timestamp::from_millis(row.started_at),
            finished_at: decode::opt_ts(row.finished_at),
            outcome: decode::named("outcome", &row.outcome)?,
            status: decode::opt_num("status", row.status)?,
            error_class: decode::opt_named("error_class", row.error_class.as_deref())?,
            reason: row.reason,
            body_excerpt: row.body_excerpt,
            lease_owner: row.lease_owner,
            lease_token: row.lease_token,
            possible_duplicate: row.possible_duplicate,
        })
    }
}

crate::store::lite_rows::row! {
    /// A row of `attempts` with its job's id and event id.
    pub struct RecentAttemptRow {
        job_id: String,
        event_id: String,
        /// The attempt.
        #[sqlx(flatten)]
        attempt: AttemptRow,
    }
}

/// Subscriber `subscriber_id`'s latest `limit` attempts, latest started first, as
/// stored (an attempt whose lease has expired still reads `in_progress`; its job's page
/// shows it `unknown`).
pub(crate) async fn recent<S: AttemptStatements>(
    db: &S,
    subscriber_id: &str,
    limit: u32,
) -> Result<Vec<RecentAttempt>, StoreError> {
    let query = Query::new(S::RECENT)
        .text(subscriber_id.to_owned())
        .int(i64::from(limit));
    let rows: Vec<RecentAttemptRow> = db.read_all(query).await?;
    rows.into_iter()
        .map(|row| {
            let attempt = Attempt::try_from(row.attempt)?;
            Ok(RecentAttempt {
                job_id: decode::uuid(&row.job_id)?,
                event_id: row.event_id,
                attempt,
            })
        })
        .collect()
}
