//! An action and its audit entry cannot be separated (issue #34 part 1; docs/DESIGN.md
//! §5.11), on both backends: the entry is written before the action runs and settled
//! with its answer. An action whose entry cannot be written is answered 503 and not
//! taken; one whose settlement never comes (the server stopped between the two, here a
//! database that refuses the settlement) keeps its entry, listed with no status. A 5xx
//! keeps the entry with its status; a 4xx withdraws it. (tests/delivery/process.rs
//! kills a real server between the two.)

use serde_json::{Value, json};

use crate::app::{Database, Db, TestApp};
use crate::console_support::Browser;
use crate::db_faults::{DbFault, DbFaults};
use crate::support::{app_with, at, expect_json, expect_problem, job};

/// The faults a test arms and disarms together.
struct Faults {
    database: DbFaults,
    which: &'static [DbFault],
}

impl Faults {
    async fn on(&self) {
        self.database.arm_all(self.which).await;
    }

    async fn off(&self) {
        self.database.disarm_all(self.which).await;
    }
}

/// An instance on a fresh database of `db` whose `faults` the test arms.
async fn start(db: Db, faults: &'static [DbFault]) -> (TestApp, Database, Faults) {
    let database = db.database().await;
    let app = app_with().on(&database.url).start().await;
    let faults = Faults {
        database: DbFaults::install(&database).await,
        which: faults,
    };
    (app, database, faults)
}

/// A job of subscriber `acme`, due in an hour: `scheduled`, so it can be cancelled.
async fn waiting_job(app: &TestApp) -> String {
    app.create_subscriber("acme").await;
    let created = app
        .create_job(&job(
            "acme",
            "evt-1",
            json!({ "deliver_at": at(3_600_000) }),
        ))
        .await;
    created["id"].as_str().unwrap().to_owned()
}

async fn entries(app: &TestApp, action: &str) -> Vec<Value> {
    let page = app.get_json(&format!("/v1/audit?action={action}")).await;
    page["items"].as_array().unwrap().clone()
}

