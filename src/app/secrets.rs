//! Rotating a subscriber's signing secret: a new secret, shown once, while the
//! replaced one keeps signing alongside for a grace period (docs/DESIGN.md §4, §5;
//! Standard Webhooks: receivers accept any one of the space-separated signatures), as
//! the API's `POST /v1/subscribers/{subscriber_id}/secret/rotate` and the console's
//! subscriber page do it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::error::AppError;
use crate::domain::Timestamp;
use crate::domain::field_error::FieldError;
use crate::domain::secret::SigningSecret;
use crate::store::SecretRotation;

/// Longest grace period, in seconds (7 days).
pub const MAX_GRACE_SECONDS: i64 = 604_800;

/// A rotation of a subscriber's signing secret.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateSecretRequest {
    /// How long the replaced secret keeps signing next to the new one, in seconds:
    /// 0–604800 (7 days). 0 drops it at once.
    #[schema(minimum = 0, maximum = 604800)]
    pub grace_seconds: i64,
    /// The new secret, `whsec_<base64 of 24–64 bytes>`, padded or not; generated (32
    /// random bytes) when absent.
    #[schema(schema_with = crate::domain::secret::schema)]
    pub secret: Option<String>,
}

// By hand, so that `secret` never shows in a log or a panic.
impl std::fmt::Debug for RotateSecretRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RotateSecretRequest")
            .field("grace_seconds", &self.grace_seconds)
            .field("secret", &self.secret.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

/// The new secret: the only response that shows it.
#[derive(Serialize, ToSchema)]
pub struct SecretRotatedView {
    /// The subscriber's id.
    pub subscriber_id: String,
    /// The new `whsec_…` secret: shown only in this response. Every request is signed
    /// with it from now on.
    pub secret: String,
    /// Until when (exclusive, RFC 3339) the replaced secret also signs every request
    /// (`now + grace_seconds`); `null` when `grace_seconds` is 0. Only one previous
    /// secret is kept: rotating again during the grace period replaces it with the
    /// secret that was current.
    pub previous_secret_expires_at: Option<Timestamp>,
}

impl std::fmt::Debug for SecretRotatedView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretRotatedView")
            .field("subscriber_id", &self.subscriber_id)
            .field("secret", &"[redacted]")
            .field(
                "previous_secret_expires_at",
                &self.previous_secret_expires_at,
            )
            .finish()
    }
}

/// The grace in milliseconds and the new secret, or 422 naming each bad field.
fn validate(body: &RotateSecretRequest) -> Result<(u64, SigningSecret), AppError> {
    let mut errors = Vec::new();
    let grace_ms = match u64::try_from(body.grace_seconds) {
        Ok(seconds) if body.grace_seconds <= MAX_GRACE_SECONDS => seconds * 1000,
        _ => {
            errors.push(FieldError::new(
                "grace_seconds",
                format!("must be from 0 to {MAX_GRACE_SECONDS} (7 days)"),
            ));
            0
        }
    };
    let secret = match body.secret.as_deref().map(SigningSecret::parse) {
        None => Some(SigningSecret::generate()),
        Some(Ok(secret)) => Some(secret),
        Some(Err(e)) => {
            errors.push(FieldError::new("secret", e.to_string()));
            None
        }
    };
    match secret {
        Some(secret) if errors.is_empty() => Ok((grace_ms, secret)),
        _ => Err(AppError::Invalid(errors)),
    }
}

/// Rotates subscriber `id`'s signing secret as `body` says (422 naming each bad
/// field; 404 when there is no such subscriber): the new secret signs from now on, the
/// replaced one alongside it for the grace period. The answer is the only place the
/// new secret is shown.
pub async fn rotate(
    state: &AppState,
    id: &str,
    body: RotateSecretRequest,
) -> Result<SecretRotatedView, AppError> {
    let (grace_ms, secret) = validate(&body)?;
    let rotation = SecretRotation {
        subscriber_id: id.to_owned(),
        secret: secret.clone(),
        grace_ms,
    };
    let rotated = state
        .store
        .rotate_secret(rotation, state.clock.now())
        .await?
        .ok_or_else(|| AppError::NotFound(format!("subscriber `{id}` does not exist")))?;
    tracing::info!(subscriber_id = %id, grace_seconds = body.grace_seconds,
        "signing secret rotated");
    Ok(SecretRotatedView {
        subscriber_id: rotated.subscriber.id,
        secret: secret.expose().to_owned(),
        previous_secret_expires_at: rotated.previous_secret_expires_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(grace_seconds: i64, secret: Option<&str>) -> RotateSecretRequest {
        RotateSecretRequest {
            grace_seconds,
            secret: secret.map(str::to_owned),
        }
    }

    fn fields(error: AppError) -> Vec<String> {
        match error {
            AppError::Invalid(errors) => errors.into_iter().map(|e| e.field).collect(),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn grace_is_from_0_to_7_days() {
        assert_eq!(validate(&request(0, None)).unwrap().0, 0);
        assert_eq!(
            validate(&request(MAX_GRACE_SECONDS, None)).unwrap().0,
            604_800_000
        );
        for bad in [-1, MAX_GRACE_SECONDS + 1, i64::MIN, i64::MAX] {
            assert_eq!(
                fields(validate(&request(bad, None)).unwrap_err()),
                ["grace_seconds"]
            );
        }
    }

    #[test]
    fn a_chosen_secret_is_used_and_a_bad_one_named() {
        let chosen = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let (_, secret) = validate(&request(1, Some(chosen))).unwrap();
        assert_eq!(secret.expose(), chosen);
        let (_, generated) = validate(&request(1, None)).unwrap();
        assert_ne!(generated.expose(), chosen);
        assert_eq!(
            fields(validate(&request(-5, Some("whsec_short"))).unwrap_err()),
            ["grace_seconds", "secret"]
        );
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let view = SecretRotatedView {
            subscriber_id: "s".into(),
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            previous_secret_expires_at: None,
        };
        assert!(!format!("{view:?}").contains("whsec_"));
        let request = request(5, Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
        let shown = format!("{request:?}");
        assert!(
            !shown.contains("whsec_") && shown.contains("[redacted]"),
            "{shown}"
        );
    }
}
