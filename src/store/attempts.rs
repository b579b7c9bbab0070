//! A job's attempt history, for both backends: the row a read of it decodes, and
//! the read.

use uuid::Uuid;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::Query;
use crate::store::records::Attempt;
use crate::store::transactions::Transactions;

/// The statement of the attempt history, in the backend's dialect.
pub(crate) trait AttemptStatements: Transactions {
    /// Job `$1`'s attempts ([`AttemptRow`]), oldest first.
    const LIST: &'static str;
}

/// Job `job_id`'s attempts, oldest first.
pub(crate) async fn list<S: AttemptStatements>(
    db: &S,
    job_id: Uuid,
) -> Result<Vec<Attempt>, StoreError> {
    let query = Query::new(S::LIST).text(job_id.to_string());
    let rows: Vec<AttemptRow> = db.read_all(query).await?;
    rows.into_iter().map(Attempt::try_from).collect()
}

/// A row of `attempts`.
#[derive(sqlx::FromRow)]
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