async fn an_action_whose_entry_cannot_be_begun_is_not_taken(db: Db) {
    let (app, _database, faults) = start(db, &[DbFault::AuditEntry]).await;
    let id = waiting_job(&app).await;
    let mut browser = Browser::new(&app);
    browser.page(&format!("/console/jobs/{id}")).await;
    faults.on().await;

    let reply = app
        .post_json(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    expect_problem(&reply, 503);
    assert!(reply.header("retry-after").is_some());
    let form = browser
        .post(&format!("/console/jobs/{id}/cancel"), &[])
        .await;
    assert_eq!(form.status, 503, "{}", form.text);
    assert!(form.text.contains("audit trail"), "{}", form.text);
    let paused = app
        .patch_json("/v1/subscribers/acme", &json!({ "enabled": false }))
        .await;
    expect_problem(&paused, 503);

    faults.off().await;
    let job = app.get_json(&format!("/v1/jobs/{id}")).await;
    assert_eq!(job["state"], "scheduled", "the action was taken: {job}");
    assert_eq!(app.get_json("/v1/subscribers/acme").await["enabled"], true);
    assert!(entries(&app, "job.cancel").await.is_empty());
    assert!(entries(&app, "subscriber.patch").await.is_empty());
    let metrics = app.metrics().await;
    assert!(crate::app::metric(&metrics, "deferhook_audit_write_failures_total") >= 3.0);
}

async fn an_entry_never_settled_stays_listed_without_a_status(db: Db) {
    let (app, _database, faults) = start(db, &[DbFault::AuditSettlement]).await;
    let id = waiting_job(&app).await;
    let mut browser = Browser::new(&app);
    browser.page("/console/subscribers").await;
    faults.on().await;

    let reply = app
        .post_json(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(expect_json(&reply, 200)["state"], "cancelled");
    let form = browser
        .post("/console/subscribers/acme/enabled", &[("enabled", "false")])
        .await;
    assert_eq!(form.status, 303, "{}", form.text);
    // A refused action's entry cannot be withdrawn either: it stays, unsettled.
    let refused = app
        .post_json(&format!("/v1/jobs/{id}/retry"), &json!({}))
        .await;
    expect_problem(&refused, 409);
    faults.off().await;

    let cancel = &entries(&app, "job.cancel").await;
    assert_eq!(cancel.len(), 1, "{cancel:?}");
    assert_eq!(cancel[0]["status"], Value::Null, "{}", cancel[0]);
    assert_eq!(cancel[0]["target"], id);
    let patch = &entries(&app, "subscriber.patch").await;
    assert_eq!(patch.len(), 1, "{patch:?}");
    assert_eq!(patch[0]["status"], Value::Null);
    assert_eq!(patch[0]["parameters"]["via"], "console");
    assert_eq!(entries(&app, "job.retry").await[0]["status"], Value::Null);
    assert_eq!(app.get_json("/v1/subscribers/acme").await["enabled"], false);
}

async fn a_server_error_keeps_its_entry_and_a_refusal_withdraws_it(db: Db) {
    let (app, _database, faults) = start(db, &[DbFault::JobChange]).await;
    let id = waiting_job(&app).await;
    // The database refuses the job's change: an internal error, answered 500.
    faults.on().await;
    let failed = app
        .post_json(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    expect_problem(&failed, 500);
    faults.off().await;
    // 409: a scheduled job cannot be retried; 404: no such job
    let refused = app
        .post_json(&format!("/v1/jobs/{id}/retry"), &json!({}))
        .await;
    expect_problem(&refused, 409);
    let missing = format!("/v1/jobs/{}/cancel", uuid::Uuid::now_v7());
    expect_problem(&app.post_json(&missing, &json!({})).await, 404);

    let cancel = entries(&app, "job.cancel").await;
    assert_eq!(cancel.len(), 1, "{cancel:?}");
    assert_eq!(cancel[0]["status"], 500);
    assert_eq!(cancel[0]["target"], id);
    assert!(entries(&app, "job.retry").await.is_empty());
    let cancelled = app
        .post_json(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    expect_json(&cancelled, 200);
    let statuses: Vec<Value> = entries(&app, "job.cancel")
        .await
        .iter()
        .map(|e| e["status"].clone())
        .collect();
    assert_eq!(statuses, [json!(200), json!(500)]);
}

/// CASES C-19 after the commit: a job control action whose view cannot be read
/// afterwards (its subscriber's load, which a due job's view explains its wait by)
/// answers 200 with the job as written, not a 503 that says nothing was.
async fn a_job_action_committed_then_unreadable_answers_what_it_wrote(db: Db) {
    // The history its view reads cannot be read while the job is changed.
    let (app, _database, faults) = start(db, &[DbFault::HistoryUnreadable]).await;
    let id = waiting_job(&app).await;
    // Due now: its view reads its subscriber's load.
    let later = at(0);
    faults.on().await;
    let reply = app
        .patch_json(&format!("/v1/jobs/{id}"), &json!({ "deliver_at": later }))
        .await;
    faults.off().await;
    let answered = expect_json(&reply, 200);
    assert_eq!(answered["state"], "scheduled");
    assert_eq!(answered["deliver_at"], later);
    let read = app.get_json(&format!("/v1/jobs/{id}")).await;
    assert_eq!(answered, read, "the answer is the job as stored");
    let entry = &entries(&app, "job.reschedule").await[0];
    assert_eq!(entry["status"], 200, "{entry}");
}

/// Issue #34's second probe: writes whose view could not be read after their commit
/// answered 503 "nothing was written", and a created subscriber's generated secret was
/// never shown. Each answers what it wrote, and the entry is settled with that status.
async fn writes_committed_then_unreadable_answer_what_they_wrote(db: Db) {
    let (app, _database, faults) = start(
        db,
        &[DbFault::HistoryUnreadable, DbFault::ScheduleRunRecord],
    )
    .await;
    let schedule = json!({
        "subscriber_id": "acme", "cron": "0 0 * * *",
        "event_id": "nightly:{period_start}", "payload": {"a": 1},
    });
    faults.on().await;
    let created = app
        .put_json(
            "/v1/subscribers/acme",
            &json!({ "url": "https://example.com/hooks/acme" }),
        )
        .await;
    let view = expect_json(&created, 201);
    assert!(
        view["secret"]
            .as_str()
            .is_some_and(|s| s.starts_with("whsec_")),
        "the generated secret is shown once: {view}"
    );
    let patched = app
        .patch_json("/v1/subscribers/acme", &json!({ "enabled": false }))
        .await;
    assert_eq!(expect_json(&patched, 200)["enabled"], false);
    let patched = app
        .patch_json("/v1/subscribers/acme", &json!({ "enabled": true }))
        .await;
    assert_eq!(expect_json(&patched, 200)["enabled"], true);
    expect_json(&app.put_json("/v1/schedules/nightly", &schedule).await, 201);
    let run = app.post_json("/v1/schedules/nightly/run", &json!({})).await;
    assert_eq!(expect_json(&run, 201)["items"].as_array().unwrap().len(), 1);
    faults.off().await;
    // The last run is recorded now, so the next view reads its job.
    expect_json(
        &app.post_json("/v1/schedules/nightly/run", &json!({})).await,
        200,
    );
    faults.on().await;
    let mut changed = schedule.clone();
    changed["payload"] = json!({"a": 2});
    let put = app.put_json("/v1/schedules/nightly", &changed).await;
    assert_eq!(expect_json(&put, 200)["payload"], json!({"a": 2}));
    faults.off().await;

    for action in [
        "subscriber.put",
        "subscriber.patch",
        "schedule.put",
        "schedule.run",
    ] {
        for entry in entries(&app, action).await {
            assert!(entry["status"].as_u64().is_some_and(|s| s < 300), "{entry}");
        }
    }
}

/// Issue #34's second probe: a destination change and a replay took their targets from
/// the answer, so an entry never settled had none and a search by target missed the
/// action. Both are named when begun.
async fn an_unsettled_entry_names_its_destination_and_replay(db: Db) {
    let (app, _database, faults) = start(db, &[DbFault::AuditSettlement]).await;
    waiting_job(&app).await;
    let key = app.get_json("/v1/subscribers/acme").await["destination"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut browser = Browser::new(&app);
    browser.page("/console/destinations").await;
    faults.on().await;
    // The path spelled with upper-case letters is the same destination.
    let spelled = key.to_uppercase();
    let form = browser
        .post(
            &format!("/console/destinations/{spelled}"),
            &[("max_in_flight", "4")],
        )
        .await;
    assert_eq!(form.status, 303, "{}", form.text);
    let put = app
        .put_json(
            &format!("/v1/destinations/{spelled}"),
            &json!({ "max_in_flight": 3 }),
        )
        .await;
    assert_eq!(expect_json(&put, 200)["max_in_flight"], 3);
    let replay = app
        .post_json(
            "/v1/replays",
            &json!({ "all": true, "max_jobs": 10, "rate_per_second": 5 }),
        )
        .await;
    let replay_id = expect_json(&replay, 202)["id"].as_str().unwrap().to_owned();
    faults.off().await;

    let found = app
        .get_json(&format!("/v1/audit?action=destination.put&target={key}"))
        .await;
    let found = found["items"].as_array().unwrap();
    assert_eq!(
        found.len(),
        2,
        "the console's change and the API's: {found:?}"
    );
    assert!(found.iter().all(|e| e["status"].is_null()), "{found:?}");
    assert_eq!(found[1]["parameters"]["via"], "console");
    let created = &entries(&app, "replay.create").await;
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0]["target"], replay_id);
    assert_eq!(created[0]["status"], Value::Null);
}

crate::on_both_backends!(
    writes_committed_then_unreadable_answer_what_they_wrote,
    an_unsettled_entry_names_its_destination_and_replay,
    an_action_whose_entry_cannot_be_begun_is_not_taken,
    an_entry_never_settled_stays_listed_without_a_status,
    a_server_error_keeps_its_entry_and_a_refusal_withdraws_it,
    a_job_action_committed_then_unreadable_answers_what_it_wrote,
);
