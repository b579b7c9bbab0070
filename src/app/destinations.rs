//! An operator's change to a `host:port` destination that subscribers' URLs share:
//! its limit, a pause, its circuit held open or closed (docs/DESIGN.md §15), as the
//! API's `PUT /v1/destinations/{destination}` and the console's destination page make
//! it.

use serde::Deserialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::AppError;
use super::subscribers::present;
use super::views::DestinationView;
use crate::domain::circuit::ForcedCircuit;
use crate::domain::destination::Destination;
use crate::domain::destination_state::MAX_DESTINATION_IN_FLIGHT;
use crate::domain::field_error::FieldError;
use crate::store::DestinationPut;

/// The name of the path parameter, also the field a malformed one is reported under.
pub const DESTINATION: &str = "destination";

/// What an operator asks of a destination's circuit breaker. Read from a string only
/// (serde's map form of an enum, `{"open": null}`, is refused), so any other JSON type
/// is a 422 naming the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum CircuitSetting {
    /// Hold it open: nothing is sent until another setting.
    Open,
    /// Hold it closed: failures never open it.
    Closed,
    /// Hand it back to the breaker, closed with no failures counted.
    Auto,
}

impl TryFrom<String> for CircuitSetting {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        match text.as_str() {
            "open" => Ok(CircuitSetting::Open),
            "closed" => Ok(CircuitSetting::Closed),
            "auto" => Ok(CircuitSetting::Auto),
            _ => Err(format!("must be open, closed or auto, not `{text}`")),
        }
    }
}

impl CircuitSetting {
    /// The override it sets; `None` for `auto`.
    fn forced(self) -> Option<ForcedCircuit> {
        match self {
            CircuitSetting::Open => Some(ForcedCircuit::Open),
            CircuitSetting::Closed => Some(ForcedCircuit::Closed),
            CircuitSetting::Auto => None,
        }
    }
}

/// An operator's change to a destination. Every field is optional; a field left out
/// keeps its value.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutDestinationRequest {
    /// Most requests open to it at once, across all instances (1–10000); `null`
    /// returns it to the server's `--destination-max-in-flight`.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 10000)]
    pub max_in_flight: Option<Option<u32>>,
    /// True pauses its deliveries (jobs wait within their deadlines); false resumes
    /// them.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = bool)]
    pub paused: Option<Option<bool>>,
    /// `open` or `closed` holds the circuit so; `auto` hands it back to the breaker,
    /// which starts closed with no failures counted.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = CircuitSetting)]
    pub circuit: Option<Option<CircuitSetting>>,
}

/// The destination a path names: `host:port` as [`Destination::parse`] reads it (the
/// segment arrives percent-decoded), else a 422 naming `destination`.
pub fn destination(raw: &str) -> Result<Destination, AppError> {
    Destination::parse(raw).map_err(|e| AppError::invalid(DESTINATION, e.to_string()))
}

/// Checks `body` and turns it into the store's change; every invalid field is named.
fn change(body: PutDestinationRequest) -> Result<DestinationPut, AppError> {
    let mut errors = Vec::new();
    if let Some(Some(n)) = body.max_in_flight
        && !(1..=MAX_DESTINATION_IN_FLIGHT).contains(&n)
    {
        errors.push(FieldError::new(
            "max_in_flight",
            format!("must be from 1 to {MAX_DESTINATION_IN_FLIGHT}, or null for the default"),
        ));
    }
    if body.paused == Some(None) {
        errors.push(FieldError::new("paused", "must be true or false"));
    }
    if body.circuit == Some(None) {
        errors.push(FieldError::new("circuit", "must be open, closed or auto"));
    }
    if !errors.is_empty() {
        return Err(AppError::Invalid(errors));
    }
    Ok(DestinationPut {
        max_in_flight: body.max_in_flight,
        paused: body.paused.flatten(),
        circuit: body.circuit.flatten().map(CircuitSetting::forced),
    })
}

pub fn not_found(destination: &Destination) -> AppError {
    AppError::NotFound(format!(
        "destination `{destination}` does not exist (no subscriber's URL sends there)"
    ))
}

/// Changes destination `raw` (`host:port`, else a 422 naming `destination`) as `body`
/// says: its limit, a pause, a circuit held open or closed (422 naming each invalid
/// field; 404 when no subscriber's URL sends there, nothing written). An empty change
/// writes nothing. Answers the destination as it now stands.
pub async fn put(
    state: &AppState,
    raw: &str,
    body: PutDestinationRequest,
) -> Result<DestinationView, AppError> {
    let destination = destination(raw)?;
    let put = change(body)?;
    let now = state.clock.now();
    let key = destination.as_str();
    // An empty change writes nothing (and leaves `updated_at`).
    let stored = if put == DestinationPut::default() {
        state.store.get_destination(key, now).await?
    } else {
        let stored = state.store.put_destination(key, put, now).await?;
        // A resume, a raised limit or a circuit closed by hand may let due jobs go:
        // this instance's worker claims at once (the store announces the change to the
        // others, docs/DESIGN.md §3.3).
        state.store.wake().now();
        stored
    };
    stored
        .map(DestinationView::from)
        .ok_or_else(|| not_found(&destination))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::extract::parse_json;

    fn invalid_fields(body: &str) -> Vec<String> {
        let parsed = parse_json::<PutDestinationRequest>(body.as_bytes()).and_then(change);
        match parsed {
            Err(AppError::Invalid(errors)) => errors.into_iter().map(|e| e.field).collect(),
            other => panic!("{body}: expected a 422, got {other:?}"),
        }
    }

    #[test]
    fn absent_null_and_values_are_told_apart() {
        let put = |body: &str| change(parse_json(body.as_bytes()).unwrap()).unwrap();
        assert_eq!(put("{}"), DestinationPut::default());
        assert_eq!(put(r#"{"max_in_flight": null}"#).max_in_flight, Some(None));
        assert_eq!(put(r#"{"max_in_flight": 4}"#).max_in_flight, Some(Some(4)));
        assert_eq!(put(r#"{"paused": false}"#).paused, Some(false));
        assert_eq!(put(r#"{"circuit": "auto"}"#).circuit, Some(None));
        assert_eq!(
            put(r#"{"circuit": "open"}"#).circuit,
            Some(Some(ForcedCircuit::Open))
        );
    }

    #[test]
    fn each_invalid_field_is_named() {
        for (body, fields) in [
            (r#"{"max_in_flight": 0}"#, vec!["max_in_flight"]),
            (r#"{"max_in_flight": 10001}"#, vec!["max_in_flight"]),
            (r#"{"max_in_flight": -1}"#, vec!["max_in_flight"]),
            (r#"{"paused": "yes"}"#, vec!["paused"]),
            (r#"{"paused": null}"#, vec!["paused"]),
            (r#"{"circuit": "sideways"}"#, vec!["circuit"]),
            (
                r#"{"circuit": null, "paused": null}"#,
                vec!["paused", "circuit"],
            ),
            (r#"{"limit": 3}"#, vec!["limit"]),
        ] {
            assert_eq!(invalid_fields(body), fields, "{body}");
        }
    }

    #[test]
    fn a_path_is_a_host_and_port() {
        assert_eq!(
            destination("Example.COM:443").unwrap().as_str(),
            "example.com:443"
        );
        for bad in ["no-port", "a/b:1", "host:0", "host:99999", ""] {
            let Err(AppError::Invalid(errors)) = destination(bad) else {
                panic!("{bad} was accepted");
            };
            assert_eq!(errors[0].field, DESTINATION, "{bad}");
        }
    }
}
