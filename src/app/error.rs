//! What an operator action or a read of the application can fail with: the API
//! answers it as RFC 9457 problem details (`api::problem`), the console as a page
//! with the same status.

use axum::http::StatusCode;

use crate::domain::field_error::FieldError;
use crate::domain::job_template::PayloadTooLarge;
use crate::store::StoreError;

/// What an action or a read can fail with; each kind has its HTTP status (RFC 9110).
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The body is not JSON, or not the JSON of the expected shape (400).
    #[error("malformed request")]
    Malformed(FieldError),
    /// Fields are well-formed but invalid (422).
    #[error("invalid request")]
    Invalid(Vec<FieldError>),
    /// No valid API token was presented (401).
    #[error("unauthorized")]
    Unauthorized(String),
    /// The resource does not exist (404).
    #[error("{0}")]
    NotFound(String),
    /// A field names something that does not exist, e.g. an unknown subscriber (404).
    #[error("unknown reference")]
    UnknownReference(FieldError),
    /// The request conflicts with what is stored (409).
    #[error("{0}")]
    Conflict(String),
    /// The body or a field is over its size limit (413).
    #[error("too large")]
    TooLarge(FieldError),
    /// The body is not `application/json` (415).
    #[error("unsupported media type")]
    UnsupportedMediaType,
    /// The store is unreachable or busy; nothing was written (503 + `Retry-After`).
    #[error("the store is unavailable")]
    Unavailable(String),
    /// A fault of the server; details are logged, not returned (500).
    #[error("internal error: {0}")]
    Internal(String),
}

impl AppError {
    /// A 422 about one field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        AppError::Invalid(vec![FieldError::new(field, message)])
    }

    /// The HTTP status it answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::Malformed(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::NotFound(_) | AppError::UnknownReference(_) => StatusCode::NOT_FOUND,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<PayloadTooLarge> for AppError {
    fn from(PayloadTooLarge(error): PayloadTooLarge) -> Self {
        AppError::TooLarge(error)
    }
}

impl From<StoreError> for AppError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(cause) => AppError::Unavailable(cause),
            StoreError::UnknownSubscriber(id) => AppError::UnknownReference(FieldError::new(
                "subscriber_id",
                format!("subscriber `{id}` does not exist"),
            )),
            quota @ StoreError::TooManySchedules { .. } => {
                AppError::invalid("schedule_id", quota.to_string())
            }
            conflict @ (StoreError::PayloadConflict { .. }
            | StoreError::ReplayRateBudget { .. }
            | StoreError::SubscriberBeingDeleted(_)) => AppError::Conflict(conflict.to_string()),
            other => AppError::Internal(other.to_string()),
        }
    }
}
