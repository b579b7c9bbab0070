//! Probes, the OpenAPI document and the docs page.

use serde_json::json;

use crate::support::{expect_json, spawn_app};

#[tokio::test]
async fn probes_answer_200() {
    let app = spawn_app().await;
    let live = app.get("/healthz").await;
    assert_eq!(expect_json(&live, 200), json!({"status": "ok"}));
    let ready = app.get("/readyz").await;
    assert_eq!(expect_json(&ready, 200), json!({"status": "ready"}));
}

#[tokio::test]
async fn the_openapi_document_is_3_1_and_lists_the_routes() {
    let app = spawn_app().await;
    let document = expect_json(&app.get("/openapi.json").await, 200);
    let version = document["openapi"].as_str().expect("openapi field");
    assert!(version.starts_with("3.1"), "{version}");
    let paths = document["paths"].as_object().expect("paths");
    for path in [
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/attempts",
        "/v1/subscribers",
        "/v1/subscribers/{subscriber_id}",
        "/healthz",
        "/readyz",
    ] {
        assert!(paths.contains_key(path), "{path} missing");
    }
}

#[tokio::test]
async fn the_docs_page_is_html() {
    let app = spawn_app().await;
    let reply = app.get("/docs/").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let content_type = reply.header("content-type").expect("content-type");
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(
        reply.text.to_lowercase().contains("<html"),
        "{}",
        reply.text
    );
}

/// `/docs/` and `/openapi.json` share the console's origin: neither may be framed, sniffed
/// or load from elsewhere (issue #34 part 4.4); the console keeps its own stricter policy.
#[tokio::test]
async fn the_docs_and_the_document_carry_the_security_headers() {
    let app = spawn_app().await;
    for path in [
        "/docs/",
        "/docs/swagger-initializer.js",
        "/openapi.json",
        "/v1/jobs",
    ] {
        let reply = app.get(path).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
        assert_eq!(reply.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(
            reply.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        let csp = reply.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("default-src 'self'"), "{path}: {csp}");
    }
    let console = app.get("/console/login").await;
    let csp = console
        .header("content-security-policy")
        .unwrap_or_default();
    assert!(
        !csp.contains("'unsafe-inline'"),
        "the console's own policy: {csp}"
    );
}
