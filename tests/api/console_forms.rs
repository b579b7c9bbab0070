//! The console's forms (issue #19): each does what the API's action does, answers
//! with a redirect to its page (or the page with a clear error naming the field, and
//! nothing changed), and is recorded in the audit trail with the API's action name.

use serde_json::{Value, json};

use crate::app::TestApp;
use crate::console_support::{Browser, attempted, expect_redirect};
use crate::support::app_with;

async fn audit(app: &TestApp) -> Vec<Value> {
    app.get_json("/v1/audit").await["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn subscribers_are_paused_resumed_and_resumed_together() {
    let app = app_with().start().await;
    for id in ["a", "b", "c"] {
        app.create_subscriber(id).await;
    }
    let mut browser = Browser::new(&app);
    browser.page("/console/subscribers").await;
    for id in ["a", "b"] {
        let reply = browser
            .post(
                &format!("/console/subscribers/{id}/enabled"),
                &[("enabled", "false"), ("back", "/console/subscribers")],
            )
            .await;
        expect_redirect(&reply, "/console/subscribers?done=paused");
    }
    let page = browser
        .page("/console/subscribers?health=paused&done=paused")
        .await;
    assert!(page.contains("Paused: its jobs wait"), "the notice");
    assert!(
        page.contains("name=\"subscriber_id\" value=\"a\""),
        "a paused row can be ticked"
    );

    let bad = browser
        .post("/console/subscribers/a/enabled", &[("enabled", "maybe")])
        .await;
    assert_eq!(bad.status, 422);
    assert!(bad.text.contains("enabled"), "{}", bad.text);
    let none = browser.post("/console/subscribers/resume", &[]).await;
    assert_eq!(none.status, 422);
    assert!(none.text.contains("subscriber_id"), "{}", none.text);
    let unknown = browser
        .post(
            "/console/subscribers/resume",
            &[("subscriber_id", "a"), ("subscriber_id", "zz")],
        )
        .await;
    assert_eq!(unknown.status, 404, "{}", unknown.text);
    assert_eq!(
        app.get_json("/v1/subscribers/a").await["enabled"],
        false,
        "all or nothing"
    );

    let resumed = browser
        .post(
            "/console/subscribers/resume",
            &[("subscriber_id", "a"), ("subscriber_id", "b")],
        )
        .await;
    expect_redirect(&resumed, "/console/subscribers?done=resumed-some");
    for id in ["a", "b"] {
        assert_eq!(
            app.get_json(&format!("/v1/subscribers/{id}")).await["enabled"],
            true
        );
    }
    let trail = audit(&app).await;
    assert_eq!(trail[0]["action"], "subscriber.resume");
    assert_eq!(
        trail[0]["parameters"],
        json!({"subscriber_ids": ["a", "b"], "via": "console"})
    );
    // The entry carries the server's own id of the form's request (issue #34 part 4.10).
    let server_id = resumed.header("x-server-request-id").unwrap();
    assert_eq!(trail[0]["server_request_id"], server_id);
    assert_eq!(trail[0]["request_id"], server_id, "the browser sent no id");
    assert_ne!(trail[1]["server_request_id"], server_id);
    assert_eq!(trail[1]["action"], "subscriber.patch");
    assert_eq!(trail[1]["target"], "b");
    assert_eq!(
        trail[1]["parameters"],
        json!({"enabled": false, "via": "console"})
    );
}

#[tokio::test]
async fn a_rotated_secret_is_shown_once() {
    let app = app_with().start().await;
    let old = app.subscriber("acme", "https://example.com/h", None).await;
    let mut browser = Browser::new(&app);
    browser.page("/console/subscribers/acme").await;
    for grace in ["-1", "", "99999999999999999999"] {
        let bad = browser
            .post(
                "/console/subscribers/acme/rotate-secret",
                &[("grace_seconds", grace)],
            )
            .await;
        assert_eq!(bad.status, 422, "{grace:?}: {}", bad.text);
        assert!(bad.text.contains("grace_seconds"));
    }
    let rotated = browser
        .post(
            "/console/subscribers/acme/rotate-secret",
            &[("grace_seconds", "60")],
        )
        .await;
    assert_eq!(rotated.status, 200);
    assert_eq!(rotated.header("cache-control"), Some("no-store"));
    let start = rotated
        .text
        .find("whsec_")
        .expect("the new secret is shown");
    let secret: String = rotated.text[start..]
        .chars()
        .take_while(|c| !matches!(c, '<' | '"' | ' '))
        .collect();
    assert_ne!(secret, old);
    assert!(!rotated.text.contains(&old), "never the old one");
    let again = browser.page("/console/subscribers/acme").await;
    assert!(!again.contains(&secret), "shown once only");
    let trail = audit(&app).await;
    assert_eq!(trail[0]["action"], "subscriber.rotate_secret");
    assert!(!trail[0].to_string().contains(&secret));
}

#[tokio::test]
async fn a_destination_s_limit_is_changed_and_a_bad_one_refused() {
    let app = app_with().start().await;
    app.create_subscriber("acme").await;
    let mut browser = Browser::new(&app);
    let page = browser.page("/console/destinations").await;
    assert!(page.contains("example.com:443"));
    let bad = browser
        .post(
            "/console/destinations/example%2Ecom%3A443",
            &[("max_in_flight", "lots")],
        )
        .await;
    assert_eq!(bad.status, 422);
    assert!(bad.text.contains("max_in_flight"), "{}", bad.text);
    let set = browser
        .post(
            "/console/destinations/example%2Ecom%3A443",
            &[("max_in_flight", "7")],
        )
        .await;
    expect_redirect(&set, "/console/destinations?done=limit");
    let view = app.get_json("/v1/destinations/example.com:443").await;
    assert_eq!(view["max_in_flight"], 7);
    assert_eq!(view["max_in_flight_source"], "operator");
    let default = browser
        .post(
            "/console/destinations/example%2Ecom%3A443",
            &[("max_in_flight", "")],
        )
        .await;
    expect_redirect(&default, "/console/destinations?done=limit");
    let view = app.get_json("/v1/destinations/example.com:443").await;
    assert_eq!(view["max_in_flight_source"], "default");
    let bad = browser
        .post(
            "/console/destinations/example%2Ecom%3A443",
            &[("paused", "soon")],
        )
        .await;
    assert_eq!(bad.status, 422);
    assert!(bad.text.contains("paused"), "{}", bad.text);
    let unknown = browser
        .post(
            "/console/destinations/nowhere%2Eexample%3A443",
            &[("paused", "true")],
        )
        .await;
    assert_eq!(unknown.status, 404, "{}", unknown.text);
    let paused = browser
        .post(
            "/console/destinations/example%2Ecom%3A443",
            &[("paused", "true")],
        )
        .await;
    expect_redirect(&paused, "/console/destinations?done=destination");
    assert_eq!(
        app.get_json("/v1/destinations/example.com:443").await["paused"],
        true
    );
    let page = browser.page("/console/destinations?done=destination").await;
    assert!(page.contains("The destination is changed."));
    assert!(
        page.contains(">Resume</button>"),
        "a paused destination offers resume"
    );
    let resumed = browser
        .post(
            "/console/destinations/example%2Ecom%3A443",
            &[("paused", "false")],
        )
        .await;
    expect_redirect(&resumed, "/console/destinations?done=destination");
    assert_eq!(
        app.get_json("/v1/destinations/example.com:443").await["paused"],
        false
    );
    let trail = audit(&app).await;
    assert_eq!(
        trail[0]["parameters"],
        json!({"paused": false, "via": "console"})
    );
    assert_eq!(trail[3]["action"], "destination.put");
    assert_eq!(trail[1]["target"], "example.com:443");
}

/// Issue #33: the destinations page holds a circuit open or closed and hands it back.
#[tokio::test]
async fn a_destination_s_circuit_is_held_and_handed_back() {
    let app = app_with().start().await;
    app.create_subscriber("acme").await;
    let mut browser = Browser::new(&app);
    let page = browser.page("/console/destinations").await;
    assert!(page.contains(">Set circuit</button>"), "{page}");
    let path = "/console/destinations/example%2Ecom%3A443";
    let bad = browser.post(path, &[("circuit", "ajar")]).await;
    assert_eq!(bad.status, 422);
    assert!(bad.text.contains("circuit"), "{}", bad.text);
    let open = browser.post(path, &[("circuit", "open")]).await;
    expect_redirect(&open, "/console/destinations?done=circuit");
    let view = app.get_json("/v1/destinations/example.com:443").await;
    assert_eq!(
        (&view["circuit"]["state"], &view["circuit"]["forced"]),
        (&json!("open"), &json!("open")),
        "{view}"
    );
    let page = browser.page("/console/destinations?done=circuit").await;
    assert!(page.contains("circuit setting is changed"), "{page}");
    assert!(page.contains("held open"), "{page}");
    let auto = browser.post(path, &[("circuit", "auto")]).await;
    expect_redirect(&auto, "/console/destinations?done=circuit");
    let view = app.get_json("/v1/destinations/example.com:443").await;
    assert_eq!(view["circuit"]["forced"], json!(null), "{view}");
    let trail = audit(&app).await;
    assert_eq!(trail[0]["action"], "destination.put");
    assert_eq!(
        trail[0]["parameters"],
        json!({"circuit": "auto", "via": "console"})
    );
}

#[tokio::test]
async fn a_job_is_retried_rescheduled_and_cancelled() {
    let app = app_with().start().await;
    app.create_subscriber("acme").await;
    let retrying = attempted(&app, "acme", "e1", false, None).await;
    let mut browser = Browser::new(&app);
    let page = browser.page(&format!("/console/jobs/{retrying}")).await;
    assert!(page.contains("Retry now") && page.contains("Cancel"));
    let retried = browser
        .post(&format!("/console/jobs/{retrying}/retry"), &[])
        .await;
    expect_redirect(&retried, &format!("/console/jobs/{retrying}?done=retried"));
    let job = app.get_json(&format!("/v1/jobs/{retrying}")).await;
    assert_eq!(job["next_attempt_at"], app.now().to_rfc3339());
    // Retried again: not retrying any more, so 409, and the page says why.
    app.claim().await;
    let conflict = browser
        .post(&format!("/console/jobs/{retrying}/retry"), &[])
        .await;
    assert_eq!(conflict.status, 409, "{}", conflict.text);

    let later = app.job("acme", "e2", json!({"delay_ms": 60_000})).await;
    let later = later["id"].as_str().unwrap().to_owned();
    browser.page(&format!("/console/jobs/{later}")).await;
    let bad = browser
        .post(
            &format!("/console/jobs/{later}/reschedule"),
            &[("deliver_at", "tomorrow")],
        )
        .await;
    assert_eq!(bad.status, 422);
    assert!(bad.text.contains("deliver_at"), "{}", bad.text);
    let at = app.now().plus_ms(120_000).to_rfc3339();
    let moved = browser
        .post(
            &format!("/console/jobs/{later}/reschedule"),
            &[("deliver_at", &at)],
        )
        .await;
    expect_redirect(&moved, &format!("/console/jobs/{later}?done=rescheduled"));
    assert_eq!(
        app.get_json(&format!("/v1/jobs/{later}")).await["deliver_at"],
        at
    );
    let cancelled = browser
        .post(&format!("/console/jobs/{later}/cancel"), &[])
        .await;
    expect_redirect(&cancelled, &format!("/console/jobs/{later}?done=cancelled"));
    assert_eq!(
        app.get_json(&format!("/v1/jobs/{later}")).await["state"],
        "cancelled"
    );
    let actions: Vec<Value> = audit(&app)
        .await
        .iter()
        .map(|e| e["action"].clone())
        .collect();
    assert_eq!(actions[..3], ["job.cancel", "job.reschedule", "job.retry"]);
}

/// Issue #33: the dead letters lead with their causes, and their groups are paged, never
/// silently capped (the shared-host incident's 410 group was past a cap of 200).
#[tokio::test]
async fn dead_letters_show_every_cause_and_page_their_groups() {
    let app = app_with().start().await;
    for n in 0..105 {
        let id = format!("s{n:03}");
        app.create_subscriber(&id).await;
        attempted(&app, &id, &format!("e{n}"), true, None).await;
    }
    let mut browser = Browser::new(&app);
    let first = browser.page("/console/dead-letters").await;
    assert!(first.contains("<h2>By cause</h2>"), "{first}");
    assert!(first.contains("<code>http_4xx 400</code>"), "{first}");
    assert!(
        first.contains("dead_reason=non_retryable_response&#38;error_class=http_4xx&#38;dry_run=1"),
        "a cause links to its dry run: {first}"
    );
    assert!(first.contains("Groups 1–100 of 105"), "{first}");
    assert!(
        first.contains("href=\"/console/dead-letters?page=2\""),
        "{first}"
    );
    assert!(first.contains("s099") && !first.contains("s100"), "{first}");
    let second = browser.page("/console/dead-letters?page=2").await;
    assert!(second.contains("Groups 101–105 of 105"), "{second}");
    assert!(
        second.contains("s104") && !second.contains("s000<"),
        "{second}"
    );
    assert!(!second.contains("rel=\"next\""), "{second}");
    let bad = browser.get("/console/dead-letters?page=0").await;
    assert_eq!(bad.status, 422);
    assert!(bad.text.contains("page"), "{}", bad.text);
}

#[tokio::test]
async fn a_slice_of_dead_letters_is_counted_then_replayed_then_cancelled() {
    let app = app_with().start().await;
    app.create_subscriber("a").await;
    app.create_subscriber("b").await;
    for n in 0..3 {
        attempted(&app, "a", &format!("a{n}"), true, None).await;
    }
    attempted(&app, "b", "b0", true, None).await;
    let mut browser = Browser::new(&app);
    let groups = browser.page("/console/dead-letters").await;
    assert!(
        groups.contains("subscriber_id=a&#38;dead_reason=non_retryable_response&#38;dry_run=1"),
        "each group links to its dry run: {groups}"
    );

    let dry = browser
        .page("/console/dead-letters?subscriber_id=a&dead_reason=non_retryable_response&dry_run=1")
        .await;
    assert!(dry.contains("<strong>3</strong> dead jobs match"), "{dry}");
    assert_eq!(
        app.get_json("/v1/replays").await["items"],
        json!([]),
        "a dry run changes nothing"
    );
    let bad = browser
        .get("/console/dead-letters?dead_reason=tired&dry_run=1")
        .await;
    assert_eq!(bad.status, 422);
    assert!(bad.text.contains("dead_reason"));

    let too_fast = browser
        .post(
            "/console/replays",
            &[("subscriber_id", "a"), ("rate_per_second", "0")],
        )
        .await;
    assert_eq!(too_fast.status, 422, "{}", too_fast.text);
    assert!(too_fast.text.contains("rate_per_second"));
    let started = browser
        .post(
            "/console/replays",
            &[
                ("subscriber_id", "a"),
                ("dead_reason", "non_retryable_response"),
                ("error_class", ""),
                ("max_jobs", "100"),
                ("rate_per_second", "1"),
            ],
        )
        .await;
    expect_redirect(&started, "/console/replays?done=replay-started");
    let replays = app.get_json("/v1/replays").await;
    let replay = &replays["items"][0];
    assert_eq!(replay["matched"], 3);
    assert_eq!(replay["rate_per_second"], 1);
    let page = browser.page("/console/replays").await;
    assert!(
        page.contains("hx-trigger=\"every 2s\""),
        "a running replay refreshes"
    );
    assert!(page.contains("<progress max=\"3\" value=\"0\">"), "{page}");
    let id = replay["id"].as_str().unwrap();
    let cancelled = browser
        .post(&format!("/console/replays/{id}/cancel"), &[])
        .await;
    expect_redirect(&cancelled, "/console/replays?done=replay-cancelled");
    assert_eq!(
        app.get_json(&format!("/v1/replays/{id}")).await["state"],
        "cancelled"
    );
    let trail = audit(&app).await;
    assert_eq!(trail[0]["action"], "replay.cancel");
    assert_eq!(trail[1]["action"], "replay.create");
    assert_eq!(trail[1]["target"], id);
}
