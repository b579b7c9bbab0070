//! The SQLite store's own connections to a database file (rusqlite, linking the same
//! SQLite library as sqlx): the batch writer, which runs every write, and the reader
//! threads, which run the reads made outside a transaction. Statements run on the
//! thread that owns the connection, so a write or a read costs one hand-off between
//! threads, however many statements it runs (sqlx's driver hands every statement to
//! its connection's thread and back).
//!
//! Snapshots (reads of several statements that must see one state) and every
//! statement of an in-memory database still go through sqlx.

pub(crate) mod readers;
pub(crate) mod statements;
#[cfg(test)]
mod tests;
pub(crate) mod writer;
