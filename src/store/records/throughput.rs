//! Jobs accepted, delivered and dead per minute: the overview's chart.

use crate::domain::Timestamp;

/// Milliseconds in a minute, the width of a [`MinuteCounts`] bucket.
pub const MINUTE_MS: i64 = 60_000;

/// What happened to jobs in one minute, as read now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinuteCounts {
    /// The minute's start (a multiple of [`MINUTE_MS`] since the epoch).
    pub minute: Timestamp,
    /// Jobs created in it (`created_at`).
    pub accepted: u64,
    /// Jobs delivered in it (`delivered_at`).
    pub delivered: u64,
    /// Jobs that went dead in it (`dead_at`) and are dead still: a job replayed since
    /// no longer counts.
    pub dead: u64,
}

impl MinuteCounts {
    /// Minute `minute` with nothing counted yet.
    pub fn empty(minute: Timestamp) -> Self {
        MinuteCounts {
            minute,
            accepted: 0,
            delivered: 0,
            dead: 0,
        }
    }
}
