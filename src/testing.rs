//! What every test of deferhook shares: the one instant tests start their clocks at.
//!
//! Unit tests, the store suite and the black-box tests all begin at [`START`], so a
//! time in one test reads the same in another (and in the contract's examples).

use crate::domain::Timestamp;

/// The instant every test's clock starts at: 2026-11-30T12:00:00Z, in epoch
/// milliseconds.
pub const START: Timestamp = Timestamp::from_millis(1_796_040_000_000);

/// [`START`] as the API writes it (RFC 3339, UTC, milliseconds).
pub const START_TEXT: &str = "2026-11-30T12:00:00.000Z";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_instant() {
        assert_eq!(START.to_rfc3339(), START_TEXT);
    }
}
