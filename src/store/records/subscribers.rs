//! Subscribers as the store reads and writes them, and rotations of their secrets.

use crate::domain::Timestamp;
use crate::domain::secret::SigningSecret;

/// A registered receiver. Its secret is not part of it: only the delivery path reads
/// secrets (see [`ClaimedJob::secrets`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscriber {
    /// The operator's id for it (see `domain::validate::subscriber_id`).
    pub id: String,
    /// Where its webhooks are POSTed.
    pub url: String,
    /// Most attempts open at once for it across all instances.
    pub max_in_flight: u32,
    /// Most attempts started per second for it; `None`: no limit.
    pub rate_limit_per_second: Option<u32>,
    /// False while paused; its jobs wait (deadlines still run).
    pub enabled: bool,
    /// When it was registered.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// Why it is paused (`None` while enabled, or paused before the reason was kept).
    pub paused_reason: Option<PausedReason>,
    /// When it was paused (`None` while enabled).
    pub paused_at: Option<Timestamp>,
    /// The event types it subscribes to (docs/DESIGN.md §5.13): names, or prefixes
    /// ending in `*`; empty: none.
    pub event_types: Vec<String>,
    /// Its own attempt timeout, in milliseconds; `None`: the server's
    /// `--attempt-timeout-ms`.
    pub attempt_timeout_ms: Option<u64>,
}

/// Why a subscriber is paused (docs/DESIGN.md §5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausedReason {
    /// Its receiver answered `410 Gone` (Standard Webhooks: the endpoint is gone).
    Gone,
    /// An operator set `enabled: false`.
    Operator,
}

impl PausedReason {
    /// As stored and shown: `gone`, `operator`.
    pub fn as_str(self) -> &'static str {
        match self {
            PausedReason::Gone => "gone",
            PausedReason::Operator => "operator",
        }
    }

    /// The reason stored as `text`, or `None` for another text.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "gone" => Some(PausedReason::Gone),
            "operator" => Some(PausedReason::Operator),
            _ => None,
        }
    }
}

/// A partial update of a subscriber: only the fields given (`Some`) change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscriberPatch {
    /// A new URL (normalised); its destination is derived again.
    pub url: Option<String>,
    /// A new `max_in_flight`.
    pub max_in_flight: Option<u32>,
    /// `Some(None)` removes the rate limit; `None` keeps it.
    pub rate_limit_per_second: Option<Option<u32>>,
    /// `false` pauses it (reason `operator`), `true` resumes it.
    pub enabled: Option<bool>,
    /// New event types (replacing all of them; empty: none).
    pub event_types: Option<Vec<String>>,
    /// `Some(None)` returns it to the server's attempt timeout; `None` keeps it.
    pub attempt_timeout_ms: Option<Option<u64>>,
}

/// Which paused subscribers a resume enables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResumeSelection {
    /// These (all must exist; the ones not paused are left as they are).
    Ids(Vec<String>),
    /// Every subscriber paused for this reason.
    Reason(PausedReason),
}

/// Which subscribers a bulk pause disables (reason `operator`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PauseSelection {
    /// These, named by the caller: all must exist (else nothing is written); those
    /// already paused are left as they are.
    Ids(Vec<String>),
    /// These, matched by a filter a moment before: one deleted since is skipped.
    Matched(Vec<String>),
}

/// Default `max_in_flight` of a subscriber (docs/DESIGN.md §3).
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 16;

/// A create-or-update of a subscriber. Fields left `None` keep their current value on
/// update and take their default on create.
#[derive(Clone, Debug)]
pub struct SubscriberPut {
    /// Which subscriber.
    pub id: String,
    /// The new URL (always given).
    pub url: String,
    /// A secret chosen by the caller; on create, `generated_secret` is used without it.
    /// On update it replaces the current secret at once and ends a rotation's grace
    /// period (the previous secret is dropped); use
    /// [`crate::store::Store::rotate_secret`] for a grace period.
    pub secret: Option<SigningSecret>,
    /// The secret to use if the subscriber is created and `secret` is `None`.
    pub generated_secret: SigningSecret,
    /// New `max_in_flight`.
    pub max_in_flight: Option<u32>,
    /// `Some(None)` removes the rate limit; `None` keeps it.
    pub rate_limit_per_second: Option<Option<u32>>,
    /// New `enabled`.
    pub enabled: Option<bool>,
    /// New event types (replacing all of them; empty: none).
    pub event_types: Option<Vec<String>>,
    /// `Some(None)` returns it to the server's attempt timeout; `None` keeps it.
    pub attempt_timeout_ms: Option<Option<u64>>,
}

/// The result of [`crate::store::Store::put_subscriber`].
#[derive(Clone, Debug)]
pub struct PutSubscriberOutcome {
    /// The subscriber as stored.
    pub subscriber: Subscriber,
    /// `Some(secret)` only when this call created it: the one time a secret is shown.
    pub created_secret: Option<SigningSecret>,
}

/// A rotation of a subscriber's signing secret
/// ([`crate::store::Store::rotate_secret`]).
#[derive(Clone, Debug)]
pub struct SecretRotation {
    /// Whose secret.
    pub subscriber_id: String,
    /// The new current secret.
    pub secret: SigningSecret,
    /// How long the secret it replaces keeps signing alongside, in milliseconds; `0`
    /// drops it at once.
    pub grace_ms: u64,
}

/// The result of a rotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRotated {
    /// The subscriber after the rotation (`updated_at` is the rotation's `now`).
    pub subscriber: Subscriber,
    /// When the replaced secret stops signing (`now + grace`); `None` with no grace.
    pub previous_secret_expires_at: Option<Timestamp>,
}
