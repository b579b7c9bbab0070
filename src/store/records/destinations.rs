//! Destinations as the store reads and writes them (docs/DESIGN.md §15).

use crate::domain::Timestamp;
use crate::domain::circuit::{CircuitState, ForcedCircuit};
use crate::domain::policy::ErrorClass;

/// One destination (`host:port`) with its figures at the instant read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DestinationView {
    /// `host:port` (see [`crate::domain::destination::Destination`]).
    pub key: String,
    /// Subscribers whose URL sends here.
    pub subscribers: u64,
    /// Requests open to it now (live leases, all instances).
    pub in_flight: u64,
    /// The limit in force: the operator's, or the default.
    pub max_in_flight: u32,
    /// Whether an operator set the limit (`false`: `--destination-max-in-flight`).
    pub max_in_flight_set: bool,
    /// Paused by an operator.
    pub paused: bool,
    /// The circuit as it stands at the instant read.
    pub circuit: CircuitView,
    /// The latest attempt that said the host is unwell.
    pub last_error: Option<DestinationError>,
    /// When it was first seen (its first subscriber).
    pub created_at: Timestamp,
    /// When an operator or the breaker last changed it.
    pub updated_at: Timestamp,
}

/// A destination's circuit breaker, as shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CircuitView {
    /// Closed, open or half-open (an open circuit whose cool-down has ended shows
    /// half-open; an override shows as what it forces).
    pub state: CircuitState,
    /// The operator's override, if any.
    pub forced: Option<ForcedCircuit>,
    /// Consecutive attempts that said the host is unwell.
    pub consecutive_failures: u32,
    /// When it last opened.
    pub opened_at: Option<Timestamp>,
    /// Open: when the probe may go; half-open with a probe out: when its lease ends.
    pub retry_at: Option<Timestamp>,
    /// The current cool-down in milliseconds (0 while closed).
    pub cooldown_ms: u64,
}

/// The latest host failure at a destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DestinationError {
    /// When the attempt ended.
    pub at: Timestamp,
    /// `connect`, `timeout` or `http_5xx` (502, 503, 504).
    pub class: ErrorClass,
    /// The HTTP status, when there was one.
    pub status: Option<u16>,
    /// A short account.
    pub reason: Option<String>,
}

/// An operator's change to a destination; `None` fields stay as they are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DestinationPut {
    /// `Some(Some(n))` sets its own limit; `Some(None)` returns it to the default.
    pub max_in_flight: Option<Option<u32>>,
    /// Pause (`true`) or resume (`false`).
    pub paused: Option<bool>,
    /// `Some(Some(forced))` holds the circuit open or closed; `Some(None)` returns it
    /// to automatic, closed with no failures counted.
    pub circuit: Option<Option<ForcedCircuit>>,
}
