//! The instances' heartbeats: which instances are running, and how busy their workers
//! are (docs/DESIGN.md §5.12).

use crate::domain::Timestamp;

/// What an instance records of itself every few seconds (its heartbeat).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The instance's id: its worker's lease owner (`host:pid:random`), so that a
    /// job's lease names its instance.
    pub id: String,
    /// The deferhook version it runs (`CARGO_PKG_VERSION`).
    pub version: String,
    /// When it started.
    pub started_at: Timestamp,
    /// Its worker's slots (most attempts at once); 0 without a worker.
    pub worker_slots: u32,
    /// The slots held by running attempts when it recorded this.
    pub slots_in_use: u32,
}

/// An instance as its latest heartbeat left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSeen {
    /// Its heartbeat.
    pub heartbeat: Heartbeat,
    /// When it recorded that heartbeat (its clock).
    pub seen_at: Timestamp,
}
