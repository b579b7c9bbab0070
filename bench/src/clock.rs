//! Wall-clock milliseconds since the Unix epoch, the unit the server's timestamps and
//! the receiver's arrival times share.

use std::time::{SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// An RFC 3339 timestamp as the API writes it, in Unix milliseconds.
pub fn parse_ms(text: &str) -> anyhow::Result<i64> {
    let at = OffsetDateTime::parse(text, &Rfc3339)?;
    Ok((at.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// Unix milliseconds as RFC 3339 (UTC), for `deliver_at`.
pub fn format_ms(ms: i64) -> anyhow::Result<String> {
    let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)?;
    Ok(at.format(&Rfc3339)?)
}
