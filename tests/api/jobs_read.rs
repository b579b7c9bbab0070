//! `GET /v1/jobs` (filters, order, paging) and `GET /v1/jobs/{id}/attempts`.

use serde_json::{Value, json};

use crate::support::{TestApp, at, expect_json, job, spawn_app};

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn list(app: &TestApp, query: &str) -> Value {
    expect_json(&app.get(&format!("/v1/jobs?{query}")).await, 200)
}

async fn create(app: &TestApp, subscriber: &str, event: &str, extra: Value) -> String {
    let body = app.create_job(&job(subscriber, event, extra)).await;
    body["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn filters_combine_and_results_are_newest_first() {
    let app = spawn_app().await;
    app.create_subscriber("s1").await;
    app.create_subscriber("s2").await;
    let later = json!({"delay_ms": 60_000});
    let s1e1 = create(&app, "s1", "e1", later.clone()).await;
    let s1e2 = create(&app, "s1", "e2", json!({})).await;
    let s2e1 = create(&app, "s2", "e1", later.clone()).await;
    let s2e3 = create(&app, "s2", "e3", later).await;

    assert_eq!(
        ids(&list(&app, "").await),
        [s2e3.as_str(), s2e1.as_str(), s1e2.as_str(), s1e1.as_str()]
    );
    assert_eq!(
        ids(&list(&app, "event_id=e1").await),
        [s2e1.as_str(), s1e1.as_str()]
    );
    assert_eq!(
        ids(&list(&app, "subscriber_id=s1").await),
        [s1e2.as_str(), s1e1.as_str()]
    );
    assert_eq!(
        ids(&list(&app, "subscriber_id=s2&event_id=e1").await),
        [s2e1.as_str()]
    );
    assert!(ids(&list(&app, "event_id=nope").await).is_empty());
    assert!(ids(&list(&app, "subscriber_id=s3").await).is_empty());

    // Only s1e2 is due: claim it so that states differ.
    let claimed = app.claim().await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].job_id.to_string(), s1e2);
    assert_eq!(ids(&list(&app, "state=in_flight").await), [s1e2.as_str()]);
    assert_eq!(
        ids(&list(&app, "state=scheduled").await),
        [s2e3.as_str(), s2e1.as_str(), s1e1.as_str()]
    );
    assert_eq!(
        ids(&list(&app, "state=scheduled&subscriber_id=s1").await),
        [s1e1.as_str()]
    );
    for state in ["retrying", "delivered", "dead", "cancelled"] {
        let page = list(&app, &format!("state={state}")).await;
        assert_eq!(page, json!({"items": [], "next_cursor": null}), "{state}");
    }
}

#[tokio::test]
async fn paging_follows_next_cursor_to_the_end_without_repeats() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let mut created = Vec::new();
    for n in 0..5 {
        created.push(create(&app, "s", &format!("e{n}"), json!({})).await);
    }
    created.reverse();
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut query = "limit=2".to_owned();
    loop {
        let page = list(&app, &query).await;
        let page_ids = ids(&page);
        sizes.push(page_ids.len());
        seen.extend(page_ids);
        match page["next_cursor"].as_str() {
            Some(cursor) => query = format!("limit=2&cursor={cursor}"),
            None => break,
        }
        assert!(sizes.len() < 10, "paging does not end");
    }
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(seen, created);

    // A filter holds across pages.
    let first = list(&app, "limit=1&subscriber_id=s").await;
    let cursor = first["next_cursor"].as_str().expect("more pages");
    let second = list(&app, &format!("limit=1&subscriber_id=s&cursor={cursor}")).await;
    assert_eq!(ids(&second), [created[1].as_str()]);
}

#[tokio::test]
async fn a_fresh_job_has_no_attempts() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let id = create(&app, "s", "e", json!({})).await;
    let reply = app.get(&format!("/v1/jobs/{id}/attempts")).await;
    assert_eq!(expect_json(&reply, 200), json!({"items": []}));
}

#[tokio::test]
async fn a_claim_shows_an_in_progress_attempt_and_the_lease() {
    let app = spawn_app().await;
    app.create_subscriber("s").await;
    let id = create(&app, "s", "e", json!({"delay_ms": 2000})).await;
    app.advance(2_500);
    assert_eq!(app.claim().await.len(), 1);

    let reply = app.get(&format!("/v1/jobs/{id}/attempts")).await;
    let attempts = expect_json(&reply, 200);
    let items = attempts["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{attempts}");
    let attempt = &items[0];
    for (field, value) in [
        ("number", json!(1)),
        ("started_at", json!(at(2_500))),
        ("finished_at", Value::Null),
        ("outcome", json!("in_progress")),
        ("status", Value::Null),
        ("error_class", Value::Null),
        ("reason", Value::Null),
        ("lease_owner", json!("test-worker")),
        ("duration_ms", Value::Null),
    ] {
        assert_eq!(attempt.get(field), Some(&value), "{field}: {attempt}");
    }

    let job = expect_json(&app.get(&format!("/v1/jobs/{id}")).await, 200);
    assert_eq!(job["state"], "in_flight");
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["waiting_reason"], "in_flight");
    assert_eq!(job["updated_at"], at(2_500));
    assert_eq!(
        job["lease"],
        json!({"owner": "test-worker", "expires_at": at(32_500)})
    );
}
