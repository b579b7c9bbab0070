//! `DELETE /v1/subscribers/{id}` (issue #16 part 8), on both backends: the waiting jobs
//! end `dead` (`subscriber_deleted`), the history stays readable by job and event id,
//! the id may be registered again as a new subscriber, an unknown id is a 404 that
//! writes nothing; while a deletion's history still moves, the id is neither found nor
//! free (a `PUT` answers 409).

use reqwest::Method;
use serde_json::{Value, json};

use crate::app::{Db, TestApp, metric};
use crate::support::{app_with, at, expect_json, expect_problem, job};

async fn delete(app: &TestApp, id: &str) -> crate::app::Reply {
    app.send(app.request(Method::DELETE, &format!("/v1/subscribers/{id}")))
        .await
}

async fn a_deletion_ends_the_waiting_jobs_and_frees_the_id(db: Db) {
    let app = app_with().backend(db).start().await;
    let old = app.create_subscriber("acme").await;
    app.create_subscriber("other").await;
    let waiting = app.job("acme", "evt-1", json!({})).await;
    let later = app
        .job("acme", "evt-2", json!({"deliver_at": at(3_600_000)}))
        .await;
    app.advance(1_000);

    let deleted = expect_json(&delete(&app, "acme").await, 200);
    assert_eq!(
        deleted,
        json!({"deleted": "acme", "jobs_dead": 2, "deleted_at": at(1_000)})
    );
    for job in [&waiting, &later] {
        let read = app.job_now(job).await;
        assert_eq!(read["state"], "dead", "{read}");
        assert_eq!(read["dead_reason"], "subscriber_deleted", "{read}");
        assert_eq!(read["subscriber_id"], "acme", "{read}");
    }
    let by_event = app.get_json("/v1/jobs?event_id=evt-1").await;
    assert_eq!(by_event["items"][0]["id"], waiting["id"]);
    let by_subscriber = app.get_json("/v1/jobs?subscriber_id=acme").await;
    assert_eq!(
        by_subscriber["items"],
        json!([]),
        "the old jobs are not the new one's"
    );
    expect_problem(&app.get("/v1/subscribers/acme").await, 404);
    let listed = app.get_json("/v1/subscribers").await;
    let ids: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["id"])
        .collect();
    assert_eq!(ids, [&json!("other")]);
    let metrics = app.metrics().await;
    assert_eq!(
        metric(
            &metrics,
            "deferhook_dead_jobs{reason=\"subscriber_deleted\"}"
        ),
        2.0
    );

    // registered again: a new subscriber, the same event id a new job
    app.advance(1_000);
    let new = app.create_subscriber("acme").await;
    assert_ne!(new["secret"], old["secret"]);
    assert_eq!(new["created_at"], at(2_000));
    let again = app.create_job(&job("acme", "evt-1", json!({}))).await;
    assert_ne!(again["id"], waiting["id"]);
    assert_eq!(again["state"], "scheduled");
    let stats = app.get_json("/v1/subscribers/acme/stats").await;
    assert_eq!(stats["jobs"]["dead"], 0, "{stats}");
}

async fn an_unknown_subscriber_is_a_404(db: Db) {
    let app = app_with().backend(db).start().await;
    let missing = expect_problem(&delete(&app, "nobody").await, 404);
    assert!(
        missing["detail"].as_str().unwrap().contains("nobody"),
        "{missing}"
    );
    app.create_subscriber("acme").await;
    expect_json(&delete(&app, "acme").await, 200);
    expect_problem(&delete(&app, "acme").await, 404);
    // a tombstone's internal id is no subscriber
    expect_problem(&delete(&app, "acme%2F0193").await, 404);
}

async fn a_put_while_the_history_moves_answers_409(db: Db) {
    let app = app_with().backend(db).start().await;
    app.create_subscriber("acme").await;
    for event in ["evt-1", "evt-2", "evt-3"] {
        app.job("acme", event, json!({})).await;
    }
    app.advance(1_000);
    // The first step only, as a DELETE of a long history leaves it when it answers.
    let begun = app.store.begin_subscriber_deletion("acme", app.now()).await;
    assert_eq!(begun.unwrap().map(|d| d.jobs_dead), Some(3));

    expect_problem(&app.get("/v1/subscribers/acme").await, 404);
    expect_problem(&app.get("/v1/subscribers/acme/stats").await, 404);
    let patch = app
        .patch_json("/v1/subscribers/acme", &json!({"enabled": true}))
        .await;
    expect_problem(&patch, 404);
    expect_problem(&delete(&app, "acme").await, 404);
    let listed = app.get_json("/v1/subscribers").await;
    assert_eq!(listed["items"], json!([]), "{listed}");
    let by_subscriber = app.get_json("/v1/jobs?subscriber_id=acme").await;
    assert_eq!(by_subscriber["items"], json!([]), "{by_subscriber}");
    let url = json!({"url": "https://example.com/hooks/acme"});
    let conflict = expect_problem(&app.put_json("/v1/subscribers/acme", &url).await, 409);
    assert!(
        conflict["detail"]
            .as_str()
            .unwrap()
            .contains("`acme` is being deleted; try again in a moment"),
        "{conflict}"
    );
    let job = app
        .post_json("/v1/jobs", &job("acme", "evt-4", json!({})))
        .await;
    expect_problem(&job, 404);

    // the move ends (one row per batch): the id is free
    loop {
        let step = app.store.move_deleted_history("acme", 1).await.unwrap();
        if step.expect("being deleted").finished {
            break;
        }
    }
    let created = app.create_subscriber("acme").await;
    assert!(created["secret"].is_string(), "{created}");
    let by_subscriber = app.get_json("/v1/jobs?subscriber_id=acme").await;
    assert_eq!(by_subscriber["items"], json!([]), "{by_subscriber}");
}

crate::on_both_backends!(
    a_deletion_ends_the_waiting_jobs_and_frees_the_id,
    an_unknown_subscriber_is_a_404,
    a_put_while_the_history_moves_answers_409,
);
