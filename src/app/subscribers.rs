//! Registering and changing subscribers (docs/DESIGN.md §5.3): the request bodies,
//! their checks (each invalid field named), and the actions — put, patch, resume —
//! that the API's `/v1/subscribers` routes and the console's subscriber pages run.

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use super::error::AppError;
use super::subscriber_views;
use super::views::SubscriberView;
use super::{AppState, AttemptTimeouts};
use crate::domain::field_error::FieldError;
use crate::domain::secret::SigningSecret;
use crate::domain::target::TargetPolicy;
use crate::domain::{event_type, validate};
use crate::store::{PausedReason, ResumeSelection, StoreError, SubscriberPatch, SubscriberPut};

/// Most `max_in_flight` a subscriber may ask for.
pub const MAX_IN_FLIGHT_LIMIT: u32 = 10_000;

/// Most `rate_limit_per_second` a subscriber may ask for.
pub const MAX_RATE_LIMIT: u32 = 100_000;

/// Creates or updates a subscriber. Fields left out keep their current value on update
/// and take their default on create.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutSubscriberRequest {
    /// Absolute `http(s)` URL, no credentials, no fragment. A literal internal address
    /// (loopback, private, link-local, …) is refused unless the server allows it.
    #[schema(format = "uri", min_length = 1, max_length = 2048)]
    pub url: String,
    /// `whsec_<base64 of 24–64 bytes>`, padded or not; generated on create when absent.
    #[schema(schema_with = crate::domain::secret::schema)]
    pub secret: Option<String>,
    /// Most attempts open at once (1–10000, default 16).
    #[schema(minimum = 1, maximum = 10000)]
    pub max_in_flight: Option<u32>,
    /// Most attempts started per second (1–100000); `null` removes the limit.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 100000)]
    pub rate_limit_per_second: Option<Option<u32>>,
    /// False pauses deliveries to it; true resumes them (default true).
    pub enabled: Option<bool>,
    /// The event types it subscribes to (at most 100, default none): names of 1–128
    /// of A-Z a-z 0-9 . _ : -, or a prefix ending in the wildcard `*`
    /// (`shipment.*`; `*` alone matches every type). `POST /v1/events` with an
    /// `event_type` fans out to every subscriber with a matching pattern.
    #[schema(max_items = 100, example = json!(["shipment.*", "invoice.paid"]))]
    pub event_types: Option<Vec<String>>,
    /// Its own attempt timeout, in milliseconds: from 100 up to the server's maximum
    /// (shorter than `--lease-ms` by a tenth of it, at most 1 s: 29,000 with the default
    /// lease, the document's `maximum`; a longer lease allows more);
    /// `null` or left out on create: the server's `--attempt-timeout-ms`. For a
    /// receiver that is slow by design; each attempt is still cut at the job's
    /// deadline.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>, minimum = 100, maximum = 29000)]
    pub attempt_timeout_ms: Option<Option<u64>>,
}

// By hand, so that `secret` never shows in a log or a panic.
impl std::fmt::Debug for PutSubscriberRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PutSubscriberRequest")
            .field("url", &self.url)
            .field("secret", &self.secret.as_ref().map(|_| "[redacted]"))
            .field("max_in_flight", &self.max_in_flight)
            .field("rate_limit_per_second", &self.rate_limit_per_second)
            .field("enabled", &self.enabled)
            .field("event_types", &self.event_types)
            .field("attempt_timeout_ms", &self.attempt_timeout_ms)
            .finish()
    }
}

/// Changes only the fields given. The secret is not among them: rotate it with
/// `POST /v1/subscribers/{subscriber_id}/secret/rotate` (or give it to PUT).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchSubscriberRequest {
    /// Absolute `http(s)` URL, as for PUT; its destination is derived again.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = String, required = false, format = "uri", min_length = 1, max_length = 2048)]
    pub url: Option<Option<String>>,
    /// Most attempts open at once (1–10000).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = u32, required = false, minimum = 1, maximum = 10000)]
    pub max_in_flight: Option<Option<u32>>,
    /// Most attempts started per second (1–100000); `null` removes the limit.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 100000)]
    pub rate_limit_per_second: Option<Option<u32>>,
    /// False pauses deliveries to it (reason `operator`); true resumes them.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = bool, required = false)]
    pub enabled: Option<Option<bool>>,
    /// The event types it subscribes to, replacing all of them (`[]`: none), as for
    /// PUT.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Vec<String>, required = false, max_items = 100)]
    pub event_types: Option<Option<Vec<String>>>,
    /// Its own attempt timeout, in milliseconds, as for PUT; `null` returns it to the
    /// server's.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>, minimum = 100, maximum = 29000)]
    pub attempt_timeout_ms: Option<Option<u64>>,
}

