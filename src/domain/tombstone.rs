//! Deleted subscribers (docs/DESIGN.md §5.3): a deleted subscriber's row stays, as a
//! tombstone, under an id the API can never take, `<id>/<deletion id>`, with its jobs
//! and attempts moved to it (in batches, after the deletion's first transaction; the
//! old row, marked as being deleted, goes once they all have). Its history stays readable (by job id and event id)
//! until retention, while its id is free for a new subscriber that shares nothing
//! with it: not its jobs' idempotency (`UNIQUE (subscriber_id, event_id)`), secret,
//! stats, pause or destination.
//!
//! A `/` never appears in a subscriber id ([`super::validate::subscriber_id`]), so a
//! tombstone id cannot collide with a live one, and the id the operator knew is the
//! part before the first `/`.

use uuid::Uuid;

/// Separates the id the operator knew from the deletion's id in a tombstone id.
pub const SEPARATOR: char = '/';

/// The tombstone id of subscriber `id` deleted by deletion `deletion` (a fresh UUIDv7).
pub fn tombstone_id(id: &str, deletion: Uuid) -> String {
    format!("{id}{SEPARATOR}{deletion}")
}

/// The id shown for a stored subscriber id: the id the operator knew for a tombstone,
/// the id itself for a live subscriber.
pub fn shown_id(stored: &str) -> &str {
    stored
        .split_once(SEPARATOR)
        .map_or(stored, |(shown, _)| shown)
}

/// True when `stored` names a deleted subscriber's tombstone.
pub fn is_tombstone(stored: &str) -> bool {
    stored.contains(SEPARATOR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::validate;

    #[test]
    fn a_tombstone_id_is_never_a_valid_subscriber_id_and_shows_the_old_id() {
        let deletion = Uuid::now_v7();
        for id in ["billing", "a.b:c_d-e", &"x".repeat(128)] {
            let tomb = tombstone_id(id, deletion);
            assert!(validate::subscriber_id(&tomb).is_err(), "{tomb}");
            assert!(is_tombstone(&tomb));
            assert_eq!(shown_id(&tomb), id);
            assert_eq!(shown_id(id), id);
            assert!(!is_tombstone(id));
        }
    }
}
