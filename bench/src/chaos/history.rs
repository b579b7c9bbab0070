//! What the soak records while it runs, the audit's input: every request the receivers
//! saw, every operation the producer sent with its answer, and every fault with its
//! window. Times are Unix milliseconds on this machine's clock
//! ([`crate::clock::now_ms`]), the clock the servers' timeline shares (one
//! machine; on PostgreSQL the database's clock, which is this machine's).

use serde::Serialize;
use uuid::Uuid;

/// Unix milliseconds on this machine's clock.
pub type Ms = i64;

/// How a subscriber's receiver behaves (one listener, so one destination, per kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiverKind {
    /// 200 at once.
    Fast,
    /// 200 after [`super::plan::SLOW_MS`], inside the attempt timeout.
    Slow,
    /// Half the requests 503 with `Retry-After: 1`, a quarter 500, the rest 200.
    Flaky,
    /// 410 Gone, always (the job dies and the subscriber is paused).
    Gone,
    /// Half the requests: the connection is closed after the request was read, with no
    /// answer (the server resends once on a fresh connection); the rest 200.
    Closing,
    /// A third of the requests: no answer for [`super::plan::HANG_MS`], beyond the
    /// attempt timeout; the rest 200.
    Hanging,
}

impl ReceiverKind {
    /// Every kind, in the order of the receiver's listeners.
    pub const ALL: [ReceiverKind; 6] = [
        ReceiverKind::Fast,
        ReceiverKind::Slow,
        ReceiverKind::Flaky,
        ReceiverKind::Gone,
        ReceiverKind::Closing,
        ReceiverKind::Hanging,
    ];

    /// The kind's name, as in URLs and reports.
    pub fn name(self) -> &'static str {
        match self {
            ReceiverKind::Fast => "fast",
            ReceiverKind::Slow => "slow",
            ReceiverKind::Flaky => "flaky",
            ReceiverKind::Gone => "gone",
            ReceiverKind::Closing => "closing",
            ReceiverKind::Hanging => "hanging",
        }
    }
}

/// How a request ended at the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The receiver answered this status (the handler returned it).
    Answered(u16),
    /// The receiver closed the connection without answering (`Closing`).
    Closed,
    /// The sender went away before the answer (its timeout, a kill): the handler was
    /// dropped.
    Abandoned,
    /// The receiver's outage fault cut the connection.
    Cut,
}

/// One request as a receiver saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    /// The subscriber, from the URL path (`/{subscriber}`).
    pub subscriber: String,
    /// The `webhook-id` header: the job's event id.
    pub webhook_id: String,
    /// The listener's kind.
    pub kind: ReceiverKind,
    /// When the handler started (the request's headers were read).
    pub started_ms: Ms,
    /// When it ended, with how; `None` while still open.
    pub ended: Option<(Ms, Ending)>,
}

impl Request {
    /// Whether the receiver answered 2xx: what a real receiver would have processed.
    pub fn accepted(&self) -> bool {
        matches!(self.ended, Some((_, Ending::Answered(status))) if (200..300).contains(&status))
    }

    /// When it ended, or `open_until` when it had not.
    pub fn ended_ms(&self, open_until: Ms) -> Ms {
        self.ended.map_or(open_until, |(at, _)| at)
    }
}

/// One API request of the producer and its answer.
#[derive(Debug, Clone, Serialize)]
pub struct Op {
    /// What it asked.
    pub kind: OpKind,
    /// The instance it was sent to (index in the fleet).
    pub instance: usize,
    /// When it was sent.
    pub sent_ms: Ms,
    /// When the answer (or the failure) came.
    pub answered_ms: Ms,
    /// The answer.
    pub outcome: OpOutcome,
}

impl Op {
    /// Whether the server acknowledged it with a 2xx.
    pub fn acknowledged(&self) -> bool {
        matches!(self.outcome, OpOutcome::Status { status, .. } if (200..300).contains(&status))
    }
}

