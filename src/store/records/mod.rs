//! What the store reads and writes, one subject per file; every record is re-exported
//! here and from [`crate::store`].

mod attempts;
mod audit;
mod claims;
mod dead_letters;
mod deletions;
mod destinations;
mod events;
mod figures;
mod health;
mod instances;
mod jobs;
mod listing;
mod maintenance;
mod outcomes;
mod replays;
mod schedules;
mod subscribers;
mod sweep;
mod throughput;

pub use attempts::{Attempt, RecentAttempt};
pub use audit::{AuditEntry, AuditFilter, AuditSettlement, NewAuditEntry};
pub use claims::{ClaimRequest, ClaimedJob, LeaseRef};
pub use dead_letters::{DeadLetterCause, DeadLetterGroup, DeadLetters};
pub use deletions::{HistoryMoved, SubscriberDeleted};
pub use destinations::{CircuitView, DestinationError, DestinationPut, DestinationView};
pub use events::{AffectedEvent, EventJob, EventJobs};
pub use figures::{AttemptFailure, JobCounts, StoreGauges, SubscriberStats};
pub use health::{DEAD_WINDOW_MS, HealthCursor, HealthFigures, SubscriberHealth};
pub use instances::{Heartbeat, InstanceSeen};
pub use jobs::{CreateOutcome, Job, JobVersion, LastError, LeaseInfo, NewJob};
pub use listing::{JobFilter, PageRequest, uuid_v7_floor};
pub use maintenance::PurgedJobs;
pub use outcomes::{AttemptResult, Fenced, OutcomeRecord};
pub use replays::{MAX_REPLAY_JOBS, NewReplay, Replay, ReplayProgress};
pub use schedules::{
    PeriodFence, Schedule, ScheduleAdvance, ScheduleDefinition, SchedulePut, ScheduleRun,
    ScheduleSeen, ScheduleTarget, ScheduleTiming,
};
pub use subscribers::{
    DEFAULT_MAX_IN_FLIGHT, PauseSelection, PausedReason, PutSubscriberOutcome, ResumeSelection,
    SecretRotated, SecretRotation, Subscriber, SubscriberPatch, SubscriberPut,
};
pub use sweep::ExpiredJobs;
pub use throughput::{MINUTE_MS, MinuteCounts};
