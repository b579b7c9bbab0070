//! Refuses a database URL that leads to a pooler in transaction mode (docs/DESIGN.md
//! §12; `../shared/CASES.md` C-20).
//!
//! PgBouncer with `pool_mode = transaction` (what most managed PostgreSQL offerings put
//! in front) hands a client's statements to whichever server session is free at each
//! transaction. deferhook keeps state in its sessions: sqlx's named prepared statements
//! (a second client's `sqlx_s_1` collides with the first's on a shared session), the
//! `LISTEN` that wakes the workers, and the advisory lock its migrations hold. So a start
//! through such a pooler is refused at once with a message naming the setting to use,
//! rather than failing later with a protocol error or a lock left on a pooled session.
//!
//! The probe uses two connections of its own and the simple-query protocol only (no
//! prepared statement), and asks PostgreSQL for each statement's server session
//! (`pg_backend_pid()`): directly, or through a pooler in session mode, a connection
//! keeps one session for its life and two open connections never share one. Through a
//! transaction-mode pooler, the second connection's transaction is usually handed the
//! session the first one just released, or the first one's next statement runs on
//! another session or waits for one; any of these is the refusal.

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, Row};

use crate::store::StoreError;

/// Rounds of the probe: each round is three short statements.
const ROUNDS: usize = 3;

/// How long the first connection's statement may wait while the second holds a
/// transaction: a pooler with one free session makes it wait until that ends.
const WAIT_LIMIT: Duration = Duration::from_secs(2);

/// What a refusal says: the cause and the settings to use.
pub const TRANSACTION_POOLING_MESSAGE: &str = "the database URL leads to a connection pooler \
     in transaction or statement mode (PgBouncer pool_mode = transaction or statement): one \
     connection's statements ran on different PostgreSQL sessions, or it refused a \
     transaction. deferhook keeps state in its sessions (prepared \
     statements, LISTEN, the migrations' advisory lock), so it needs one session per \
     connection: set pool_mode = session for this database in pgbouncer.ini (a [databases] \
     entry can set it for this database alone), or point --database-url \
     (DEFERHOOK_DATABASE_URL) at PostgreSQL directly";

/// Fails with [`StoreError::Config`] ([`TRANSACTION_POOLING_MESSAGE`]) when `options`
/// lead to a pooler that moves a connection between server sessions; errors reaching
/// the database are [`StoreError::Unavailable`] without the URL.
pub async fn refuse_transaction_pooling(options: &PgConnectOptions) -> Result<(), StoreError> {
    let options = options.clone().statement_cache_capacity(0);
    let mut first = connect(&options).await?;
    let mut second = connect(&options).await?;
    let pooled = match sessions_move(&mut first, &mut second).await {
        // PgBouncer in statement mode refuses `BEGIN` ("transaction blocks not allowed
        // in statement pooling mode"): the same refusal, naming the same setting.
        Err(error) if error.to_string().contains("statement pooling mode") => Ok(true),
        moved => moved,
    };
    // A connection left waiting inside the probe is dropped rather than closed politely.
    let _ = tokio::time::timeout(WAIT_LIMIT, first.close()).await;
    let _ = tokio::time::timeout(WAIT_LIMIT, second.close()).await;
    if pooled.map_err(unavailable)? {
        Err(StoreError::Config(TRANSACTION_POOLING_MESSAGE.into()))
    } else {
        Ok(())
    }
}

async fn connect(options: &PgConnectOptions) -> Result<PgConnection, StoreError> {
    PgConnection::connect_with(options)
        .await
        .map_err(unavailable)
}

fn unavailable(e: sqlx::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot connect to PostgreSQL: {e}"))
}

/// True when a statement of one connection ran on another connection's session, or
/// on a session other than its connection's earlier ones, or had to wait for one.
async fn sessions_move(
    first: &mut PgConnection,
    second: &mut PgConnection,
) -> Result<bool, sqlx::Error> {
    let own = session(first).await?;
    for _ in 0..ROUNDS {
        sqlx::raw_sql("BEGIN").execute(&mut *second).await?;
        let other = session(second).await?;
        let again = tokio::time::timeout(WAIT_LIMIT, session(first)).await;
        sqlx::raw_sql("COMMIT").execute(&mut *second).await?;
        match again {
            Err(_waited) => return Ok(true),
            Ok(again) => {
                if other == own || again? != own {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// The server session that runs this statement: its backend's process id.
async fn session(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    let row = sqlx::raw_sql("SELECT pg_backend_pid()::int8 AS pid")
        .fetch_one(conn)
        .await?;
    row.try_get::<i64, _>("pid")
}
