//! The audit trail of operator actions (docs/DESIGN.md §5.11).

use uuid::Uuid;

use crate::domain::Timestamp;

/// An operator action to record: what was done to what, by whom, with which
/// parameters (never a secret: the caller has removed them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAuditEntry {
    /// The entry's id: a UUIDv7 stamped `at` (listings sort by it).
    pub id: Uuid,
    /// When the action was answered (the injected clock); while it is begun, when it
    /// began.
    pub at: Timestamp,
    /// The action's name (e.g. `job.cancel`).
    pub action: String,
    /// What it acted on (a job, subscriber, replay id or destination key); `None` for
    /// an action on a selection (a resume).
    pub target: Option<String>,
    /// The request's parameters as JSON text, secrets removed; `None` without a body.
    pub parameters: Option<String>,
    /// The API token's fingerprint (`sha256:` + 16 hex digits); `None` when the API
    /// runs without tokens.
    pub actor: Option<String>,
    /// The HTTP status the action was answered with (2xx; a 5xx when the server failed
    /// after the action began, so it may have taken effect); `None` while it is begun
    /// and not answered: an entry is written before its action runs and settled with
    /// its answer ([`AuditSettlement`]), so one left `None` is an action whose server
    /// stopped between the two (docs/DESIGN.md §5.11).
    pub status: Option<u16>,
    /// The request's id (`x-request-id`): the client's when it sent an acceptable one,
    /// else the server's; `None` only for an entry written without either.
    pub request_id: Option<String>,
    /// The server's own id of the request (`x-server-request-id`, never the client's;
    /// docs/DESIGN.md §5.1); `None` for entries written before migration 0020.
    pub server_request_id: Option<Uuid>,
}

/// A recorded entry, as listed: the same fields as [`NewAuditEntry`].
pub type AuditEntry = NewAuditEntry;

/// Filters of an audit listing; all given ones must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this action.
    pub action: Option<String>,
    /// Only this target.
    pub target: Option<String>,
}

/// How a begun entry ([`NewAuditEntry::status`] `None`) ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditSettlement {
    /// The action was answered `status` at `at`; `target`, when given, replaces the
    /// entry's (what the action created, known only from its answer).
    Answered {
        /// The HTTP status.
        status: u16,
        /// The target from the answer, if any.
        target: Option<String>,
        /// When it was answered.
        at: Timestamp,
    },
    /// The request was refused before it changed anything (a 4xx, or a replay's dry
    /// run): not an action, so the entry goes.
    Withdrawn,
}
