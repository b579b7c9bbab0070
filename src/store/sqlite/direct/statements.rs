//! Statements run directly on the SQLite writer's own connection (see
//! [`super`]): no hand-off to another thread per statement, prepared once and
//! cached.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, ToSql};

use crate::store::StoreError;
use crate::store::dialect::{Query, Value};
use crate::store::lite_rows::LiteRow;

/// Prepared statements kept per connection (the fixed statements, plus the shapes of
/// the statements built at run time most in use).
const STATEMENT_CACHE: usize = 256;

/// Opens the database file at `path` (it exists: the migrations have run) with the
/// pragmas every connection of the store has: WAL, `synchronous = FULL` (a commit is on
/// disk before any caller hears of it), foreign keys on, and `busy_timeout` for
/// another process holding the file. Its temporary storage is in memory: a batch's
/// savepoints and multi-row statements otherwise create and delete temporary files.
///
/// # Errors
/// [`StoreError::Unavailable`] when the file cannot be opened.
pub(crate) fn open(path: &Path, busy_timeout: Duration) -> Result<Connection, StoreError> {
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .and_then(|conn| {
        conn.busy_timeout(busy_timeout)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
             PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
        )?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(conn)
    })
    .map_err(|e| StoreError::Unavailable(format!("cannot open {}: {e}", path.display())))
}

/// `error` as a store error: busy or locked (another process holds the file) is
/// transient, anything else an internal failure.
pub(crate) fn store_error(error: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked};
    match error.sqlite_error_code() {
        Some(DatabaseBusy | DatabaseLocked) => StoreError::Unavailable(error.to_string()),
        _ => StoreError::Internal(error.to_string()),
    }
}

/// Runs `query`; returns the rows it changed (0 for a statement that only reads).
pub(crate) fn execute(conn: &Connection, query: Query) -> Result<u64, StoreError> {
    let (sql, values) = query.into_parts();
    let mut statement = conn.prepare_cached(&sql).map_err(store_error)?;
    bind(&mut statement, &values)?;
    let writes = !statement.readonly();
    let mut rows = statement.raw_query();
    while rows.next().map_err(store_error)?.is_some() {}
    Ok(if writes { conn.changes() } else { 0 })
}

/// The rows of `query`, each decoded as a `T`.
pub(crate) fn fetch<T: LiteRow>(
    conn: &Connection,
    query: Query,
    limit: Option<usize>,
) -> Result<Vec<T>, StoreError> {
    let (sql, values) = query.into_parts();
    let mut statement = conn.prepare_cached(&sql).map_err(store_error)?;
    bind(&mut statement, &values)?;
    let mut rows = statement.raw_query();
    let mut decoded = Vec::new();
    while limit.is_none_or(|limit| decoded.len() < limit) {
        match rows.next().map_err(store_error)? {
            Some(row) => decoded.push(T::from_lite(row)?),
            None => break,
        }
    }
    Ok(decoded)
}

/// Runs `sql`, which takes no values (`BEGIN IMMEDIATE`, `SAVEPOINT …`, `COMMIT`).
pub(crate) fn control(conn: &Connection, sql: &str) -> Result<(), StoreError> {
    conn.prepare_cached(sql)
        .and_then(|mut statement| statement.raw_execute())
        .map(|_| ())
        .map_err(store_error)
}

/// Binds `values` to placeholders 1, 2, … (SQLite numbers `?` in order of appearance
/// and `?n` as n, so both read the values in order); values beyond the statement's
/// last placeholder are not bound, as sqlx does not bind them.
fn bind(statement: &mut rusqlite::CachedStatement<'_>, values: &[Value]) -> Result<(), StoreError> {
    let placeholders = statement.parameter_count();
    for (index, value) in values.iter().enumerate().take(placeholders) {
        let value: &dyn ToSql = match value {
            Value::Text(text) => text,
            Value::Int(n) => n,
            Value::OptInt(n) => n,
            Value::OptText(text) => text,
            Value::Bool(flag) => flag,
        };
        statement
            .raw_bind_parameter(index + 1, value)
            .map_err(store_error)?;
    }
    Ok(())
}
