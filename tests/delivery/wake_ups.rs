//! The running worker's wake-ups after an attempt ends (docs/DESIGN.md §3.3): a job
//! held by its subscriber's `max_in_flight` goes as soon as the attempt before it
//! ends, and a retry goes when it is due. Were either left to the 1 s poll, the gap
//! would be about a second; each test asserts a gap well under it.

use std::time::Duration;

use serde_json::json;

use crate::app::Db;
use crate::receiver::{Receiver, Reply};

/// Well under the worker's 1 s poll, well over the receiver's 100 ms answers and the
/// 100–200 ms backoff, for a busy machine.
const PROMPT: Duration = Duration::from_millis(600);

/// Six jobs of a subscriber with `max_in_flight` 1, all due at once: each one goes as
/// soon as the one before it is answered (100 ms), not at the worker's next poll.
async fn a_finished_attempt_lets_its_subscriber_s_next_job_go(db: Db) {
    let receiver =
        Receiver::start(vec![Reply::status(200).after(Duration::from_millis(100))]).await;
    let app = crate::setup::instance(db)
        .system_clock()
        .running_worker()
        .start()
        .await;
    let body = json!({ "url": receiver.url("/"), "max_in_flight": 1 });
    app.put_subscriber("narrow", &body).await;
    for n in 0..6 {
        app.job("narrow", &format!("evt-narrow-{n}"), json!({}))
            .await;
    }
    let requests = receiver.wait_for(6, Duration::from_secs(15)).await;
    let gaps: Vec<Duration> = requests
        .windows(2)
        .map(|pair| pair[1].at.duration_since(pair[0].at))
        .collect();
    assert!(
        gaps.iter().all(|gap| *gap < PROMPT),
        "a job waited for the poll, not for the attempt before it: {gaps:?}"
    );
    assert!(
        gaps.iter().all(|gap| *gap >= Duration::from_millis(100)),
        "max_in_flight 1 let two requests overlap: {gaps:?}"
    );
}

/// A 503 answered after 100 ms (so the worker has planned its sleep by then, up to
/// its 1 s poll with the lease 3 s away): the retry, due 100–200 ms later, goes then.
async fn a_retry_due_before_the_plan_wakes_the_worker(db: Db) {
    let slow_503 = Reply::status(503).after(Duration::from_millis(100));
    let receiver = Receiver::start(vec![slow_503, Reply::status(200)]).await;
    let app = crate::setup::instance(db)
        .system_clock()
        .running_worker()
        .start()
        .await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-retry-wake", json!({})).await;
    let requests = receiver.wait_for(2, Duration::from_secs(10)).await;
    app.wait_state(&job, "delivered", Duration::from_secs(5))
        .await;
    // From the first request's answer (100 ms after it arrived) to the retry.
    let gap = requests[1].at.duration_since(requests[0].at) - Duration::from_millis(100);
    assert!(
        gap < PROMPT,
        "the retry waited for the poll: {gap:?} after the 503"
    );
}

crate::on_both_backends!(
    a_finished_attempt_lets_its_subscriber_s_next_job_go,
    a_retry_due_before_the_plan_wakes_the_worker,
);
