//! The console's pages (issue #19), on both backends: each is a plain GET that renders
//! a complete page from the store; everything a receiver or producer wrote is escaped,
//! and no page shows a secret but the one-time rotation answer.

use serde_json::json;

use crate::app::{Db, TestApp};
use crate::console_support::{Browser, attempted, expect_redirect};
use crate::support::app_with;

/// What a hostile receiver answers, and a producer's event id with markup.
const SCRIPT: &str = "<script>alert(1)</script>";
const EVENT: &str = "order.7<b>x</b>";

/// An incident: `flaky` fails with a 503 whose body is markup, `gone` is paused, and
/// `rejecting` has a dead job; `acme` is healthy. Returns the flaky job's id.
async fn incident(app: &TestApp) -> String {
    for id in ["acme", "flaky", "gone", "rejecting"] {
        app.create_subscriber(id).await;
    }
    let flaky = attempted(app, "flaky", EVENT, false, Some(SCRIPT)).await;
    attempted(app, "rejecting", "e-dead", true, None).await;
    app.patch_json("/v1/subscribers/gone", &json!({"enabled": false}))
        .await;
    app.job("gone", EVENT, json!({})).await;
    app.advance(1_000);
    flaky
}

fn assert_escaped(page: &str, path: &str) {
    assert!(
        !page.contains(SCRIPT),
        "{path} shows a receiver's markup unescaped"
    );
    assert!(
        !page.contains("<b>x</b>"),
        "{path} shows an event id's markup unescaped"
    );
}

async fn every_page_renders_the_incident_escaped(db: Db) {
    let app = app_with().backend(db).start().await;
    let secret = app
        .subscriber("secretive", "https://example.com/s", None)
        .await;
    let job_id = incident(&app).await;
    let mut browser = Browser::new(&app);

    let overview = browser.page("/console/").await;
    assert_escaped(&overview, "/console/");
    assert!(
        overview.contains("href=\"/console/subscribers/flaky\""),
        "the failing subscriber"
    );
    assert!(overview.contains("http_5xx"));
    assert!(overview.contains("<svg"), "the chart");

    let subscribers = browser.page("/console/subscribers").await;
    let order: Vec<usize> = ["flaky", "rejecting", "gone", "acme"]
        .iter()
        .map(|id| {
            subscribers
                .find(&format!("data-subscriber=\"{id}\""))
                .unwrap()
        })
        .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "failing first, then paused: {order:?}"
    );
    let failing = browser.page("/console/subscribers?health=failing").await;
    assert!(failing.contains("data-subscriber=\"flaky\""));
    assert!(!failing.contains("data-subscriber=\"acme\""));
    let bad = browser.get("/console/subscribers?health=sick").await;
    assert_eq!(bad.status, 422);
    assert!(bad.text.contains("health"), "{}", bad.text);

    let page = browser.page("/console/subscribers/flaky").await;
    assert_escaped(&page, "subscriber");
    assert!(page.contains("HTTP 503"));
    let page = browser.page("/console/subscribers/secretive").await;
    assert!(
        !page.contains(&secret),
        "a subscriber page never shows its secret"
    );

    let job = browser.page(&format!("/console/jobs/{job_id}")).await;
    assert_escaped(&job, "job");
    assert!(
        job.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
        "the body excerpt, escaped"
    );
    assert!(job.contains("test-worker"), "the attempt's lease owner");
    assert!(job.contains("Retry now"));

    let encoded = "order%2E7%3Cb%3Ex%3C%2Fb%3E";
    let event = browser.page(&format!("/console/events/{encoded}")).await;
    assert_escaped(&event, "event");
    assert!(event.contains("href=\"/console/subscribers/flaky\""));
    assert!(event.contains("href=\"/console/subscribers/gone\""));
    let lookup = browser
        .get(&format!("/console/events?event_id={encoded}"))
        .await;
    expect_redirect(&lookup, &format!("/console/events/{encoded}"));

    let dead = browser.page("/console/dead-letters").await;
    assert!(dead.contains("non_retryable_response"));
    assert!(dead.contains("href=\"/console/subscribers/rejecting\""));
    let events = browser.page("/console/events").await;
    assert!(
        events.contains("order.7&#60;b&#62;x&#60;/b&#62;"),
        "the affected event, escaped: {events}"
    );
    for page in [
        "/console/destinations",
        "/console/replays",
        "/console/events",
    ] {
        let html = browser.page(page).await;
        assert_escaped(&html, page);
        assert!(!html.contains(&secret), "{page}");
    }
    for (path, status) in [
        ("/console/jobs/not-a-uuid", 422),
        ("/console/jobs/01937c5e-0000-7000-8000-000000000000", 404),
        ("/console/subscribers/nobody", 404),
        ("/console/events/nothing-here", 404),
    ] {
        let reply = browser.get(path).await;
        assert_eq!(reply.status, status, "{path}: {}", reply.text);
        assert!(
            reply
                .header("content-type")
                .unwrap()
                .starts_with("text/html"),
            "{path}"
        );
    }
}

