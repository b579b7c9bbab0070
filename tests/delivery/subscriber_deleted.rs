//! Deleting a subscriber while its job is in flight (issue #16 part 8): the job ends
//! `dead` (`subscriber_deleted`) at once, and the receiver's answer, arriving later, is
//! fenced out: it lands on its own attempt only, and the job stays dead.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::app::{Db, metric};
use crate::receiver::Receiver;
use crate::setup::instance;

async fn an_attempt_in_flight_does_not_resurrect_a_deleted_subscribers_job(db: Db) {
    let receiver = Receiver::holding(200).await;
    let app = instance(db).running_worker().start().await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-deleted", json!({})).await;
    receiver.wait_for(1, Duration::from_secs(5)).await;
    let late_before = metric(&app.metrics().await, "deferhook_late_results_total");

    let deleted = app
        .send(app.request(Method::DELETE, "/v1/subscribers/s"))
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    assert_eq!(deleted.json()["jobs_dead"], 1);
    receiver.release();

    // The answer lands on its attempt, late.
    let started = Instant::now();
    loop {
        let attempts = app.attempts(&job).await;
        if attempts[0]["status"] == 200 {
            assert_eq!(attempts[0]["outcome"], "delivered");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the late answer never landed: {attempts:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let read = app.job_now(&job).await;
    assert_eq!(read["state"], "dead", "{read}");
    assert_eq!(read["dead_reason"], "subscriber_deleted", "{read}");
    let late_after = metric(&app.metrics().await, "deferhook_late_results_total");
    assert!(
        late_after > late_before,
        "counted late: {late_before} -> {late_after}"
    );
    assert_eq!(receiver.requests().len(), 1, "never sent again");
}

crate::on_both_backends!(an_attempt_in_flight_does_not_resurrect_a_deleted_subscribers_job);
