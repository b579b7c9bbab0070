//! Clients that hang up (issue #34, part 1; docs/DESIGN.md §5.11), on both backends: an
//! operator action whose client goes away before the answer still runs to its end and
//! is recorded, so no action is committed without its audit entry; one whose client
//! goes away before the request is whole does nothing and leaves no entry.

use std::time::{Duration, Instant};

use deferhook::domain::ids::new_id;
use deferhook::store::NewJob;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::app::{Db, TestApp};
use crate::console_support::Browser;
use crate::support::{app_with, at, job};

/// How far into a request its client hangs up.
#[derive(Clone, Copy, Debug)]
enum HangUp {
    /// Halfway through the request line: the server has nothing to act on.
    MidHead,
    /// With the head sent and the body one byte short of its `Content-Length`.
    MidBody,
    /// With the whole request sent, before a byte of the answer is read.
    AfterRequest,
}

/// An operator request as raw bytes.
struct Raw<'a> {
    method: &'a str,
    path: &'a str,
    content_type: &'a str,
    body: String,
    cookie: Option<String>,
}

impl<'a> Raw<'a> {
    fn json(method: &'a str, path: &'a str, body: Option<&Value>) -> Self {
        Raw {
            method,
            path,
            content_type: "application/json",
            body: body.map(Value::to_string).unwrap_or_default(),
            cookie: None,
        }
    }

