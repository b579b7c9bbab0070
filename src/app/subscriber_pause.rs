//! Pausing many subscribers at once (reason `operator`), named or matched by a filter
//! — the inverse of resuming them (docs/DESIGN.md §5.3, issue #33). During an incident
//! on a shared host: pause every subscriber whose receiver times out, in one call, and
//! resume them later by the ids the answer lists.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::error::AppError;
use super::subscriber_triage::{all_of, cause_of};
use super::subscribers::{named_ids, not_null, unknown_named};
use crate::domain::field_error::FieldError;
use crate::domain::health::HealthStatus;
use crate::domain::policy::ErrorClass;
use crate::store::PauseSelection;

/// Most subscriber ids one pause names.
pub const MAX_PAUSE_IDS: usize = 1000;

/// Most subscribers one filter may pause (a larger match is refused, nothing paused).
pub const MAX_PAUSE_MATCHED: usize = 10_000;

/// Which subscribers to pause: `subscriber_ids`, or the filter `health` (with
/// `error_class` and `status` to narrow it), not both (a rule across fields, which
/// OpenAPI cannot state: the server's 422 names it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseSubscribersRequest {
    /// 1 to 1000 distinct ids, all registered (else 404 naming the first unknown, and
    /// none is paused); those already paused are left as they are.
    #[schema(min_items = 1, max_items = 1000, nullable = false)]
    #[serde(default, deserialize_with = "not_null")]
    pub subscriber_ids: Option<Vec<String>>,
    /// `failing`: every subscriber failing at the instant read (at most 10,000).
    #[schema(example = "failing", pattern = "^failing$", nullable = false)]
    #[serde(default, deserialize_with = "not_null")]
    pub health: Option<String>,
    /// With `health`: only those whose latest failed attempt has this class (`timeout`,
    /// `connect`, `http_5xx`, …), a cause of `GET /v1/subscribers?health=failing`.
    #[schema(value_type = Option<ErrorClass>)]
    pub error_class: Option<String>,
    /// With `health`: only those whose latest failed attempt answered this HTTP status.
    #[schema(minimum = 100, maximum = 599)]
    pub status: Option<u16>,
}

/// The result of a pause.
#[derive(Debug, Serialize, ToSchema)]
pub struct PausedSubscribers {
    /// How many enabled subscribers it paused.
    pub paused: u64,
    /// The subscribers it selected (named, or matched by the filter), in id order:
    /// `POST /v1/subscribers/resume` with these ids undoes it.
    pub subscriber_ids: Vec<String>,
}

/// What a pause body selects.
enum Selection {
    Ids(Vec<String>),
    Filter {
        error_class: Option<ErrorClass>,
        status: Option<u16>,
    },
}

/// Checks a pause body.
fn validate(body: PauseSubscribersRequest) -> Result<Selection, AppError> {
    match (body.subscriber_ids, body.health) {
        (Some(ids), None) => {
            if body.error_class.is_some() || body.status.is_some() {
                return Err(AppError::invalid(
                    "body",
                    "`error_class` and `status` narrow `health`; give them with it, not with \
                     `subscriber_ids`",
                ));
            }
            named_ids(ids, MAX_PAUSE_IDS).map(Selection::Ids)
        }
        (None, Some(health)) => {
            let mut errors = Vec::new();
            if health != "failing" {
                errors.push(FieldError::new("health", "must be `failing`"));
            }
            let error_class = match body.error_class.as_deref().map(str::parse::<ErrorClass>) {
                Some(Err(_)) => {
                    let names: Vec<&str> = ErrorClass::ALL.iter().map(|c| c.as_str()).collect();
                    errors.push(FieldError::new(
                        "error_class",
                        format!("must be one of {}", names.join(", ")),
                    ));
                    None
                }
                Some(Ok(class)) => Some(class),
                None => None,
            };
            if body.status.is_some_and(|s| !(100..=599).contains(&s)) {
                errors.push(FieldError::new("status", "must be from 100 to 599"));
            }
            if errors.is_empty() {
                Ok(Selection::Filter {
                    error_class,
                    status: body.status,
                })
            } else {
                Err(AppError::Invalid(errors))
            }
        }
        _ => Err(AppError::invalid(
            "body",
            "must give exactly one of `subscriber_ids` and `health`",
        )),
    }
}

/// Pauses the subscribers `body` names or matches (reason `operator`), all or nothing,
/// in one transaction (422 naming each invalid field, or a filter matching more than
/// [`MAX_PAUSE_MATCHED`]; 404 naming the first unknown id, nothing written then).
/// Answers how many it paused and every id it selected, to resume them by.
pub async fn pause(
    state: &AppState,
    body: PauseSubscribersRequest,
) -> Result<PausedSubscribers, AppError> {
    let now = state.clock.now();
    let (selection, mut selected) = match validate(body)? {
        Selection::Ids(ids) => (PauseSelection::Ids(ids.clone()), ids),
        Selection::Filter {
            error_class,
            status,
        } => {
            let matched: Vec<String> = all_of(state, HealthStatus::Failing, now)
                .await?
                .into_iter()
                .filter(|entry| entry.subscriber.enabled)
                .filter(|entry| {
                    let cause = cause_of(entry);
                    error_class.is_none_or(|class| cause.class == Some(class))
                        && status.is_none_or(|status| cause.status == Some(status))
                })
                .map(|entry| entry.subscriber.id)
                .collect();
            if matched.len() > MAX_PAUSE_MATCHED {
                return Err(AppError::invalid(
                    "health",
                    format!(
                        "matches {} subscribers; at most {MAX_PAUSE_MATCHED} per call (narrow \
                         it with error_class or status)",
                        matched.len()
                    ),
                ));
            }
            (PauseSelection::Matched(matched.clone()), matched)
        }
    };
    let named = selected.clone();
    let paused = state
        .store
        .pause_subscribers(selection, now)
        .await
        .map_err(|error| unknown_named(error, &named, "paused"))?;
    selected.sort();
    selected.dedup();
    Ok(PausedSubscribers {
        paused,
        subscriber_ids: selected,
    })
}
