//! How many attempts one worker runs at once (its slots). An attempt whose receiver has
//! not answered yet costs a socket and a little memory, nothing else: so without
//! `--max-in-flight` a worker takes as many slots as its open-files limit and its
//! memory budget allow, and the per-destination limits, not the slot count, are what
//! keep one slow receiver from holding the capacity the others need (issue #14).

use crate::open_files::RESERVED;

/// Memory one waiting attempt is counted at, in bytes: its task, its connection
/// (socket, HTTP and TLS buffers), its claimed job with the payload, its held lease.
/// `scripts/measure-held-requests.sh` (release build, SQLite, 2,000 to 10,000 requests
/// held open) measured the growth of VmRSS per held request: 33 KB over HTTP and 40 KB
/// over HTTPS with 1 KiB payloads, plus about two bytes per payload byte (68 KB with
/// 16 KiB over HTTP). 64 KiB covers HTTPS with payloads up to about 12 KiB.
pub const BYTES_PER_WAITING_ATTEMPT: u64 = 64 * 1024;
/// Fewest slots a worker gets by default, however low the open-files limit or the
/// memory budget.
pub const MIN_SLOTS: u64 = 64;
/// Most slots a worker gets (also the largest `--max-in-flight`).
pub const MAX_SLOTS: u64 = 100_000;

/// What set a worker's slot count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotBound {
    /// `--max-in-flight` named it.
    Flag,
    /// The open-files limit, less the descriptors kept for everything else.
    OpenFiles,
    /// The memory budget over what one waiting attempt costs.
    MemoryBudget,
    /// Both bounds were lower than [`MIN_SLOTS`].
    Floor,
    /// Both bounds were higher than [`MAX_SLOTS`].
    Cap,
}

impl SlotBound {
    /// The name logged at start.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotBound::Flag => "--max-in-flight",
            SlotBound::OpenFiles => "open_files_limit",
            SlotBound::MemoryBudget => "memory_budget",
            SlotBound::Floor => "floor",
            SlotBound::Cap => "cap",
        }
    }
}

/// A worker's slot count and what each bound allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSlots {
    /// Attempts the worker runs at once.
    pub count: u64,
    /// What set `count`.
    pub bound: SlotBound,
    /// The open-files soft limit the count was chosen with.
    pub open_files_limit: u64,
    /// Attempts the open-files limit leaves room for (the limit less
    /// [`RESERVED`]).
    pub open_files_allow: u64,
    /// The memory budget, in MiB.
    pub memory_budget_mb: u64,
    /// Attempts the memory budget pays for ([`BYTES_PER_WAITING_ATTEMPT`] each).
    pub memory_allows: u64,
}

impl WorkerSlots {
    /// The slot count: `max_in_flight` when given; otherwise the lower of what the
    /// open-files soft limit (after raising it) and the memory budget (in MiB) allow,
    /// at least [`MIN_SLOTS`] and at most [`MAX_SLOTS`].
    pub fn choose(
        max_in_flight: Option<u64>,
        open_files_limit: u64,
        memory_budget_mb: u64,
    ) -> Self {
        let open_files_allow = open_files_limit.saturating_sub(RESERVED);
        let memory_allows =
            memory_budget_mb.saturating_mul(1024 * 1024) / BYTES_PER_WAITING_ATTEMPT;
        let (count, bound) = match max_in_flight {
            Some(n) => (n, SlotBound::Flag),
            None if open_files_allow <= memory_allows => (open_files_allow, SlotBound::OpenFiles),
            None => (memory_allows, SlotBound::MemoryBudget),
        };
        let (count, bound) = match bound {
            SlotBound::Flag => (count, bound),
            _ if count < MIN_SLOTS => (MIN_SLOTS, SlotBound::Floor),
            _ if count > MAX_SLOTS => (MAX_SLOTS, SlotBound::Cap),
            _ => (count, bound),
        };
        WorkerSlots {
            count,
            bound,
            open_files_limit,
            open_files_allow,
            memory_budget_mb,
            memory_allows,
        }
    }