/// Most subscriber ids one resume names.
pub const MAX_RESUME_IDS: usize = 1000;

/// Which paused subscribers to resume: exactly one of the two selectors.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(min_properties = 1, max_properties = 1)]
pub struct ResumeSubscribersRequest {
    /// 1 to 1000 distinct ids, all registered (else 404 naming the first unknown, and
    /// none is resumed); those not paused are left as they are.
    #[schema(min_items = 1, max_items = 1000, nullable = false)]
    #[serde(default, deserialize_with = "not_null")]
    pub subscriber_ids: Option<Vec<String>>,
    /// Every subscriber paused for this reason: `gone` (its receiver answered 410) or
    /// `operator`.
    #[schema(example = "gone", pattern = "^(gone|operator)$", nullable = false)]
    #[serde(default, deserialize_with = "not_null")]
    pub paused_reason: Option<String>,
}

/// The result of a resume.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResumedSubscribers {
    /// How many paused subscribers it enabled.
    pub resumed: u64,
}

/// Tells a field given as `null` (`Some(None)`) from one left out (`None`).
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// A field that may be left out but not given as `null` (a 422 naming it), for
/// selectors where `null` would read as "not given" although the body names it.
pub fn not_null<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// `url` in its normalised form, or why it is refused (not an absolute `http(s)` URL,
/// or a literal internal address the target policy refuses).
pub(crate) fn check_url(url: &str, targets: &TargetPolicy) -> Result<String, String> {
    let url = validate::subscriber_url(url)?;
    targets.permits_url(&url).map_err(|refusal| {
        format!(
            "{refusal}; deferhook refuses internal targets unless \
             --allow-private-targets or --allow-target-cidr allows them"
        )
    })?;
    Ok(url.to_string())
}

/// Checks an `attempt_timeout_ms` given: from [`AttemptTimeouts::MIN_MS`] to the
/// server's maximum, or `null`.
pub(crate) fn check_attempt_timeout(
    timeout: Option<Option<u64>>,
    timeouts: &AttemptTimeouts,
    errors: &mut Vec<FieldError>,
) {
    if let Some(Some(ms)) = timeout
        && !(AttemptTimeouts::MIN_MS..=timeouts.max_ms).contains(&ms)
    {
        errors.push(FieldError::new(
            "attempt_timeout_ms",
            format!(
                "must be from {} to {} (shorter than the lease, --lease-ms), or null for \
                 the server's {} ms",
                AttemptTimeouts::MIN_MS,
                timeouts.max_ms,
                timeouts.default_ms
            ),
        ));
    }
}

/// Checks the limits given: `max_in_flight` 1–[`MAX_IN_FLIGHT_LIMIT`],
/// `rate_limit_per_second` 1–[`MAX_RATE_LIMIT`] or `null`.
pub(crate) fn check_limits(
    max_in_flight: Option<u32>,
    rate_limit_per_second: Option<Option<u32>>,
    errors: &mut Vec<FieldError>,
) {
    if max_in_flight.is_some_and(|n| !(1..=MAX_IN_FLIGHT_LIMIT).contains(&n)) {
        errors.push(FieldError::new(
            "max_in_flight",
            format!("must be from 1 to {MAX_IN_FLIGHT_LIMIT}"),
        ));
    }
    if let Some(Some(rate)) = rate_limit_per_second
        && !(1..=MAX_RATE_LIMIT).contains(&rate)
    {
        errors.push(FieldError::new(
            "rate_limit_per_second",
            format!("must be from 1 to {MAX_RATE_LIMIT}, or null for no limit"),
        ));
    }
}

/// Checks the request; returns the parsed secret and the URL in its normalised form
/// (what is stored and shown). A URL whose host is a literal address the target policy
/// refuses is invalid; a host name is checked when it is resolved, at each attempt.
pub(crate) fn validate_put(
    id: &str,
    body: &PutSubscriberRequest,
    targets: &TargetPolicy,
    timeouts: &AttemptTimeouts,
) -> Result<(Option<SigningSecret>, String), AppError> {
    let mut errors = Vec::new();
    if let Err(message) = validate::subscriber_id(id) {
        errors.push(FieldError::new("subscriber_id", message));
    }
    let url = match check_url(&body.url, targets) {
        Ok(url) => url,
        Err(message) => {
            errors.push(FieldError::new("url", message));
            String::new()
        }
    };
    let secret = match body.secret.as_deref().map(SigningSecret::parse).transpose() {
        Ok(secret) => secret,
        Err(e) => {
            errors.push(FieldError::new("secret", e.to_string()));
            None
        }
    };
    check_limits(body.max_in_flight, body.rate_limit_per_second, &mut errors);
    check_attempt_timeout(body.attempt_timeout_ms, timeouts, &mut errors);
    if let Some(types) = &body.event_types {
        errors.extend(event_type::pattern_list(types, "event_types"));
    }
    if errors.is_empty() {
        Ok((secret, url))
    } else {
        Err(AppError::Invalid(errors))
    }
}

