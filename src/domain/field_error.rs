//! What a rule says about an invalid input: the field it is about and why, so every
//! rule can report all its findings at once and the API can answer them as they are.

use serde::Serialize;
use utoipa::ToSchema;

/// One invalid field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// The field's name or JSON path (`deliver_at`, `payload`, `limit`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Adds the message of a failed check (such as [`super::validate::event_id`]) to
/// `errors` as an error about `field`; a passed check adds nothing.
pub fn collect(errors: &mut Vec<FieldError>, field: &str, check: Result<(), String>) {
    if let Err(message) = check {
        errors.push(FieldError::new(field, message));
    }
}
