//! `/v1/destinations` (issue #14): the `host:port` destinations subscribers share,
//! listed and read with their figures, and an operator's limit, pause and circuit
//! override, on both backends. No worker runs, so nothing is claimed and a due job's
//! `waiting_reason` shows what its destination holds back.

use reqwest::Method;
use serde_json::{Value, json};

use crate::app::Db;
use crate::support::{TestApp, app_with, at, expect_fields, expect_json, expect_problem};
use deferhook::domain::destination_state::DEFAULT_DESTINATION_MAX_IN_FLIGHT;
use deferhook::testing::START_TEXT;

/// The destination two subscribers share (written differently in their URLs).
const SHARED: &str = "hooks.example.com:443";
/// The same host on another port: another destination.
const OTHER_PORT: &str = "hooks.example.com:8443";

/// An API-only instance on `db` with three subscribers: `a` and `b` on [`SHARED`],
/// `c` on [`OTHER_PORT`].
async fn three_subscribers(db: Db) -> TestApp {
    let app = app_with().backend(db).start().await;
    let urls = [
        ("a", "https://hooks.example.com/a"),
        ("b", "https://HOOKS.Example.com:443/b?x=1"),
        ("c", "https://hooks.example.com:8443/c"),
    ];
    for (id, url) in urls {
        let created = app.put_subscriber(id, &json!({ "url": url })).await;
        let expected = if id == "c" { OTHER_PORT } else { SHARED };
        assert_eq!(created["destination"], expected, "{created}");
    }
    app
}

fn path(destination: &str) -> String {
    format!("/v1/destinations/{destination}")
}

/// A destination as it stands when only its subscribers were registered.
fn untouched(destination: &str, subscribers: u64) -> Value {
    json!({
        "destination": destination,
        "subscribers": subscribers,
        "in_flight": 0,
        "max_in_flight": DEFAULT_DESTINATION_MAX_IN_FLIGHT,
        "max_in_flight_source": "default",
        "paused": false,
        "circuit": {
            "state": "closed",
            "forced": null,
            "consecutive_failures": 0,
            "opened_at": null,
            "retry_at": null,
            "cooldown_ms": 0,
        },
        "last_error": null,
        "created_at": START_TEXT,
        "updated_at": START_TEXT,
    })
}

