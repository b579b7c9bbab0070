//! What retention purged.

use crate::domain::JobState;

/// Jobs deleted (with their attempts) by [`crate::store::Store::purge_finished`], per
/// state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurgedJobs {
    /// `delivered` jobs.
    pub delivered: u64,
    /// `cancelled` jobs.
    pub cancelled: u64,
    /// `dead` jobs.
    pub dead: u64,
}

impl PurgedJobs {
    /// `delivered` and `cancelled` together.
    pub fn finished(&self) -> u64 {
        self.delivered + self.cancelled
    }

    /// Every purged job.
    pub fn total(&self) -> u64 {
        self.finished() + self.dead
    }

    /// Counts one purged job in `state`; other states are not purgeable and ignored.
    pub fn add(&mut self, state: JobState) {
        match state {
            JobState::Delivered => self.delivered += 1,
            JobState::Cancelled => self.cancelled += 1,
            JobState::Dead => self.dead += 1,
            _ => {}
        }
    }
}
