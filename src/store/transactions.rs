//! How a backend runs statements and transactions: the base of every subject's
//! statement trait (`CreateStatements`, `ReplayStatements`, …). The shared algorithms
//! are plain functions over those traits, binding the values of each statement once;
//! each backend implements them in its file of the same name, with its SQL as
//! constants in its own dialect.
//!
//! A statement trait's constants are the backend's SQL; their docs number the
//! placeholders `$n` (SQLite's text writes `?n`), and the shared function binds the
//! values in that order. Every method returns a `Send` future, so the shared
//! algorithms also run in spawned tasks (the group commits).

use std::future::Future;
use std::pin::Pin;

use sqlx::FromRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use crate::store::StoreError;
use crate::store::dialect::{Dialect, Query};
use crate::store::lite_rows::LiteRow;

/// A row type both backends decode (a `#[derive(sqlx::FromRow)]` struct with
/// [`crate::store::lite_rows::row!`], or a tuple), through sqlx and on the
/// SQLite writer's own connection.
pub(crate) trait Row:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + LiteRow + Send + Unpin + 'static
{
}

impl<T> Row for T where
    T: for<'r> FromRow<'r, SqliteRow>
        + for<'r> FromRow<'r, PgRow>
        + LiteRow
        + Send
        + Unpin
        + 'static
{
}

/// What the body of a write transaction returns: a future borrowing the transaction.
pub(crate) type TxFuture<'a, R> = Pin<Box<dyn Future<Output = Result<R, StoreError>> + Send + 'a>>;

/// A backend's transactions.
pub(crate) trait Transactions: Clone + Send + Sync + 'static {
    /// An open transaction; statements run on it.
    type Tx: Send;

    /// How the backend spells statements built at run time.
    const DIALECT: Dialect;

    /// Runs `body` in a write transaction and commits it; `body`'s error rolls back
    /// everything it wrote. The result is returned only once the commit is durable.
    ///
    /// SQLite: on the batch writer's thread, in a savepoint of a batch that shares one
    /// `BEGIN IMMEDIATE` … `COMMIT` with the other writes waiting then (see
    /// SQLite's `direct::writer`); a read-then-write cannot interleave with another
    /// writer. PostgreSQL: `BEGIN` … `COMMIT` on a pooled connection, row locks taken
    /// by the statements.
    ///
    /// # Errors
    /// `body`'s error, or the database's at `BEGIN` or `COMMIT`.
    fn transaction<R, F>(&self, body: F) -> impl Future<Output = Result<R, StoreError>> + Send
    where
        R: Send + 'static,
        F: for<'a> FnOnce(&'a mut Self::Tx) -> TxFuture<'a, R> + Send + 'static;

    /// Opens a read-only transaction that reads one snapshot.
    fn snapshot(&self) -> impl Future<Output = Result<Self::Tx, StoreError>> + Send;

    /// Commits `tx`.
    fn commit(tx: Self::Tx) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Tells the workers of every instance there is new work, when `tx` commits
    /// (PostgreSQL: `NOTIFY`); a backend of one instance does nothing.
    fn announce(tx: &mut Self::Tx) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Runs `query` in `tx`; returns the rows it affected.
    fn execute(
        tx: &mut Self::Tx,
        query: Query,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The rows of `query` in `tx`.
    fn fetch_all<T: Row>(
        tx: &mut Self::Tx,
        query: Query,
    ) -> impl Future<Output = Result<Vec<T>, StoreError>> + Send;

    /// The first row of `query` in `tx`, if any.
    fn fetch_optional<T: Row>(
        tx: &mut Self::Tx,
        query: Query,
    ) -> impl Future<Output = Result<Option<T>, StoreError>> + Send;

    /// The one row of `query` in `tx` (none is an error).
    fn fetch_one<T: Row>(
        tx: &mut Self::Tx,
        query: Query,
    ) -> impl Future<Output = Result<T, StoreError>> + Send;

    /// Runs `query` alone in a write transaction (see [`Transactions::transaction`]);
    /// returns the rows it affected.
    fn write_alone(&self, query: Query) -> impl Future<Output = Result<u64, StoreError>> + Send {
        self.transaction(move |tx| Box::pin(Self::execute(tx, query)))
    }

    /// The rows of `query`, read outside a transaction (SQLite: on its readers).
    fn read_all<T: Row>(
        &self,
        query: Query,
    ) -> impl Future<Output = Result<Vec<T>, StoreError>> + Send;

    /// The first row of `query`, if any, read outside a transaction.
    fn read_optional<T: Row>(
        &self,
        query: Query,
    ) -> impl Future<Output = Result<Option<T>, StoreError>> + Send;

    /// The one row of `query`, read outside a transaction (none is an error).
    fn read_one<T: Row>(&self, query: Query) -> impl Future<Output = Result<T, StoreError>> + Send;
}
