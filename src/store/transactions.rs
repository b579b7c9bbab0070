//! How a backend opens and ends transactions: the base of every subject's statement
//! trait (`CreateStatements`, `ReplayStatements`, …). The shared algorithms are plain
//! functions over those traits; each backend implements them in its file of the same
//! name, with its SQL as constants in its own dialect.
//!
//! Every method returns a `Send` future, so the shared algorithms also run in spawned
//! tasks (the group commits).

use std::future::Future;

use crate::store::StoreError;

/// A backend's transactions.
pub(crate) trait Transactions: Clone + Send + Sync + 'static {
    /// An open transaction; statements run on it.
    type Tx: Send;

    /// Opens a write transaction (SQLite: `BEGIN IMMEDIATE` on its one writer, so
    /// a read-then-write cannot interleave with another writer; PostgreSQL: `BEGIN`,
    /// with row locks taken by the statements).
    fn write(&self) -> impl Future<Output = Result<Self::Tx, StoreError>> + Send;

    /// Opens a read-only transaction that reads one snapshot.
    fn snapshot(&self) -> impl Future<Output = Result<Self::Tx, StoreError>> + Send;

    /// Commits `tx`.
    fn commit(tx: Self::Tx) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Tells the workers of every instance there is new work, when `tx` commits
    /// (PostgreSQL: `NOTIFY`); a backend of one instance does nothing.
    fn announce(tx: &mut Self::Tx) -> impl Future<Output = Result<(), StoreError>> + Send;
}
