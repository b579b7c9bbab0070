//! Ids of jobs and replays: UUIDv7 (RFC 9562 §5.7), whose first 48 bits are the
//! creation instant in Unix milliseconds, stamped with the injected `now` rather than
//! this machine's clock. Listings sort by id and `created_after`/`created_before` read
//! the instant in it (docs/DESIGN.md §5.4), so on PostgreSQL, where `now` is the
//! database's timeline (§12), ids made by instances whose machines' clocks disagree
//! still sort and filter by when the database saw them created.

use std::sync::Mutex;

use uuid::Uuid;
use uuid::timestamp::context::ContextV7;

use super::Timestamp;

/// One counter for the process, so that ids made in the same millisecond (a fan-out's
/// jobs) still sort in the order they were made, as `Uuid::now_v7` does.
static SEQUENCE: Mutex<ContextV7> = Mutex::new(ContextV7::new());

/// A new UUIDv7 stamped `now` (instants before 1970 are stamped 1970-01-01). Ids made
/// by this process increase, even if `now` steps back (the counter carries them).
pub fn new_id(now: Timestamp) -> Uuid {
    let millis = u64::try_from(now.as_millis()).unwrap_or(0);
    let seconds = millis / 1_000;
    let nanos = u32::try_from((millis % 1_000) * 1_000_000).expect("below 1e9");
    Uuid::new_v7(uuid::Timestamp::from_unix(&SEQUENCE, seconds, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped_ms(id: Uuid) -> u64 {
        let (seconds, nanos) = id.get_timestamp().expect("a v7 id").to_unix();
        seconds * 1_000 + u64::from(nanos / 1_000_000)
    }

    #[test]
    fn an_id_carries_the_injected_instant_not_the_machines() {
        let now = Timestamp::from_millis(4_102_444_800_123); // 2100-01-01T00:00:00.123Z
        let id = new_id(now);
        assert_eq!(id.get_version_num(), 7);
        assert_eq!(stamped_ms(id), 4_102_444_800_123);
    }

    #[test]
    fn ids_of_one_millisecond_increase() {
        let now = Timestamp::from_millis(1_800_000_000_000);
        let ids: Vec<Uuid> = (0..1_000).map(|_| new_id(now)).collect();
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
    }
}
