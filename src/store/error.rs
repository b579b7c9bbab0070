//! Store errors, sorted by what a caller can do about them.

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or is busy right now; the call wrote nothing
    /// and may be retried (the API answers 503 with `Retry-After`).
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// A job names a subscriber that does not exist; nothing was written.
    #[error("subscriber `{0}` does not exist")]
    UnknownSubscriber(String),
    /// The subscriber of this id is being deleted (its history still moving to its
    /// tombstone, docs/DESIGN.md §5.3.1); nothing was written. The id is free again
    /// once the deletion ends, moments later.
    #[error("subscriber `{0}` is being deleted; try again in a moment")]
    SubscriberBeingDeleted(String),
    /// A job with the same (subscriber_id, event_id) exists with a different payload
    /// (compared as JSON values); nothing was written.
    #[error(
        "job {job_id} already exists for subscriber `{subscriber_id}` and event `{event_id}` with a different payload"
    )]
    PayloadConflict {
        /// The job that exists.
        job_id: uuid::Uuid,
        /// Its subscriber.
        subscriber_id: String,
        /// Its event.
        event_id: String,
    },
    /// Running replays already use `used` jobs/s of the server's `budget`, so a new
    /// replay at the asked rate would exceed it; nothing was written.
    #[error(
        "running replays already requeue {used} jobs/s of the server's --max-replay-rate \
         {budget}/s; cancel one or wait for one to finish, or ask for at most {}/s",
        u64::from(*budget).saturating_sub(*used)
    )]
    ReplayRateBudget {
        /// The summed rate of the running replays, in jobs/s.
        used: u64,
        /// The server's limit on that sum, in jobs/s.
        budget: u32,
    },
    /// Creating one more schedule would exceed the server's `--max-schedules`
    /// (docs/DESIGN.md §5.14); nothing was written.
    #[error(
        "{max} schedules exist, the most this server keeps (--max-schedules): delete one \
         first, or replace an existing one"
    )]
    TooManySchedules {
        /// The server's limit.
        max: u64,
    },
    /// The database URL or options are unusable.
    #[error("{0}")]
    Config(String),
    /// The database holds something this version cannot read, or refused a write it
    /// should have accepted.
    #[error("store failure: {0}")]
    Internal(String),
}

impl StoreError {
    /// True when retrying the same call later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        use sqlx::Error as E;
        match &error {
            E::PoolTimedOut | E::PoolClosed | E::Io(_) | E::Tls(_) | E::WorkerCrashed => {
                StoreError::Unavailable(error.to_string())
            }
            E::Database(db) if is_transient_database_error(db.as_ref()) => {
                StoreError::Unavailable(db.message().to_owned())
            }
            _ => StoreError::Internal(error.to_string()),
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        StoreError::Internal(format!("migration failed: {error}"))
    }
}

/// SQLite's SQLITE_BUSY (5), SQLITE_LOCKED (6) and their extended codes; PostgreSQL's
/// class 08 (connection exception), 57P0x (shutdown), 57014 (statement cancelled or
/// timed out), 25006 (read-only: a standby, or `default_transaction_read_only`) and
/// 40001/40P01 (serialization failure, deadlock).
fn is_transient_database_error(error: &dyn sqlx::error::DatabaseError) -> bool {
    let code = error.code();
    if error
        .try_downcast_ref::<sqlx::sqlite::SqliteError>()
        .is_some()
    {
        sqlite_busy(code.as_deref())
    } else {
        postgres_transient(code.as_deref())
    }
}

fn sqlite_busy(code: Option<&str>) -> bool {
    code.and_then(|c| c.parse::<i64>().ok())
        .is_some_and(|n| matches!(n & 0xff, 5 | 6))
}

fn postgres_transient(code: Option<&str>) -> bool {
    if code == Some(READ_ONLY_TRANSACTION) {
        super::database_signals::note_refusal();
    }
    if code == Some(QUERY_CANCELED) {
        super::database_signals::note_cancelled();
    }
    code.is_some_and(|c| {
        c.starts_with("08")
            || c.starts_with("57P0")
            || c == QUERY_CANCELED
            || c == READ_ONLY_TRANSACTION
            || c == "40001"
            || c == "40P01"
    })
}

/// PostgreSQL's `read_only_sql_transaction`: a standby, or `default_transaction_read_only`
/// (CASES C-19); noted in [`super::database_signals`], by which PostgreSQL's pool replaces the session.
const READ_ONLY_TRANSACTION: &str = "25006";
/// PostgreSQL's `query_canceled`: `statement_timeout`, or a cancel request (CASES C-19);
/// noted in [`super::database_signals`], by which PostgreSQL's pool replaces the sessions opened before it.
const QUERY_CANCELED: &str = "57014";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_and_connection_codes_are_transient() {
        assert!(sqlite_busy(Some("5")));
        assert!(sqlite_busy(Some("517"))); // SQLITE_BUSY_SNAPSHOT
        assert!(sqlite_busy(Some("6")));
        assert!(!sqlite_busy(Some("19"))); // SQLITE_CONSTRAINT
        assert!(!sqlite_busy(None));
        assert!(postgres_transient(Some("08006")));
        assert!(postgres_transient(Some("57P01")));
        assert!(postgres_transient(Some("25006")));
        assert!(postgres_transient(Some("57014")));
        assert!(!postgres_transient(Some("22021")));
        assert!(!postgres_transient(Some("23505")));
    }
}
