//! `openapi/openapi.json` must be what the code generates.

use std::path::Path;

#[test]
fn the_committed_openapi_document_is_current() {
    let generated = serde_json::to_string_pretty(&deferhook::api::openapi()).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json is stale: regenerate it with \
         `cargo run -- openapi > openapi/openapi.json` (or UPDATE_OPENAPI=1 cargo test)"
    );
}

#[test]
fn the_document_is_openapi_3_1_with_every_route() {
    let document = serde_json::to_value(deferhook::api::openapi()).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/subscribers/{subscriber_id}", "put"),
        ("/v1/subscribers/{subscriber_id}", "get"),
        ("/v1/subscribers", "get"),
        ("/v1/schedules/{schedule_id}", "put"),
        ("/v1/schedules/{schedule_id}", "get"),
        ("/v1/schedules/{schedule_id}", "delete"),
        ("/v1/schedules", "get"),
        ("/v1/schedules/{schedule_id}/run", "post"),
        ("/v1/destinations", "get"),
        ("/v1/destinations/{destination}", "get"),
        ("/v1/destinations/{destination}", "put"),
        ("/v1/jobs", "post"),
        ("/v1/jobs", "get"),
        ("/v1/jobs/{job_id}", "get"),
        ("/v1/jobs/{job_id}/attempts", "get"),
        ("/v1/events", "post"),
        ("/v1/jobs/{job_id}/cancel", "post"),
        ("/v1/jobs/{job_id}/retry", "post"),
        ("/v1/jobs/{job_id}", "patch"),
        ("/healthz", "get"),
        ("/readyz", "get"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} is missing from the document"
        );
    }
}
