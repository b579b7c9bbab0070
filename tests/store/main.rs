//! The store conformance suite: one set of cases that every [`Store`] backend must pass.
//!
//! A case is written once, where it is defined: `store_case!(name, async |store:
//! SharedStore| { … })` (see [`store_case!`]) defines it and its two tests,
//! `suite::module::name::sqlite` and `suite::module::name::postgres`. Each test builds a
//! fresh store ([`sqlite_store`], [`postgres_store`]) and runs the case against it, or
//! against the whole [`support::Backend`] for a case written `async |backend: Backend|`
//! (its database URL too, to open another store on the same database or to read a
//! column directly; see [`support::run_case`]). The same cases run on SQLite and
//! PostgreSQL.
//!
//! Cases marked `store_case!(#[ignore = "bug: …"] name, …)` pin a known defect: they
//! fail today and are run with `cargo test --test store -- --ignored`.
//!
//! [`Store`]: deferhook::store::Store

use std::future::Future;
use std::time::Duration;

/// How long one case may run; a deadlock or a cursor that never ends fails, not hangs.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Defines a case of the suite and its test on each backend: `store_case!(name, async
/// |store: SharedStore| { … })`, or `async |backend: Backend| { … }` for a case that
/// needs the database itself. Attributes before the name (such as `#[ignore = "bug:
/// …"]`) apply to both tests. The case's body sees the items of the file it is in.
macro_rules! store_case {
    ($(#[$meta:meta])* $case:ident, $body:expr $(,)?) => {
        mod $case {
            #[allow(unused_imports)]
            use super::*;

            /// Starts the case on `backend`.
            fn start(
                backend: &crate::support::Backend,
            ) -> impl std::future::Future<Output = ()> + use<> {
                crate::support::run_case($body, backend)
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            $(#[$meta])*
            async fn sqlite() {
                crate::run(crate::sqlite_store().await, start).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            $(#[$meta])*
            async fn postgres() {
                crate::run(crate::postgres_store().await, start).await;
            }
        }
    };
}

mod finish;
#[path = "../common/pg.rs"]
mod pg;
mod pg_announcements;
mod pg_collations;
mod pg_lock_order;
mod pg_plans;
mod replay_plans;
mod suite;
mod support;

/// Runs a case, started by `start`, on `backend` within [`CASE_TIMEOUT`]; `None`: the
/// backend is not available here (said once), so nothing runs.
async fn run<F: Future<Output = ()>>(
    backend: Option<support::Backend>,
    start: impl FnOnce(&support::Backend) -> F,
) {
    let Some(backend) = backend else { return };
    tokio::time::timeout(CASE_TIMEOUT, start(&backend))
        .await
        .expect("the case finished in time (a hang is a failure)");
}

/// A fresh, migrated SQLite store in its own temporary directory, removed when the
/// test ends.
async fn sqlite_store() -> Option<support::Backend> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("deferhook.db").display());
    let store = deferhook::store::open(&url)
        .await
        .expect("open the SQLite store");
    Some(support::Backend::with_guard(store, url, dir))
}

/// A fresh, migrated PostgreSQL store in its own database, dropped when the test ends;
/// `None` when no server is reachable (see `common/pg.rs`).
async fn postgres_store() -> Option<support::Backend> {
    let database = pg::TestDatabase::create().await?;
    let store = deferhook::store::open(&database.url)
        .await
        .expect("open the PostgreSQL store");
    let url = database.url.clone();
    Some(support::Backend::with_guard(store, url, database))
}
