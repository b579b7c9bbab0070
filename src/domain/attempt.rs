//! Attempt outcomes: what one HTTP request for a job came to (DESIGN §5).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::job::UnknownName;

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

impl AttemptOutcome {
    /// Every outcome.
    pub const ALL: [AttemptOutcome; 6] = [
        AttemptOutcome::InProgress,
        AttemptOutcome::Delivered,
        AttemptOutcome::Retryable,
        AttemptOutcome::Terminal,
        AttemptOutcome::Unknown,
        AttemptOutcome::Blocked,
    ];

    /// The wire and database spelling (`in_progress`).
    pub const fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::InProgress => "in_progress",
            AttemptOutcome::Delivered => "delivered",
            AttemptOutcome::Retryable => "retryable",
            AttemptOutcome::Terminal => "terminal",
            AttemptOutcome::Unknown => "unknown",
            AttemptOutcome::Blocked => "blocked",
        }
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AttemptOutcome {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AttemptOutcome::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == s)
            .ok_or_else(|| UnknownName(s.to_owned()))
    }
}

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
