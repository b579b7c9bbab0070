//! The console's assets, embedded in the binary: its style sheet and htmx (2.0.11,
//! vendored from the npm package `htmx.org`, Zero-Clause BSD licence in
//! `assets/htmx-LICENSE.txt`). Nothing is fetched from another site.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The style sheet.
const CSS: &str = include_str!("assets/console.css");
/// htmx, minified as published.
const HTMX: &str = include_str!("assets/htmx-2.0.11.min.js");

/// `GET /console/assets/{name}`: `console.css` or `htmx.min.js`, cached for an hour.
pub async fn serve(Path(name): Path<String>) -> Response {
    let (body, kind) = match name.as_str() {
        "console.css" => (CSS, "text/css; charset=utf-8"),
        "htmx.min.js" => (HTMX, "text/javascript; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    response
}
