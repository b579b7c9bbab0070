//! Whose turn the upkeep is (docs/DESIGN.md §5.12, issue #36): of the live instances
//! with a worker, the one with the smallest id runs the deadline sweep and the replay
//! step at full pace and the retention purges; the others run the sweep and the replay
//! step only as a backstop, at most once a second, and no purge. Each of these writes
//! is safe run twice at once (rows are taken with `SKIP LOCKED` or fenced), so running
//! it on every instance only costs: with two instances each swept every 25 ms and
//! planned the sweep anew on almost every run.
//!
//! The turn is decided from the heartbeats, with no write of its own: each heartbeat
//! reads the live instances and sets the turn. An instance whose read fails, or that
//! sees no live instance with a worker, takes the turn (two instances taking it at
//! once only costs). When the instance holding it stops, the others see it gone at
//! their next heartbeat (at most 5 s); when it crashes, within
//! [`crate::heartbeat::LIVE_WITHIN_MS`]; meanwhile the backstop keeps deadlines swept
//! within a second.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::metrics;
use crate::store::records::InstanceSeen;

/// How often an instance whose turn it is not runs the deadline sweep and the replay
/// step, in milliseconds (the one whose turn it is: every 25 ms).
pub const BACKSTOP_EVERY_MS: i64 = 1_000;

/// Whether this instance runs the upkeep now; shared by the heartbeat (which sets it)
/// and the worker and retention (which read it). Starts as the turn's holder: an
/// instance alone takes the turn before its first heartbeat.
#[derive(Clone, Debug)]
pub struct UpkeepTurn {
    holds: Arc<AtomicBool>,
}

impl Default for UpkeepTurn {
    fn default() -> Self {
        metrics::upkeep_turn(true);
        UpkeepTurn {
            holds: Arc::new(AtomicBool::new(true)),
        }
    }
}

impl UpkeepTurn {
    /// True when this instance runs the upkeep at full pace and the purges.
    pub fn holds(&self) -> bool {
        self.holds.load(Ordering::Relaxed)
    }

    /// Sets the turn from `live`, the instances seen recently: this instance (`own_id`)
    /// holds it when it has the smallest id among those with a worker (more than 0
    /// slots), or when none has one.
    pub fn observe(&self, own_id: &str, live: &[InstanceSeen]) {
        let first = live
            .iter()
            .filter(|seen| seen.heartbeat.worker_slots > 0)
            .map(|seen| seen.heartbeat.id.as_str())
            .min();
        self.set(first.is_none_or(|first| first == own_id));
    }

    /// Takes the turn (the live instances could not be read).
    pub fn take(&self) {
        self.set(true);
    }

    fn set(&self, holds: bool) {
        if self.holds.swap(holds, Ordering::Relaxed) != holds {
            tracing::info!(holds, "upkeep turn changed");
        }
        metrics::upkeep_turn(holds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;
    use crate::store::Heartbeat;

    fn seen(id: &str, worker_slots: u32) -> InstanceSeen {
        InstanceSeen {
            heartbeat: Heartbeat {
                id: id.to_owned(),
                version: "0".to_owned(),
                started_at: Timestamp::from_millis(0),
                worker_slots,
                slots_in_use: 0,
            },
            seen_at: Timestamp::from_millis(0),
        }
    }

    #[test]
    fn the_smallest_id_with_a_worker_holds_the_turn() {
        let turn = UpkeepTurn::default();
        assert!(
            turn.holds(),
            "an instance alone holds it before its heartbeat"
        );
        let live = [seen("b", 8), seen("a", 8), seen("c", 8)];
        turn.observe("b", &live);
        assert!(!turn.holds());
        turn.observe("a", &live);
        assert!(turn.holds());
    }

    #[test]
    fn an_instance_without_a_worker_never_holds_it_from_one_with_a_worker() {
        let turn = UpkeepTurn::default();
        turn.observe("b", &[seen("a", 0), seen("b", 4)]);
        assert!(turn.holds(), "the API-only instance a runs no upkeep");
        turn.observe("b", &[seen("a", 4), seen("b", 4)]);
        assert!(!turn.holds());
    }

    #[test]
    fn no_live_worker_or_a_failed_read_takes_the_turn() {
        let turn = UpkeepTurn::default();
        turn.observe("b", &[seen("a", 4)]);
        assert!(!turn.holds());
        turn.observe("b", &[]);
        assert!(turn.holds(), "no live instance with a worker: take it");
        turn.observe("b", &[seen("a", 4)]);
        turn.take();
        assert!(turn.holds());
    }
}
