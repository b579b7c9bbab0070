//! Recurring schedules as the store keeps them (docs/DESIGN.md §5.14): what the
//! producer defined, and how far the scheduler has come.

use uuid::Uuid;

use crate::domain::Timestamp;
use crate::domain::recurring::CatchUp;

/// Whom a schedule's periods are delivered to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleTarget {
    /// This subscriber.
    Subscriber(String),
    /// Every subscriber (enabled or paused) whose event types match this one when the
    /// period's jobs are created.
    EventType(String),
}

/// When a schedule's periods start, as given (checked by
/// [`crate::domain::recurrence::Recurrence`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleTiming {
    /// The occurrences of a cron pattern in an IANA time zone.
    Cron {
        /// 5 fields, or 6 with seconds first.
        cron: String,
        /// IANA name.
        time_zone: String,
    },
    /// `anchor + k × every_ms` for every integer `k`.
    Every {
        /// Milliseconds between periods, at least 1,000.
        every_ms: u64,
        /// One period's start: the schedule's creation, or the anchor given.
        anchor: Timestamp,
    },
}

/// A schedule as its producer defines it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleDefinition {
    /// The producer's id for it (the rules of subscriber ids).
    pub id: String,
    /// Whom its periods go to.
    pub target: ScheduleTarget,
    /// When its periods start.
    pub timing: ScheduleTiming,
    /// The event id template, with `{period_start}` at least once.
    pub event_id: String,
    /// The payload of every period's job, exactly as given (valid JSON text).
    pub payload: String,
    /// Each job's deadline after its `deliver_at`, in milliseconds; `None`: the
    /// server's default.
    pub ttl_ms: Option<u64>,
    /// Each job's most attempts; `None`: only the deadline bounds them.
    pub max_attempts: Option<u32>,
    /// What becomes of missed periods.
    pub catch_up: CatchUp,
    /// False: no period is created (a manual run still is).
    pub enabled: bool,
}

/// The jobs created for one period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleRun {
    /// The period's start.
    pub period: Timestamp,
    /// Its event id (the template filled).
    pub event_id: String,
    /// One of its jobs (the first subscriber's); `None` when no subscriber matched.
    pub job_id: Option<Uuid>,
    /// How many jobs it has (created or already there).
    pub jobs: u32,
}

/// A stored schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// As defined.
    pub definition: ScheduleDefinition,
    /// When it was created.
    pub created_at: Timestamp,
    /// When its definition last changed.
    pub updated_at: Timestamp,
    /// The start of the earliest period whose jobs are not created yet; `None` when no
    /// period follows.
    pub next_period: Option<Timestamp>,
    /// How many times a put restarted the cursor (a new timing, a resume).
    pub cursor_version: u64,
    /// The last period whose jobs were created.
    pub last_run: Option<ScheduleRun>,
    /// Why the last period reached created no job (its subscriber does not exist,
    /// more subscribers match than a fan-out takes); cleared by a period that does.
    pub last_error: Option<String>,
}

/// What the scheduler read of a schedule's cursor, for a conditional write: a put that
/// restarted the cursor, or another instance's pass, moved it since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleSeen {
    /// `cursor_version` as read.
    pub cursor_version: u64,
    /// `next_period` as read.
    pub next_period: Option<Timestamp>,
}

impl Schedule {
    /// What a conditional write checks.
    pub fn seen(&self) -> ScheduleSeen {
        ScheduleSeen {
            cursor_version: self.cursor_version,
            next_period: self.next_period,
        }
    }
}

/// The fence of one period's write ([`crate::store::Store::make_schedule_period`]): the
/// period's jobs are written, and the cursor moved past it, only while the schedule
/// is as the scheduler read it and still held by it (issue #34 item 5.3: an instance
/// frozen while it wrote a period made it after another had counted it skipped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeriodFence {
    /// The schedule.
    pub schedule_id: String,
    /// Its cursor and version as the scheduler read them (its own writes included).
    pub seen: ScheduleSeen,
    /// The end of the scheduler's hold as it took it (`leased_until`): a hold another
    /// scheduler took since ends later, one ended by a put is gone.
    pub held_until: Timestamp,
    /// The cursor once the period is made: the start of the period after it; `None`
    /// when none follows.
    pub next_period: Option<Timestamp>,
}

/// What one pass of the scheduler did for a schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleAdvance {
    /// The cursor afterwards.
    pub next_period: Option<Timestamp>,
    /// The last period whose jobs were created in this pass; `None` keeps the one
    /// stored.
    pub run: Option<ScheduleRun>,
    /// Why a period created no job; `None` clears it when `run` is given, else keeps it.
    pub error: Option<String>,
}

/// A producer's put of a schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulePut {
    /// The definition as it is to be stored.
    pub definition: ScheduleDefinition,
    /// The cursor if the put creates the schedule or restarts its periods: the first
    /// period after now.
    pub next_period: Option<Timestamp>,
    /// Whether the put gave `enabled` (else the stored value stays, whatever
    /// `definition.enabled` says).
    pub enabled_given: bool,
    /// Most schedules that may exist: a put that would create one more writes nothing
    /// ([`crate::store::StoreError::TooManySchedules`]); one that replaces a schedule is
    /// never refused.
    pub max_schedules: u64,
}
