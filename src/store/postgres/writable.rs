//! Only sessions that can write are used (docs/DESIGN.md §12; `../shared/CASES.md`
//! C-19).
//!
//! PostgreSQL refuses writes for a while when it is demoted to a standby in a failover
//! or when `default_transaction_read_only` is set on the database (SQLSTATE 25006), and
//! a session keeps the default it was opened with: sessions opened during such a fault
//! stay read-only after it ends. So the pool opens no read-only session (a new one is
//! checked and closed), and while a read-only refusal has been seen in the last
//! [`RECHECK_FOR`], each session is checked again before a call takes it and closed if
//! it is still read-only; the pool then opens a fresh one, writable once the database
//! is. The refusals themselves are transient errors (503 with `Retry-After` to
//! producers; the worker backs off, `crate::store::StoreError::is_transient`).
//!
//! A session also keeps the `statement_timeout` default it was opened with: sessions
//! opened while the database had a 1 ms timeout would cancel most statements for good
//! after the setting is reset. So after a cancelled statement (SQLSTATE 57014) every
//! session opened before it is closed the next time a call would take it, and
//! replaced by a fresh one that reads the database's defaults then. A timeout an
//! operator set on purpose costs one reconnection of the pool per cancelled statement.

use std::time::Duration;

use sqlx::PgConnection;
use sqlx::postgres::PgPoolOptions;

use crate::store::database_signals::{note_refusal, since_cancel, since_refusal};

/// How long after the last read-only refusal sessions are checked before use.
pub const RECHECK_FOR: Duration = Duration::from_secs(60);

/// True when the session can write nothing: a standby, or read-only by default.
const READ_ONLY: &str =
    "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'";

/// What a read-only session is reported as.
pub const READ_ONLY_MESSAGE: &str = "PostgreSQL accepts no writes now (a standby, or \
     default_transaction_read_only = on); retrying with fresh sessions";

/// How long after a cancelled statement readiness fails.
pub const CANCELLED_FOR: Duration = Duration::from_secs(5);

/// How long readiness waits for a session that can write.
pub const PING_ACQUIRE_WAIT: Duration = Duration::from_secs(1);

/// What readiness says after a cancelled statement.
pub const CANCELLED_MESSAGE: &str = "PostgreSQL cancelled a statement in the last 5 s \
     (statement_timeout, or a cancel request)";

/// What readiness says when no session could be had in time.
pub const NO_SESSION_MESSAGE: &str = "no PostgreSQL session that accepts writes within 1 s";

/// True when a statement was cancelled in the last [`CANCELLED_FOR`]: writes may be
/// failing, so the instance is not ready.
pub fn cancelled_recently() -> bool {
    since_cancel().is_some_and(|since| since < CANCELLED_FOR)
}

/// True when a session `age` old was opened before the last cancelled statement.
fn opened_before_last_cancel(age: Duration) -> bool {
    since_cancel().is_some_and(|since| age > since)
}

/// True when a read-only refusal was seen in the last [`RECHECK_FOR`].
fn refused_recently() -> bool {
    since_refusal().is_some_and(|since| since < RECHECK_FOR)
}

/// Whether the session `conn` can write; notes a refusal when it cannot.
pub async fn can_write(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let read_only: bool = sqlx::query_scalar(READ_ONLY).fetch_one(conn).await?;
    if read_only {
        note_refusal();
    }
    Ok(!read_only)
}

/// The pool's options: `base` with the checks above; each new session then runs
/// `setup` (session settings, e.g. `SET plan_cache_mode = ...`: a `SET` works through
/// a pooler in session mode, where a startup parameter such as `options` is refused).
pub fn checked(base: PgPoolOptions, setup: Option<&'static str>) -> PgPoolOptions {
    base.after_connect(move |conn, _| {
        Box::pin(async move {
            if !can_write(conn).await? {
                return Err(sqlx::Error::Io(std::io::Error::other(READ_ONLY_MESSAGE)));
            }
            if let Some(setup) = setup {
                sqlx::raw_sql(sqlx::AssertSqlSafe(setup))
                    .execute(&mut *conn)
                    .await?;
            }
            Ok(())
        })
    })
    .before_acquire(|conn, meta| {
        Box::pin(async move {
            if opened_before_last_cancel(meta.age) {
                Ok(false)
            } else if refused_recently() {
                can_write(conn).await
            } else {
                Ok(true)
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::database_signals::note_cancelled;

    #[test]
    fn sessions_opened_before_a_cancelled_statement_are_replaced() {
        note_cancelled();
        assert!(opened_before_last_cancel(Duration::from_secs(3600)));
        assert!(!opened_before_last_cancel(Duration::ZERO));
    }

    #[test]
    fn a_refusal_is_remembered_for_a_while() {
        note_refusal();
        assert!(refused_recently());
    }
}
