//! The database's clock, which instances sharing a PostgreSQL database work by
//! (docs/DESIGN.md §12): PostgreSQL reads its server's clock at each call; SQLite has
//! none of its own (it reads this machine's, as the instance does).

use deferhook::domain::{Clock, SystemClock};

use crate::support::Backend;

store_case!(
    the_database_clock_is_read_where_the_database_has_one,
    async |backend: Backend| {
        let before = SystemClock.now();
        let first = backend.store.database_clock().await.unwrap();
        let second = backend.store.database_clock().await.unwrap();
        let after = SystemClock.now();
        if backend.url.starts_with("sqlite:") {
            assert_eq!((first, second), (None, None));
            return;
        }
        let (first, second) = (first.unwrap(), second.unwrap());
        // The test server runs on this machine (or one whose clock is synchronized with
        // it): a reading falls between ours, within a second.
        assert!(
            before.minus_ms(1_000) <= first && second <= after.plus_ms(1_000),
            "{before:?} {first:?} {second:?} {after:?}"
        );
        // Read as the statement runs, not at a transaction's start.
        assert!(first <= second, "{first:?} {second:?}");
    }
);