    /// Sends the request on a connection of its own as far as `hang_up` says, then
    /// closes the connection without reading anything.
    async fn send(&self, app: &TestApp, hang_up: HangUp) {
        let addr = app.base_url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let cookie = self
            .cookie
            .as_ref()
            .map(|c| format!("Cookie: {c}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{} {} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             {cookie}\r\n",
            self.method,
            self.path,
            self.content_type,
            self.body.len() + usize::from(matches!(hang_up, HangUp::MidBody)),
        );
        let sent = match hang_up {
            HangUp::MidHead => head[..head.len() / 4].to_owned(),
            HangUp::MidBody | HangUp::AfterRequest => format!("{head}{}", self.body),
        };
        stream.write_all(sent.as_bytes()).await.expect("send");
        stream.flush().await.expect("flush");
        drop(stream);
    }
}

/// The audit entries of `action` on `target`, newest first.
async fn entries(app: &TestApp, action: &str, target: Option<&str>) -> Vec<Value> {
    let query = match target {
        Some(target) => format!("/v1/audit?action={action}&target={target}"),
        None => format!("/v1/audit?action={action}"),
    };
    app.get_json(&query).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// Waits (10 s at most) until `action` on `target` has `count` entries.
async fn wait_for_entries(app: &TestApp, action: &str, target: Option<&str>, count: usize) {
    let start = Instant::now();
    loop {
        let found = entries(app, action, target).await;
        if found.len() >= count {
            assert_eq!(found.len(), count, "{action}: {found:?}");
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{action} on {target:?}: {} entries of {count} after 10 s",
            found.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `raw` three times, hanging up mid-head, mid-body, then after the whole
/// request: only the last is an action, and it is recorded once.
async fn hang_up_at_every_step(app: &TestApp, raw: Raw<'_>, action: &str, target: Option<&str>) {
    let before = entries(app, action, target).await.len();
    raw.send(app, HangUp::MidHead).await;
    raw.send(app, HangUp::MidBody).await;
    raw.send(app, HangUp::AfterRequest).await;
    wait_for_entries(app, action, target, before + 1).await;
    // Nothing later adds an entry for the halves.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        entries(app, action, target).await.len(),
        before + 1,
        "{action}"
    );
}

async fn every_api_action_is_recorded_when_its_client_hangs_up(db: Db) {
    let app = app_with().backend(db).start().await;
    let put = json!({"url": "https://example.com/hooks/acme"});
    let path = "/v1/subscribers/acme";
    let raw = Raw::json("PUT", path, Some(&put));
    hang_up_at_every_step(&app, raw, "subscriber.put", Some("acme")).await;
    let patch = json!({"enabled": false});
    let raw = Raw::json("PATCH", path, Some(&patch));
    hang_up_at_every_step(&app, raw, "subscriber.patch", Some("acme")).await;
    assert_eq!(app.get_json(path).await["enabled"], false);
    let ids = json!({"subscriber_ids": ["acme"]});
    let raw = Raw::json("POST", "/v1/subscribers/resume", Some(&ids));
    hang_up_at_every_step(&app, raw, "subscriber.resume", None).await;
    assert_eq!(app.get_json(path).await["enabled"], true);
    let raw = Raw::json("POST", "/v1/subscribers/pause", Some(&ids));
    hang_up_at_every_step(&app, raw, "subscriber.pause", None).await;
    assert_eq!(app.get_json(path).await["enabled"], false);
    let rotate = json!({"grace_seconds": 60});
    let rotate_path = "/v1/subscribers/acme/secret/rotate";
    let raw = Raw::json("POST", rotate_path, Some(&rotate));
    hang_up_at_every_step(&app, raw, "subscriber.rotate_secret", Some("acme")).await;
    let limit = json!({"max_in_flight": 3});
    let raw = Raw::json("PUT", "/v1/destinations/example.com:443", Some(&limit));
    let target = Some("example.com:443");
    hang_up_at_every_step(&app, raw, "destination.put", target).await;

    let body = job("acme", "evt-1", json!({"delay_ms": 10_000}));
    let id = app.post_json("/v1/jobs", &body).await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let job_path = format!("/v1/jobs/{id}");
    let reschedule = json!({"deliver_at": at(20_000)});
    let raw = Raw::json("PATCH", &job_path, Some(&reschedule));
    hang_up_at_every_step(&app, raw, "job.reschedule", Some(&id)).await;
    assert_eq!(app.get_json(&job_path).await["deliver_at"], at(20_000));
    let cancel_path = format!("{job_path}/cancel");
    let raw = Raw::json("POST", &cancel_path, None);
    hang_up_at_every_step(&app, raw, "job.cancel", Some(&id)).await;
    assert_eq!(app.get_json(&job_path).await["state"], "cancelled");

    let schedule = json!({
        "subscriber_id": "acme",
        "cron": "0 0 * * *",
        "event_id": "nightly:{period_start}",
        "payload": {},
    });
    let schedule_path = "/v1/schedules/nightly";
    let raw = Raw::json("PUT", schedule_path, Some(&schedule));
    hang_up_at_every_step(&app, raw, "schedule.put", Some("nightly")).await;
    let raw = Raw::json("POST", "/v1/schedules/nightly/run", None);
    hang_up_at_every_step(&app, raw, "schedule.run", Some("nightly")).await;
    let raw = Raw::json("DELETE", schedule_path, None);
    hang_up_at_every_step(&app, raw, "schedule.delete", Some("nightly")).await;

    let replay = json!({"all": true, "max_jobs": 10, "rate_per_second": 5});
    let raw = Raw::json("POST", "/v1/replays", Some(&replay));
    hang_up_at_every_step(&app, raw, "replay.create", None).await;
    let replay_id = entries(&app, "replay.create", None).await[0]["target"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancel_path = format!("/v1/replays/{replay_id}/cancel");
    let raw = Raw::json("POST", &cancel_path, None);
    hang_up_at_every_step(&app, raw, "replay.cancel", Some(&replay_id)).await;

    let raw = Raw::json("DELETE", path, None);
    hang_up_at_every_step(&app, raw, "subscriber.delete", Some("acme")).await;
    assert_eq!(app.get(path).await.status, 404);
}

/// Issue #34's report: a `DELETE` whose client hung up while the answer waited for the
/// subscriber's history to move deleted it and left no `subscriber.delete` entry.
async fn a_deletion_whose_client_hangs_up_while_its_history_moves_is_recorded(db: Db) {
    let app = app_with().backend(db).start().await;
    long_history(&app).await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let request = format!(
        "DELETE /v1/subscribers/acme HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let start = Instant::now();
    while !moving(&app).await {
        assert!(start.elapsed() < Duration::from_secs(10), "never began");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(stream);
    assert!(
        moving(&app).await,
        "the history had moved before the hang-up: the answer no longer waited"
    );
    wait_for_entries(&app, "subscriber.delete", Some("acme"), 1).await;
}

/// A deletion's entry is written before it is taken and settled with `200` at its
/// commit, not when its answer is ready: the answer waits up to 5 s for the history to
/// move, and a crash during that wait left a deleted subscriber without its entry
/// (issue #34 part 1).
async fn a_deletion_is_recorded_at_its_commit_before_its_answer(db: Db) {
    let app = app_with().backend(db).start().await;
    long_history(&app).await;
    let deleting = tokio::spawn({
        let client = app.client.clone();
        let url = app.url("/v1/subscribers/acme");
        async move { client.delete(url).send().await.map(|r| r.status().as_u16()) }
    });
    let start = Instant::now();
    loop {
        let found = entries(&app, "subscriber.delete", Some("acme")).await;
        assert!(found.len() <= 1, "{found:?}");
        if found.first().is_some_and(|entry| entry["status"] == 200) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never settled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        !deleting.is_finished() && moving(&app).await,
        "recorded only with the answer, once the history had moved"
    );
    assert_eq!(deleting.await.unwrap().unwrap(), 200);
}

/// Subscriber `acme` with a history long enough that its move takes a while: 20,000
/// jobs, moved in batches of 2,000, each its own transaction.
async fn long_history(app: &TestApp) {
    app.create_subscriber("acme").await;
    let now = app.now();
    for chunk in 0..10 {
        let jobs = (0..2_000)
            .map(|n| NewJob {
                id: new_id(now),
                subscriber_id: "acme".into(),
                event_id: format!("evt-{chunk}-{n}"),
                payload: "{}".into(),
                deliver_at: now.plus_ms(3_600_000),
                deadline: now.plus_ms(7_200_000),
                max_attempts: None,
                created_at: now,
                event_type: None,
                schedule_id: None,
            })
            .collect();
        app.store.create_jobs(jobs).await.unwrap();
    }
}

async fn moving(app: &TestApp) -> bool {
    let moving = app.store.deletions_in_progress(10).await.unwrap();
    moving.iter().any(|id| id == "acme")
}

crate::on_both_backends!(
    every_api_action_is_recorded_when_its_client_hangs_up,
    a_deletion_whose_client_hangs_up_while_its_history_moves_is_recorded,
    a_deletion_is_recorded_at_its_commit_before_its_answer,
);

/// A console form whose browser hangs up before the answer is done and recorded, with
/// `via: console`.
#[tokio::test]
async fn a_console_action_is_recorded_when_its_browser_hangs_up() {
    let app = app_with().start().await;
    app.create_subscriber("acme").await;
    let mut browser = Browser::new(&app);
    browser.page("/console/subscribers").await;
    let cookie = browser
        .cookies
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    let csrf = browser.csrf.clone().expect("a form's token");
    let raw = Raw {
        method: "POST",
        path: "/console/subscribers/acme/enabled",
        content_type: "application/x-www-form-urlencoded",
        body: format!("csrf={csrf}&enabled=false"),
        cookie: Some(cookie),
    };
    hang_up_at_every_step(&app, raw, "subscriber.patch", Some("acme")).await;
    let entry = &entries(&app, "subscriber.patch", Some("acme")).await[0];
    assert_eq!(entry["parameters"]["via"], "console", "{entry}");
    assert_eq!(app.get_json("/v1/subscribers/acme").await["enabled"], false);
}
