//! What the OpenAPI document says for every operation at once, added after the routes
//! are collected: the bearer-token scheme on `/v1/*`; the problem responses any
//! operation can give (RFC 9457 bodies) — 401 without a valid token, 429 when the
//! client address used up its failed guesses, 408 after the
//! request timeout, 414/431 for an oversized target or headers, 503 while the store is
//! unavailable, and for operations with a body 400, 413, 415 and 422; the rules of ids,
//! destinations and cursors wherever a request carries one ([`rules`]); and `$ref`s
//! from each page schema to its item schema.

pub mod rules;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use utoipa::openapi::schema::{ArrayItems, Schema};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, OpenApi, Ref, RefOr, Response, ResponseBuilder, path::Operation,
};

use super::problem::PROBLEM_JSON;
use rules::constrain;

/// The prefix of the names utoipa gives the schemas of [`crate::app::pagination::Page`]:
/// `Page_JobView` for `Page<JobView>`.
const PAGE_PREFIX: &str = "Page_";

/// The name of the bearer scheme in the document.
const BEARER: &str = "bearer";

/// Adds the security scheme, the common problem responses, the rules of what requests
/// carry and the pages' `$ref`s to `openapi`.
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
    let mut request_bodies = BTreeSet::new();
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
            for parameter in operation.parameters.iter_mut().flatten() {
                if let RefOr::T(parameter) = parameter
                    && let Some(RefOr::T(schema)) = parameter.schema.as_mut()
                {
                    constrain(&parameter.name, schema);
                }
            }
            request_bodies.extend(request_body_schema(operation));
        }
    }
    let components = openapi.components.get_or_insert_with(Default::default);
    for name in request_bodies {
        if let Some(RefOr::T(Schema::Object(body))) = components.schemas.get_mut(&name) {
            for (field, property) in body.properties.iter_mut() {
                if let RefOr::T(schema) = property {
                    constrain(field, schema);
                }
            }
        }
    }
    refer_page_items(&mut components.schemas);
}

/// The name of the component schema of `operation`'s JSON request body, if any.
fn request_body_schema(operation: &Operation) -> Option<String> {
    let RefOr::T(body) = operation.request_body.as_ref()? else {
        return None;
    };
    let RefOr::T(content) = body.content.get("application/json")? else {
        return None;
    };
    match content.schema.as_ref()? {
        RefOr::Ref(reference) => reference
            .ref_location
            .strip_prefix("#/components/schemas/")
            .map(str::to_owned),
        RefOr::T(_) => None,
    }
}

/// utoipa writes the item schema of a generic page (`Page<JobView>`) inline, a copy of
/// the item's own component (juhaku/utoipa#1586); generated clients then get two
/// classes for one thing. Each page's `items` refers to the item's component instead.
fn refer_page_items(schemas: &mut BTreeMap<String, RefOr<Schema>>) {
    let pages: Vec<(String, String)> = schemas
        .keys()
        .filter_map(|name| {
            let item = name.strip_prefix(PAGE_PREFIX)?;
            schemas
                .contains_key(item)
                .then(|| (name.clone(), item.to_owned()))
        })
        .collect();
    for (page, item) in pages {
        let Some(item_schema) = schemas.get(&item).cloned() else {
            continue;
        };
        let Some(RefOr::T(Schema::Object(page))) = schemas.get_mut(&page) else {
            continue;
        };
        if let Some(RefOr::T(Schema::Array(items))) = page.properties.get_mut("items")
            && let ArrayItems::RefOrSchema(inline) = &mut items.items
            && **inline == item_schema
        {
            **inline = RefOr::Ref(Ref::from_schema_name(item));
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
        common.push((
            "429",
            "This client address presented too many tokens that were not valid: the \
             token was not checked; retry after `Retry-After` seconds (when tokens are \
             configured)",
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
