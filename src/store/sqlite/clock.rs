//! The database's clock in SQLite: none of its own. SQLite is embedded, so it and the
//! one instance that opens the file read the same machine's clock: there is no offset
//! to measure, and the instance keeps its own clock (docs/DESIGN.md §12).

use crate::domain::Timestamp;

/// No clock apart from this machine's.
pub(super) fn now() -> Option<Timestamp> {
    None
}