/// Checks a PATCH body; returns the change to make.
pub(crate) fn validate_patch(
    body: PatchSubscriberRequest,
    targets: &TargetPolicy,
    timeouts: &AttemptTimeouts,
) -> Result<SubscriberPatch, AppError> {
    let mut errors = Vec::new();
    if body.url.is_none()
        && body.max_in_flight.is_none()
        && body.rate_limit_per_second.is_none()
        && body.enabled.is_none()
        && body.event_types.is_none()
        && body.attempt_timeout_ms.is_none()
    {
        return Err(AppError::invalid(
            "body",
            "names no field to change (url, max_in_flight, rate_limit_per_second, enabled, \
             event_types, attempt_timeout_ms)",
        ));
    }
    let mut not_null = |field: &str, given: bool| {
        if given {
            errors.push(FieldError::new(field, "must not be null"));
        }
    };
    not_null("url", matches!(body.url, Some(None)));
    not_null("max_in_flight", matches!(body.max_in_flight, Some(None)));
    not_null("enabled", matches!(body.enabled, Some(None)));
    not_null("event_types", matches!(body.event_types, Some(None)));
    if let Some(Some(types)) = &body.event_types {
        errors.extend(event_type::pattern_list(types, "event_types"));
    }
    let url = body
        .url
        .flatten()
        .and_then(|url| match check_url(&url, targets) {
            Ok(url) => Some(url),
            Err(message) => {
                errors.push(FieldError::new("url", message));
                None
            }
        });
    let max_in_flight = body.max_in_flight.flatten();
    check_limits(max_in_flight, body.rate_limit_per_second, &mut errors);
    check_attempt_timeout(body.attempt_timeout_ms, timeouts, &mut errors);
    if errors.is_empty() {
        Ok(SubscriberPatch {
            url,
            max_in_flight,
            rate_limit_per_second: body.rate_limit_per_second,
            enabled: body.enabled.flatten(),
            event_types: body.event_types.flatten(),
            attempt_timeout_ms: body.attempt_timeout_ms,
        })
    } else {
        Err(AppError::Invalid(errors))
    }
}

/// Checks `subscriber_ids` naming the subscribers of a bulk action: 1 to `max` valid
/// ids, else a 422 naming the field (or each bad id, `subscriber_ids[n]`).
pub(crate) fn named_ids(ids: Vec<String>, max: usize) -> Result<Vec<String>, AppError> {
    if ids.is_empty() || ids.len() > max {
        return Err(AppError::invalid(
            "subscriber_ids",
            format!("names {} subscribers; 1 to {max} per call", ids.len()),
        ));
    }
    let errors = validate::subscriber_id_list(&ids, "subscriber_ids");
    if errors.is_empty() {
        Ok(ids)
    } else {
        Err(AppError::Invalid(errors))
    }
}

/// A bulk action's store error as answered: an unknown subscriber is a 404 naming
/// the first id that is not registered (`subscriber_ids[n]`, its place in `named`)
/// and saying none was `done`; any other error as it is.
pub(crate) fn unknown_named(error: StoreError, named: &[String], done: &str) -> AppError {
    match error {
        StoreError::UnknownSubscriber(id) => {
            let n = named.iter().position(|named| *named == id).unwrap_or(0);
            AppError::UnknownReference(FieldError::new(
                format!("subscriber_ids[{n}]"),
                format!("subscriber `{id}` does not exist; none was {done}"),
            ))
        }
        other => other.into(),
    }
}

/// Checks a resume body; returns its selection.
pub(crate) fn validate_resume(body: ResumeSubscribersRequest) -> Result<ResumeSelection, AppError> {
    match (body.subscriber_ids, body.paused_reason) {
        (Some(ids), None) => named_ids(ids, MAX_RESUME_IDS).map(ResumeSelection::Ids),
        (None, Some(reason)) => PausedReason::parse(&reason)
            .map(ResumeSelection::Reason)
            .ok_or_else(|| AppError::invalid("paused_reason", "must be `gone` or `operator`")),
        _ => Err(AppError::invalid(
            "body",
            "must give exactly one of `subscriber_ids` and `paused_reason`",
        )),
    }
}

/// What [`put`] answers: the subscriber's view (with its signing secret, shown this
/// once, when this call created it) and whether it was created.
#[derive(Debug)]
pub struct PutAnswer {
    /// True when the subscriber did not exist.
    pub created: bool,
    /// The subscriber as written.
    pub view: SubscriberView,
}