    /// Logs the choice and why (once, when the worker is built); warns when the
    /// open-files limit leaves room for fewer attempts than the count.
    pub fn log(&self) {
        tracing::info!(
            slots = self.count,
            set_by = self.bound.as_str(),
            open_files_limit = self.open_files_limit,
            open_files_allow = self.open_files_allow,
            memory_budget_mb = self.memory_budget_mb,
            memory_allows = self.memory_allows,
            "worker slots: attempts this instance runs at once"
        );
        if self.count > self.open_files_allow {
            tracing::warn!(
                slots = self.count,
                open_files_limit = self.open_files_limit,
                "the open-files limit is below the slots plus 1024; attempts may fail to \
                 connect when that many run at once (raise `ulimit -n` and `ulimit -Hn`; \
                 with --max-in-flight, or lower it)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An open-files limit that leaves room for `n` attempts.
    fn files_for(n: u64) -> u64 {
        n + RESERVED
    }

    /// A memory budget, in MiB, that pays for `n` attempts.
    fn mb_for(n: u64) -> u64 {
        n * BYTES_PER_WAITING_ATTEMPT / (1024 * 1024)
    }

    #[test]
    fn the_flag_wins_over_both_bounds() {
        let slots = WorkerSlots::choose(Some(3), files_for(50_000), 512);
        assert_eq!((slots.count, slots.bound), (3, SlotBound::Flag));
        let slots = WorkerSlots::choose(Some(100_000), 1_024, 1);
        assert_eq!((slots.count, slots.bound), (100_000, SlotBound::Flag));
    }

    #[test]
    fn the_open_files_limit_wins_when_lower() {
        let slots = WorkerSlots::choose(None, 20_000, mb_for(40_000));
        assert_eq!((slots.count, slots.bound), (18_976, SlotBound::OpenFiles));
        assert_eq!(slots.open_files_allow, 18_976);
        assert_eq!(slots.memory_allows, 40_000);
    }

    #[test]
    fn the_memory_budget_wins_when_lower() {
        let slots = WorkerSlots::choose(None, files_for(50_000), 512);
        assert_eq!(
            slots.memory_allows,
            512 * 1024 * 1024 / BYTES_PER_WAITING_ATTEMPT
        );
        assert_eq!(
            (slots.count, slots.bound),
            (slots.memory_allows, SlotBound::MemoryBudget)
        );
    }

    #[test]
    fn equal_bounds_name_the_open_files_limit() {
        let slots = WorkerSlots::choose(None, files_for(16_384), mb_for(16_384));
        assert_eq!((slots.count, slots.bound), (16_384, SlotBound::OpenFiles));
    }

    #[test]
    fn below_the_floor_the_floor_holds() {
        // The common soft limit of 1,024 leaves nothing beside the reserve.
        let slots = WorkerSlots::choose(None, 1_024, 512);
        assert_eq!((slots.count, slots.bound), (MIN_SLOTS, SlotBound::Floor));
        assert_eq!(slots.open_files_allow, 0);
        let slots = WorkerSlots::choose(None, files_for(50_000), 1);
        assert_eq!((slots.count, slots.bound), (MIN_SLOTS, SlotBound::Floor));
    }

    #[test]
    fn above_the_cap_the_cap_holds() {
        // An unlimited open-files limit (RLIM_INFINITY) and a large budget.
        let slots = WorkerSlots::choose(None, u64::MAX, 1 << 20);
        assert_eq!((slots.count, slots.bound), (MAX_SLOTS, SlotBound::Cap));
        let slots = WorkerSlots::choose(None, u64::MAX, u64::MAX);
        assert_eq!((slots.count, slots.bound), (MAX_SLOTS, SlotBound::Cap));
    }
}
