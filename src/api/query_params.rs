//! Query parameters on routes that take none (docs/DESIGN.md §5.1: unknown query
//! parameters are 422): a route layer refuses any query string on a route whose
//! operation in the OpenAPI document declares no query parameter, before its handler
//! runs, so `DELETE /v1/subscribers/acme?dry_run=true` deletes nothing. The routes that
//! take some (the listings) refuse unknown ones themselves (`deny_unknown_fields`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::{OpenApi, RefOr};

use super::problem::AppError;

/// Every operation (method, route) and whether it takes query parameters.
#[derive(Clone, Debug, Default)]
pub struct QueryRoutes(Arc<HashMap<(Method, String), bool>>);

impl QueryRoutes {
    /// Read from `openapi`: every operation, and whether it has at least one
    /// `in: query` parameter.
    pub fn from_doc(openapi: &OpenApi) -> Self {
        let mut routes = HashMap::new();
        for (path, item) in &openapi.paths.paths {
            let operations: [(Method, &Option<Operation>); 5] = [
                (Method::GET, &item.get),
                (Method::PUT, &item.put),
                (Method::POST, &item.post),
                (Method::DELETE, &item.delete),
                (Method::PATCH, &item.patch),
            ];
            for (method, operation) in operations {
                let takes_query = operation
                    .as_ref()
                    .and_then(|op| op.parameters.as_ref())
                    .is_some_and(|parameters| {
                        parameters.iter().any(|p| match p {
                            RefOr::T(p) => matches!(p.parameter_in, ParameterIn::Query),
                            // A shared parameter: assume it may be a query one.
                            RefOr::Ref(_) => true,
                        })
                    });
                if operation.is_some() {
                    routes.insert((method, path.clone()), takes_query);
                }
            }
        }
        QueryRoutes(Arc::new(routes))
    }

    /// `Some(true)` when the operation takes query parameters, `Some(false)` when it
    /// takes none, `None` when the route has no such method (the router answers 405).
    fn takes_query(&self, method: &Method, route: &str) -> Option<bool> {
        self.0.get(&(method.clone(), route.to_owned())).copied()
    }
}

/// Answers 422 problem+json naming the first query parameter of a request to a `/v1`
/// route that takes none; passes everything else on.
pub async fn refuse_on_routes_without(
    State(routes): State<QueryRoutes>,
    matched: Option<MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    let route = matched.as_ref().map(MatchedPath::as_str);
    let query = request.uri().query().filter(|q| !q.is_empty());
    if let (Some(route), Some(query)) = (route, query)
        && route.starts_with("/v1/")
        && routes.takes_query(request.method(), route) == Some(false)
    {
        let name = url::form_urlencoded::parse(query.as_bytes())
            .next()
            .map(|(name, _)| name.into_owned())
            .unwrap_or_else(|| "query".to_owned());
        return AppError::invalid(
            name,
            "is not a query parameter of this route (it takes none)",
        )
        .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listings_take_queries_and_the_actions_do_not() {
        let routes = QueryRoutes::from_doc(&super::super::openapi());
        let takes = |method: Method, route: &str| routes.takes_query(&method, route);
        for route in ["/v1/jobs", "/v1/subscribers", "/v1/events", "/v1/audit"] {
            assert_eq!(takes(Method::GET, route), Some(true), "{route}");
        }
        for (method, route) in [
            (Method::DELETE, "/v1/subscribers/{subscriber_id}"),
            (Method::POST, "/v1/subscribers/resume"),
            (Method::GET, "/v1/events/{event_id}"),
            (Method::POST, "/v1/jobs/{job_id}/cancel"),
        ] {
            assert_eq!(
                takes(method.clone(), route),
                Some(false),
                "{method} {route}"
            );
        }
        // A method the route does not have is left to the router (405).
        assert_eq!(takes(Method::TRACE, "/v1/audit"), None);
        assert_eq!(takes(Method::DELETE, "/v1/events/{event_id}"), None);
    }
}