/// Registers subscriber `id` or replaces its settings with `body`'s (422 naming each
/// invalid field). A created subscriber without a `secret` gets a generated one; a
/// created subscriber's secret is shown in the answer, this once.
pub async fn put(
    state: &AppState,
    id: &str,
    body: PutSubscriberRequest,
) -> Result<PutAnswer, AppError> {
    let (secret, url) = validate_put(id, &body, &state.target_policy, &state.attempt_timeouts)?;
    let put = SubscriberPut {
        id: id.to_owned(),
        url,
        secret,
        generated_secret: SigningSecret::generate(),
        max_in_flight: body.max_in_flight,
        rate_limit_per_second: body.rate_limit_per_second,
        enabled: body.enabled,
        event_types: body.event_types,
        attempt_timeout_ms: body.attempt_timeout_ms,
    };
    let outcome = state.store.put_subscriber(put, state.clock.now()).await?;
    let mut view = subscriber_views::written_view(state, outcome.subscriber).await;
    let created = outcome.created_secret.is_some();
    if let Some(secret) = outcome.created_secret {
        view.secret = Some(secret.expose().to_owned());
    }
    Ok(PutAnswer { created, view })
}

/// Changes subscriber `id` as `body` says (404 when there is no such subscriber, 422
/// naming each invalid field); enabling it wakes this instance's worker.
pub async fn patch(
    state: &AppState,
    id: &str,
    body: PatchSubscriberRequest,
) -> Result<SubscriberView, AppError> {
    let patch = validate_patch(body, &state.target_policy, &state.attempt_timeouts)?;
    let enables = patch.enabled == Some(true);
    let subscriber = state
        .store
        .patch_subscriber(id, patch, state.clock.now())
        .await?
        .ok_or_else(|| AppError::NotFound(format!("subscriber `{id}` does not exist")))?;
    if enables {
        // Its due jobs may go now: this instance's worker claims at once (the store
        // announces it to the others, docs/DESIGN.md §3.3).
        state.store.wake().now();
    }
    Ok(subscriber_views::written_view(state, subscriber).await)
}

/// Resumes the paused subscribers `body` selects, all or nothing, in one transaction
/// (404 naming the first unknown id, `subscriber_ids[n]`; nothing is written then).
pub async fn resume(
    state: &AppState,
    body: ResumeSubscribersRequest,
) -> Result<ResumedSubscribers, AppError> {
    let selection = validate_resume(body)?;
    let named = match &selection {
        ResumeSelection::Ids(ids) => ids.clone(),
        ResumeSelection::Reason(_) => Vec::new(),
    };
    let resumed = state
        .store
        .resume_subscribers(selection, state.clock.now())
        .await
        .map_err(|error| unknown_named(error, &named, "resumed"))?;
    if resumed > 0 {
        state.store.wake().now();
    }
    Ok(ResumedSubscribers { resumed })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_the_secret() {
        let body = PutSubscriberRequest {
            url: "https://example.com/hooks".into(),
            secret: Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()),
            max_in_flight: None,
            rate_limit_per_second: None,
            enabled: None,
            event_types: None,
            attempt_timeout_ms: None,
        };
        let shown = format!("{body:?}");
        assert!(!shown.contains("MfKQ9r8G"), "{shown}");
        assert!(shown.contains("https://example.com/hooks"), "{shown}");
    }

    #[test]
    fn an_attempt_timeout_is_checked_against_the_lease() {
        // --attempt-timeout-ms 10000, --lease-ms 30000: up to 29,000 ms.
        let timeouts = AttemptTimeouts::new(10_000, 30_000);
        assert_eq!(timeouts.max_ms, 29_000);
        let errors = |ms| {
            let mut errors = Vec::new();
            check_attempt_timeout(Some(ms), &timeouts, &mut errors);
            errors.len()
        };
        assert_eq!(errors(Some(29_000)), 0);
        assert_eq!(errors(Some(100)), 0);
        assert_eq!(errors(None), 0);
        assert_eq!(errors(Some(29_001)), 1);
        assert_eq!(errors(Some(99)), 1);
        assert_eq!(errors(Some(0)), 1);
        // A short lease: its margin is 10 ms at least; never below the server's own.
        assert_eq!(AttemptTimeouts::new(2_000, 3_000).max_ms, 2_700);
        assert_eq!(AttemptTimeouts::new(2_990, 3_000).max_ms, 2_990);
        assert_eq!(timeouts.of(None), 10_000);
        assert_eq!(timeouts.of(Some(7_000)), 7_000);
    }
}
