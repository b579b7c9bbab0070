//! Attempt outcomes: what one HTTP request for a job came to (docs/DESIGN.md §5).

use serde::Serialize;

use super::names::wire_names;

/// The outcome of one attempt, as recorded on its attempt row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Persisted before the request left; no result yet.
    InProgress,
    /// The receiver answered 2xx.
    Delivered,
    /// A failure worth retrying (408, 425, 429, 5xx, timeout, connect error).
    Retryable,
    /// A failure not worth retrying (3xx, other 4xx).
    Terminal,
    /// The lease was lost or released at shutdown before a result was recorded; the
    /// receiver may or may not have the event.
    Unknown,
    /// Refused before connecting (e.g. the SSRF policy).
    Blocked,
}

wire_names!(AttemptOutcome, "Every outcome." {
    InProgress => "in_progress",
    Delivered => "delivered",
    Retryable => "retryable",
    Terminal => "terminal",
    Unknown => "unknown",
    Blocked => "blocked",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for outcome in AttemptOutcome::ALL {
            assert_eq!(outcome.as_str().parse::<AttemptOutcome>(), Ok(outcome));
        }
        assert!("lost".parse::<AttemptOutcome>().is_err());
    }
}
