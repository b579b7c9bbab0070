//! Pure types and rules of deferhook: no I/O, the clock injected (docs/DESIGN.md §2–§4).

pub mod attempt;
pub mod audit;
pub mod circuit;
pub mod clock_offset;
pub mod destination;
pub mod destination_state;
pub mod endpoint;
pub mod event_type;
pub mod field_error;
pub mod health;
pub mod ids;
pub mod job;
pub mod job_template;
pub mod names;
pub mod payload;
pub mod policy;
pub mod recurrence;
pub mod recurring;
pub mod replay;
pub mod replay_plan;
pub mod retry_advice;
pub mod schedule;
pub mod schedule_quota;
pub mod secret;
pub mod target;
pub mod time;
pub mod tombstone;
pub mod triage;
pub mod validate;
pub mod waiting;

pub use clock_offset::OffsetClock;
pub use job::{DeadReason, JobEvent, JobSnapshot, JobState, Transition, TransitionError};
pub use time::{Clock, ManualClock, SteadyClock, SystemClock, Timestamp};