async fn list_shares_a_destination_and_pages_walk_it(db: Db) {
    let app = three_subscribers(db).await;
    let list = expect_json(&app.get("/v1/destinations").await, 200);
    assert_eq!(
        list,
        json!({
            "items": [untouched(SHARED, 2), untouched(OTHER_PORT, 1)],
            "next_cursor": null,
        })
    );

    let mut walked = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..3 {
        let query = match &cursor {
            Some(cursor) => format!("/v1/destinations?limit=1&cursor={cursor}"),
            None => "/v1/destinations?limit=1".to_owned(),
        };
        let page = expect_json(&app.get(&query).await, 200);
        assert_eq!(page["items"].as_array().unwrap().len(), 1, "{page}");
        walked.push(page["items"][0]["destination"].clone());
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(walked, [json!(SHARED), json!(OTHER_PORT)]);
    assert_eq!(cursor, None, "the last page has no cursor");

    // One destination, however its path is written.
    for written in [SHARED, "HOOKS.Example.COM:443", "hooks.example.com%3A443"] {
        let read = expect_json(&app.get(&path(written)).await, 200);
        assert_eq!(read, untouched(SHARED, 2), "{written}");
    }
    let bad_cursor = app.get("/v1/destinations?cursor=bm90LWEta2V5").await;
    expect_fields(&bad_cursor, 422, &["cursor"]);
}

async fn an_operator_sets_the_limit_pause_and_circuit(db: Db) {
    let app = three_subscribers(db).await;
    let job = app.job("a", "evt-1", json!({})).await;
    assert_eq!(app.job_now(&job).await["waiting_reason"], Value::Null);
    let put = |body: Value| {
        let app = &app;
        async move {
            let reply = app.put_json(&path(SHARED), &body).await;
            expect_json(&reply, 200)
        }
    };

    app.advance(1_000);
    let limited = put(json!({"max_in_flight": 4})).await;
    let mut expected = untouched(SHARED, 2);
    expected["max_in_flight"] = json!(4);
    expected["max_in_flight_source"] = json!("operator");
    expected["updated_at"] = json!(at(1_000));
    assert_eq!(limited, expected);
    assert_eq!(
        expect_json(&app.get(&path(SHARED)).await, 200),
        expected,
        "GET shows what PUT answered"
    );
    // The other destination is its own.
    let other = expect_json(&app.get(&path(OTHER_PORT)).await, 200);
    assert_eq!(other, untouched(OTHER_PORT, 1));

    app.advance(1_000);
    let default = put(json!({"max_in_flight": null})).await;
    assert_eq!(
        default["max_in_flight"], DEFAULT_DESTINATION_MAX_IN_FLIGHT,
        "{default}"
    );
    assert_eq!(default["max_in_flight_source"], "default", "{default}");
    assert_eq!(default["updated_at"], at(2_000), "{default}");

    let paused = put(json!({"paused": true})).await;
    assert_eq!(paused["paused"], true, "{paused}");
    let waiting = app.job_now(&job).await;
    assert_eq!(waiting["waiting_reason"], "destination_paused", "{waiting}");
    // An empty change writes nothing, not even `updated_at`.
    app.advance(1_000);
    assert_eq!(put(json!({})).await, paused);
    assert_eq!(paused["updated_at"], at(2_000), "{paused}");

    let resumed = put(json!({"paused": false, "circuit": "open"})).await;
    assert_eq!(resumed["paused"], false, "{resumed}");
    assert_eq!(resumed["circuit"]["state"], "open", "{resumed}");
    assert_eq!(resumed["circuit"]["forced"], "open", "{resumed}");
    let waiting = app.job_now(&job).await;
    let reason = &waiting["waiting_reason"];
    assert_eq!(reason, "destination_circuit_open", "{waiting}");

    let held_closed = put(json!({"circuit": "closed"})).await;
    assert_eq!(held_closed["circuit"]["state"], "closed", "{held_closed}");
    assert_eq!(held_closed["circuit"]["forced"], "closed", "{held_closed}");

    let auto = put(json!({"circuit": "auto"})).await;
    let mut expected = untouched(SHARED, 2);
    expected["updated_at"] = json!(at(3_000));
    assert_eq!(auto, expected);
    assert_eq!(app.job_now(&job).await["waiting_reason"], Value::Null);
}

async fn bad_input_is_refused_and_changes_nothing(db: Db) {
    let app = three_subscribers(db).await;
    let before = app.get_json("/v1/destinations").await;
    app.advance(1_000);

    for unknown in ["elsewhere.example.com:443", "hooks.example.com:444"] {
        expect_problem(&app.get(&path(unknown)).await, 404);
        let refused = app.put_json(&path(unknown), &json!({"paused": true})).await;
        let body = expect_problem(&refused, 404);
        assert!(body["detail"].as_str().unwrap().contains(unknown), "{body}");
    }

    for (body, field) in [
        (json!({"max_in_flight": 0}), "max_in_flight"),
        (json!({"max_in_flight": 10_001}), "max_in_flight"),
        (json!({"max_in_flight": "4"}), "max_in_flight"),
        (json!({"max_in_flight": 4, "paused": "yes"}), "paused"),
        (json!({"paused": "yes"}), "paused"),
        (json!({"paused": null}), "paused"),
        (json!({"circuit": "sideways"}), "circuit"),
        (json!({"circuit": 1}), "circuit"),
        (json!({"circuit": true}), "circuit"),
        (json!({"circuit": {"open": null}}), "circuit"),
        (json!({"circuit": ["open"]}), "circuit"),
        (json!({"paused": true, "pause": true}), "pause"),
    ] {
        let reply = app.put_json(&path(SHARED), &body).await;
        expect_fields(&reply, 422, &[field]);
    }

    // A malformed host:port, in a GET or a PUT path (`a/b:1` percent-encoded, so that
    // it reaches the handler as one segment); an ACE label that is not Punycode, which
    // the pattern admits.
    for bad in [
        "no-port",
        "Xn--a00AA.A:1",
        "a%2Fb:1",
        "host:0",
        "host:99999",
        "host:",
        "%5B::1%5D",
    ] {
        let read = app.get(&path(bad)).await;
        let body = expect_fields(&read, 422, &["destination"]);
        assert!(body["detail"].as_str().unwrap().contains("port"), "{body}");
        let write = app.put_json(&path(bad), &json!({"paused": true})).await;
        expect_fields(&write, 422, &["destination"]);
    }

    assert_eq!(app.get_json("/v1/destinations").await, before);
}

async fn an_ipv6_destination_reads_with_or_without_encoding(db: Db) {
    let app = app_with().backend(db).start().await;
    let created = app
        .put_subscriber(
            "v6",
            &json!({"url": "http://[2606:4700:0::1111]:9000/hook"}),
        )
        .await;
    let key = "[2606:4700::1111]:9000";
    assert_eq!(created["destination"], key, "{created}");
    for written in [
        key,
        "%5B2606:4700::1111%5D:9000",
        "[2606:4700:0:0::1111]%3A9000",
    ] {
        let read = expect_json(&app.get(&path(written)).await, 200);
        assert_eq!(read["destination"], key, "{written}: {read}");
        assert_eq!(read["subscribers"], 1, "{read}");
    }
    let paused = app.put_json(&path(key), &json!({"paused": true})).await;
    assert_eq!(expect_json(&paused, 200)["paused"], true);
}

crate::on_both_backends!(
    list_shares_a_destination_and_pages_walk_it,
    an_operator_sets_the_limit_pause_and_circuit,
    bad_input_is_refused_and_changes_nothing,
    an_ipv6_destination_reads_with_or_without_encoding,
);

#[tokio::test]
async fn destinations_need_the_token_when_tokens_are_set() {
    let token = "destinations-token-5c1e";
    let app = app_with().flag("--api-token", token).start().await;
    for method in [Method::GET, Method::PUT] {
        let path = if method == Method::GET {
            "/v1/destinations"
        } else {
            "/v1/destinations/hooks.example.com:443"
        };
        let bare = app.send(app.request(method.clone(), path)).await;
        expect_problem(&bare, 401);
    }
    let listed = app
        .send(
            app.request(Method::GET, "/v1/destinations")
                .bearer_auth(token),
        )
        .await;
    assert_eq!(expect_json(&listed, 200)["items"], json!([]));
}
