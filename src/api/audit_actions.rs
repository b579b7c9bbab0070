//! Which requests are operator actions, and what the audit trail calls them
//! (docs/DESIGN.md §5.11): one row per (method, route), the route as the router matched
//! it (`axum::extract::MatchedPath`). A route added to the router is audited by adding
//! its row here; the handler does not change.

use axum::http::{Method, StatusCode};

use crate::app::actions;

/// Where an action's target comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The path parameter of this name (a job, subscriber or replay id, a destination
    /// key).
    Path(&'static str),
    /// An id minted before the action and handed to the handler ([`MintedId`]), which
    /// gives it to what it creates (a replay): the entry names its target from the
    /// start, so no crash or failed settlement leaves it without one.
    Minted,
    /// None: the action acts on a selection its parameters describe.
    None,
}

/// The id [`Target::Minted`] made for an audited request, in its extensions: the id
/// the handler must give what it creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MintedId(pub uuid::Uuid);

/// An audited route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditedRoute {
    /// The request method.
    pub method: Method,
    /// The route as registered (`/v1/jobs/{job_id}/cancel`).
    pub route: &'static str,
    /// The action's name in the trail.
    pub action: &'static str,
    /// Where its target comes from.
    pub target: Target,
    /// Only answers with this status are actions (a replay's dry run, answered 200,
    /// changes nothing); `None`: every 2xx.
    pub only_status: Option<StatusCode>,
}

const fn route(
    method: Method,
    route: &'static str,
    action: &'static str,
    target: Target,
) -> AuditedRoute {
    AuditedRoute {
        method,
        route,
        action,
        target,
        only_status: None,
    }
}

/// Every audited route. Producers' requests (`POST /v1/jobs`, `POST /v1/events`) and
/// reads are not operator actions.
pub const AUDITED: &[AuditedRoute] = &[
    AuditedRoute {
        method: Method::POST,
        route: "/v1/replays",
        action: actions::REPLAY_CREATE,
        target: Target::Minted,
        only_status: Some(StatusCode::ACCEPTED),
    },
    route(
        Method::POST,
        "/v1/replays/{replay_id}/cancel",
        actions::REPLAY_CANCEL,
        Target::Path("replay_id"),
    ),
    route(
        Method::POST,
        "/v1/jobs/{job_id}/cancel",
        actions::JOB_CANCEL,
        Target::Path("job_id"),
    ),
    route(
        Method::POST,
        "/v1/jobs/{job_id}/retry",
        actions::JOB_RETRY,
        Target::Path("job_id"),
    ),
    route(
        Method::PATCH,
        "/v1/jobs/{job_id}",
        actions::JOB_RESCHEDULE,
        Target::Path("job_id"),
    ),
    route(
        Method::POST,
        "/v1/subscribers/resume",
        actions::SUBSCRIBER_RESUME,
        Target::None,
    ),
    route(
        Method::POST,
        "/v1/subscribers/pause",
        actions::SUBSCRIBER_PAUSE,
        Target::None,
    ),
    route(
        Method::PUT,
        "/v1/subscribers/{subscriber_id}",
        actions::SUBSCRIBER_PUT,
        Target::Path("subscriber_id"),
    ),
    route(
        Method::PATCH,
        "/v1/subscribers/{subscriber_id}",
        actions::SUBSCRIBER_PATCH,
        Target::Path("subscriber_id"),
    ),
    route(
        Method::DELETE,
        "/v1/subscribers/{subscriber_id}",
        actions::SUBSCRIBER_DELETE,
        Target::Path("subscriber_id"),
    ),
    route(
        Method::POST,
        "/v1/subscribers/{subscriber_id}/secret/rotate",
        actions::SUBSCRIBER_ROTATE_SECRET,
        Target::Path("subscriber_id"),
    ),
    route(
        Method::PUT,
        "/v1/destinations/{destination}",
        actions::DESTINATION_PUT,
        Target::Path("destination"),
    ),
    route(
        Method::PUT,
        "/v1/schedules/{schedule_id}",
        actions::SCHEDULE_PUT,
        Target::Path("schedule_id"),
    ),
    route(
        Method::DELETE,
        "/v1/schedules/{schedule_id}",
        actions::SCHEDULE_DELETE,
        Target::Path("schedule_id"),
    ),
    route(
        Method::POST,
        "/v1/schedules/{schedule_id}/run",
        actions::SCHEDULE_RUN,
        Target::Path("schedule_id"),
    ),
];

/// The audited route `method` `route` is, if any.
pub fn audited(method: &Method, route: &str) -> Option<&'static AuditedRoute> {
    AUDITED
        .iter()
        .find(|audited| audited.method == method && audited.route == route)
}

/// The names of every action, for the listing's `action` filter: the API's routes',
/// then the console's own (`console.login`, `console.logout`; its other actions have
/// the API's names).
pub fn action_names() -> impl Iterator<Item = &'static str> {
    AUDITED
        .iter()
        .map(|audited| audited.action)
        .chain(actions::CONSOLE_ACTIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLE_ACTIONS_LEN: usize = actions::CONSOLE_ACTIONS.len();

    #[test]
    fn every_route_and_action_is_listed_once() {
        let mut routes: Vec<(String, &str)> = AUDITED
            .iter()
            .map(|a| (a.method.to_string(), a.route))
            .collect();
        routes.sort();
        routes.dedup();
        assert_eq!(routes.len(), AUDITED.len());
        let mut names: Vec<&str> = action_names().collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), AUDITED.len() + CONSOLE_ACTIONS_LEN);
        assert_eq!(
            audited(&Method::POST, "/v1/jobs/{job_id}/retry").map(|a| a.action),
            Some("job.retry")
        );
        assert_eq!(audited(&Method::GET, "/v1/jobs/{job_id}"), None);
    }
}

#[cfg(test)]
mod route_tests {
    use super::*;

    /// A row of the table that names no route of the API would never record anything.
    #[test]
    fn every_audited_route_is_a_route_of_the_api() {
        let document = crate::api::openapi();
        for audited in AUDITED {
            let item = document
                .paths
                .paths
                .get(audited.route)
                .unwrap_or_else(|| panic!("no route {}", audited.route));
            let method = audited.method.as_str().to_ascii_lowercase();
            let operation = match method.as_str() {
                "post" => item.post.as_ref(),
                "put" => item.put.as_ref(),
                "patch" => item.patch.as_ref(),
                "delete" => item.delete.as_ref(),
                _ => None,
            };
            assert!(operation.is_some(), "{} {}", audited.method, audited.route);
        }
    }
}
