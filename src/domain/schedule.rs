//! When a new job is first delivered and when it gives up (docs/DESIGN.md §5): `deliver_at`
//! or `delay_ms` (neither: now), and `deadline` or `ttl_ms` (neither: `deliver_at` +
//! the server's default TTL). A past `deliver_at` means now; the deadline must come
//! after `deliver_at`, and a deadline counted from `deliver_at` must fit before
//! [`Timestamp::MAX`] rather than be cut short there. Also how `PATCH /v1/jobs/{id}`
//! moves a scheduled job ([`Schedule::moved`]). Pure: `now` and the default TTL are given.

use super::Timestamp;
use super::field_error::FieldError;

/// The scheduling fields of a new job, as received (texts not yet parsed).
#[derive(Debug, Clone, Copy, Default)]
pub struct ScheduleFields<'a> {
    /// `deliver_at`: RFC 3339 with an offset.
    pub deliver_at: Option<&'a str>,
    /// `delay_ms`: milliseconds from now until delivery.
    pub delay_ms: Option<u64>,
    /// `deadline`: RFC 3339 with an offset.
    pub deadline: Option<&'a str>,
    /// `ttl_ms`: milliseconds from `deliver_at` until the deadline.
    pub ttl_ms: Option<u64>,
}

/// A checked schedule: `deliver_at` is at or after the `now` it was checked at, and
/// `deadline` is after `deliver_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// When the job first becomes eligible.
    pub deliver_at: Timestamp,
    /// After it no attempt starts.
    pub deadline: Timestamp,
}

impl Schedule {
    /// Reads `fields` at `now`, with `default_ttl_ms` as the TTL when neither
    /// `deadline` nor `ttl_ms` is given. Fails with every invalid field (at most two:
    /// one about when to deliver, one about the deadline; an invalid `deliver_at`
    /// is taken as now to check the deadline).
    pub fn check(
        fields: ScheduleFields<'_>,
        now: Timestamp,
        default_ttl_ms: u64,
    ) -> Result<Schedule, Vec<FieldError>> {
        let mut errors = Vec::new();
        let deliver_at = deliver_at(fields, now).unwrap_or_else(|error| {
            errors.push(error);
            now
        });
        let deadline = deadline(fields, deliver_at, default_ttl_ms).unwrap_or_else(|error| {
            errors.push(error);
            deliver_at
        });
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Schedule {
            deliver_at,
            deadline,
        })
    }
}

fn deliver_at(fields: ScheduleFields<'_>, now: Timestamp) -> Result<Timestamp, FieldError> {
    match (fields.deliver_at, fields.delay_ms) {
        (Some(_), Some(_)) => Err(FieldError::new(
            "delay_ms",
            "give deliver_at or delay_ms, not both",
        )),
        (Some(text), None) => Timestamp::parse_rfc3339(text)
            .map(|at| at.max(now))
            .map_err(|e| FieldError::new("deliver_at", e.to_string())),
        (None, Some(delay)) => Ok(now.plus_ms(delay)),
        (None, None) => Ok(now),
    }
}

fn deadline(
    fields: ScheduleFields<'_>,
    deliver_at: Timestamp,
    default_ttl_ms: u64,
) -> Result<Timestamp, FieldError> {
    match (fields.deadline, fields.ttl_ms) {
        (Some(_), Some(_)) => Err(FieldError::new(
            "ttl_ms",
            "give deadline or ttl_ms, not both",
        )),
        (Some(text), None) => Timestamp::parse_rfc3339(text)
            .map_err(|e| FieldError::new("deadline", e.to_string()))
            .and_then(|deadline| after(deadline, deliver_at, "deadline")),
        (None, Some(ttl)) => counted_from(deliver_at, ttl, "ttl_ms", "ttl_ms"),
        // At the end of time no deadline after deliver_at exists: the field that chose
        // deliver_at is at fault. Short of it, an explicit deadline can fix it.
        (None, None) if deliver_at >= Timestamp::MAX => after(
            Timestamp::MAX,
            deliver_at,
            if fields.delay_ms.is_some() {
                "delay_ms"
            } else {
                "deliver_at"
            },
        ),
        (None, None) => counted_from(deliver_at, default_ttl_ms, "the default TTL", "deadline"),
    }
}

/// `deliver_at + ttl_ms`, refused (naming `field`) when it would pass
/// [`Timestamp::MAX`]: [`Timestamp::plus_ms`] clamps there, and a deadline silently cut
/// to a few milliseconds after `deliver_at` would dead-letter the job unnoticed.
fn counted_from(
    deliver_at: Timestamp,
    ttl_ms: u64,
    what: &str,
    field: &str,
) -> Result<Timestamp, FieldError> {
    let deadline = deliver_at.plus_ms(ttl_ms);
    if deadline.millis_since(deliver_at) == i64::try_from(ttl_ms).unwrap_or(i64::MAX) {
        return after(deadline, deliver_at, field);
    }
    Err(FieldError::new(
        field,
        format!(
            "deliver_at ({}) plus {what} ({ttl_ms} ms) is past {}, the last instant the API \
             can express; give an explicit deadline",
            deliver_at.to_rfc3339(),
            Timestamp::MAX.to_rfc3339()
        ),
    ))
}

impl Schedule {
    /// The schedule of a scheduled job after `PATCH /v1/jobs/{id}`: `deliver_at`
    /// and/or `deadline` replace the current ones (a past `deliver_at` means now).
    ///
    /// # Errors
    /// When the deadline would not be after `deliver_at`, one [`FieldError`] naming the
    /// field the request can fix: `deadline` when the request gave one, else
    /// `deliver_at` (it was moved to or past the job's current deadline).
    pub fn moved(
        self,
        deliver_at: Option<Timestamp>,
        deadline: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Schedule, FieldError> {
        let new_deliver_at = deliver_at.unwrap_or(self.deliver_at).max(now);
        let new_deadline = deadline.unwrap_or(self.deadline);
        if new_deadline > new_deliver_at {
            return Ok(Schedule {
                deliver_at: new_deliver_at,
                deadline: new_deadline,
            });
        }
        Err(match deadline {
            Some(_) => FieldError::new(
                "deadline",
                format!("must be after deliver_at ({})", new_deliver_at.to_rfc3339()),
            ),
            None => FieldError::new(
                "deliver_at",
                format!(
                    "must be before the job's deadline ({}); to move both, give a later \
                     deadline in the same request",
                    self.deadline.to_rfc3339()
                ),
            ),
        })
    }
}

fn after(deadline: Timestamp, deliver_at: Timestamp, field: &str) -> Result<Timestamp, FieldError> {
    if deadline > deliver_at {
        Ok(deadline)
    } else {
        Err(FieldError::new(
            field,
            format!(
                "the deadline must be after deliver_at ({})",
                deliver_at.to_rfc3339()
            ),
        ))
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
