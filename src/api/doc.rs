//! What the OpenAPI document says for every operation at once, added after the routes
//! are collected: the bearer-token scheme on `/v1/*`, and the problem responses any
//! operation can give (RFC 9457 bodies) — 401 without a valid token, 408 after the
//! request timeout, 414/431 for an oversized target or headers, 503 while the store is
//! unavailable, and for operations with a body 400, 413, 415 and 422.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, OpenApi, Ref, RefOr, Response, ResponseBuilder, path::Operation,
};

use super::problem::PROBLEM_JSON;

/// The name of the bearer scheme in the document.
const BEARER: &str = "bearer";

/// Adds the security scheme and the common problem responses to `openapi`.
pub fn finish(openapi: &mut OpenApi) {
    let components = openapi.components.get_or_insert_with(Default::default);
    components.security_schemes.insert(
        BEARER.to_owned(),
        RefOr::T(SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "Needed on /v1/* when the server has API tokens (--api-token)",
                ))
                .build(),
        )),
    );
    for (path, item) in openapi.paths.paths.iter_mut() {
        let protected = path.starts_with("/v1/");
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            add_common_responses(operation, protected);
        }
    }
}

fn add_common_responses(operation: &mut Operation, protected: bool) {
    let mut common = vec![
        ("408", "The request took longer than --request-timeout-ms"),
        ("414", "The request target is over 8 KiB"),
        ("431", "Over 64 header fields or 16 KiB of headers"),
    ];
    if protected {
        operation.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
        common.push((
            "401",
            "Missing or invalid API token (when tokens are configured)",
        ));
        common.push(("503", "Store unavailable; nothing was written, retry"));
        common.push(("422", "Invalid parameter"));
    }
    if operation.request_body.is_some() {
        common.extend([
            ("400", "Malformed JSON"),
            ("413", "The body is over its limit"),
            ("415", "The body is not application/json"),
            ("422", "Invalid field"),
        ]);
    }
    for (status, description) in common {
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| RefOr::T(problem(description)));
    }
}

fn problem(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .build()
}