crate::on_both_backends!(every_page_renders_the_incident_escaped);

#[tokio::test]
async fn the_overview_lists_this_instance_from_its_heartbeat() {
    let app = app_with().start().await;
    let mut browser = Browser::new(&app);
    // The heartbeat is written when the instance starts; poll briefly for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let page = browser.page("/console/").await;
        if page.contains("Live instances (1)") {
            assert!(page.contains(env!("CARGO_PKG_VERSION")));
            assert!(
                page.contains("no worker"),
                "an API-only instance has no slots"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no live instance: {page}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A subscriber's page shows its event types; a job's page its event type and the
/// schedule that made it (issue #20).
#[tokio::test]
async fn pages_show_event_types_and_schedules() {
    let app = app_with().start().await;
    app.put_subscriber(
        "warehouse",
        &json!({"url": "https://example.com/w", "event_types": ["shipment.*", "invoice.paid"]}),
    )
    .await;
    let fan_out = json!({"event_id": "s-1", "event_type": "shipment.delivered", "payload": {}});
    let typed = app.post_json("/v1/events", &fan_out).await.json();
    let typed_id = typed["items"][0]["id"].as_str().unwrap().to_owned();
    let schedule = json!({
        "subscriber_id": "warehouse",
        "every_ms": 60_000,
        "event_id": "stock:{period_start}",
        "payload": {},
    });
    app.put_json("/v1/schedules/stock-count", &schedule).await;
    let ran = app
        .post_json("/v1/schedules/stock-count/run", &json!({}))
        .await
        .json();
    let scheduled_id = ran["items"][0]["id"].as_str().unwrap().to_owned();
    let mut browser = Browser::new(&app);

    let subscriber = browser.page("/console/subscribers/warehouse").await;
    assert!(
        subscriber.contains("shipment.*, invoice.paid"),
        "{subscriber}"
    );
    let job = browser.page(&format!("/console/jobs/{typed_id}")).await;
    assert!(job.contains("<dt>Event type</dt><dd class=\"mono\">shipment.delivered</dd>"));
    assert!(!job.contains("<dt>Schedule</dt>"));
    let job = browser.page(&format!("/console/jobs/{scheduled_id}")).await;
    assert!(job.contains("<dt>Schedule</dt><dd class=\"mono\">stock-count</dd>"));
    assert!(!job.contains("<dt>Event type</dt>"));
}

/// Issue #33: the overview says which jobs wait behind which hold, and where: a paused
/// destination holds its healthy subscribers' jobs; a paused subscriber its own.
#[tokio::test]
async fn the_overview_shows_what_holds_jobs_back() {
    let app = app_with().start().await;
    for id in ["calm", "quiet"] {
        app.put_subscriber(id, &json!({"url": format!("https://held.example/{id}")}))
            .await;
        app.job(id, &format!("evt-{id}"), json!({})).await;
    }
    app.put_subscriber("stopped", &json!({"url": "https://other.example/s"}))
        .await;
    app.job("stopped", "evt-stopped", json!({})).await;
    app.job("stopped", "evt-stopped-2", json!({})).await;
    let pause = json!({"paused": true});
    let put = app
        .put_json("/v1/destinations/held.example:443", &pause)
        .await;
    assert_eq!(put.status, 200, "{}", put.text);
    let off = app
        .patch_json("/v1/subscribers/stopped", &json!({"enabled": false}))
        .await;
    assert_eq!(off.status, 200);
    let mut browser = Browser::new(&app);
    let page = browser.page("/console/").await;
    assert!(page.contains("Held back now (2)"), "{page}");
    let row = |reason: &str, place: &str, numbers: &str| {
        format!(
            "<td><span class=\"badge\">{reason}</span></td><td><a class=\"mono\" href=\"{}\">{place}</a></td>{numbers}",
            if reason.starts_with("destination") {
                "/console/destinations".to_owned()
            } else {
                format!("/console/subscribers/{place}")
            }
        )
    };
    let cell = |n: u32| format!("<td class=\"num\">{n}</td>");
    let numbers = |subscribers, healthy, jobs| {
        format!("{}{}{}", cell(subscribers), cell(healthy), cell(jobs))
    };
    assert!(
        page.contains(&row("subscriber_paused", "stopped", &numbers(1, 0, 2))),
        "{page}"
    );
    assert!(
        page.contains(&row(
            "destination_paused",
            "held.example:443",
            &numbers(2, 2, 2)
        )),
        "{page}"
    );
}