/// An answer, or why there was none.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpOutcome {
    /// An HTTP answer; `retry_after` when it carried `Retry-After`.
    Status { status: u16, retry_after: bool },
    /// No answer: connection refused or reset, or the client's timeout (a stopped or
    /// killed instance). The operation may or may not have happened.
    NoAnswer { error: String },
}

/// The producer's operations.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum OpKind {
    /// `POST /v1/jobs`; `job_id` from a 2xx answer.
    Create {
        subscriber: String,
        event_id: String,
        /// `deliver_at` as sent (absent: now).
        deliver_at_ms: Option<Ms>,
        /// `deadline` as sent.
        deadline_ms: Ms,
        max_attempts: Option<u32>,
        job_id: Option<Uuid>,
    },
    /// `POST /v1/events`; `job_ids` from a 2xx answer, in `subscribers` order.
    FanOut {
        event_id: String,
        subscribers: Vec<String>,
        deliver_at_ms: Option<Ms>,
        deadline_ms: Ms,
        job_ids: Vec<Uuid>,
    },
    /// `POST /v1/jobs/{id}/cancel`.
    Cancel { job_id: Uuid },
    /// `PATCH /v1/jobs/{id}` with a new `deliver_at` and `deadline`.
    Reschedule {
        job_id: Uuid,
        deliver_at_ms: Ms,
        deadline_ms: Ms,
    },
    /// `POST /v1/replays` of dead jobs of `subscribers`; `replay_id` from a 2xx answer.
    Replay {
        subscribers: Vec<String>,
        replay_id: Option<Uuid>,
    },
    /// `POST /v1/subscribers/resume` of the paused subscribers `subscribers`.
    Resume { subscribers: Vec<String> },
}

/// The kinds of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// SIGKILL of an instance, restarted after the window.
    Kill,
    /// SIGSTOP of an instance for longer than the lease, then SIGCONT.
    Stop,
    /// SIGTERM of an instance with attempts in flight; restarted once it has exited.
    Term,
    /// The private PostgreSQL cluster stopped (fast) and started again.
    PostgresRestart,
    /// Every receiver listener closed and its open connections cut, then reopened on
    /// the same ports.
    ReceiverDown,
    /// An instance (re)started with its clock skewed by libfaketime (PostgreSQL only:
    /// the instances take the database's clock). The window is the skewed process's
    /// life, until the run ends or it is stopped by another fault.
    Skewed,
}

impl FaultKind {
    /// Every kind, for the report's counts.
    pub const ALL: [FaultKind; 6] = [
        FaultKind::Kill,
        FaultKind::Stop,
        FaultKind::Term,
        FaultKind::PostgresRestart,
        FaultKind::ReceiverDown,
        FaultKind::Skewed,
    ];

    /// The kind's name, as in the printed plan and the report.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "sigkill",
            FaultKind::Stop => "sigstop",
            FaultKind::Term => "sigterm",
            FaultKind::PostgresRestart => "postgres_restart",
            FaultKind::ReceiverDown => "receiver_down",
            FaultKind::Skewed => "skewed_clock",
        }
    }
}

/// A fault as it happened.
#[derive(Debug, Clone, Serialize)]
pub struct FaultWindow {
    pub kind: FaultKind,
    /// The instance it hit (fleet index), for the process faults.
    pub instance: Option<usize>,
    /// That instance's process id when the fault began: the attempts it ran carry it
    /// in their `lease_owner` (`<host>:<pid>:<hex>`).
    pub pid: Option<u32>,
    /// When it began (the signal sent, the cluster stopping, the listeners closed).
    pub start_ms: Ms,
    /// When it ended (SIGCONT sent, the instance answering again, the cluster or the
    /// listeners back).
    pub end_ms: Ms,
}

/// Everything the run recorded, for the audit.
#[derive(Debug, Clone, Default, Serialize)]
pub struct History {
    pub requests: Vec<Request>,
    pub ops: Vec<Op>,
    pub faults: Vec<FaultWindow>,
    /// When the load began and when it stopped.
    pub load_started_ms: Ms,
    pub load_ended_ms: Ms,
}
