//! C-03: the store fails right after a 2xx. The outcome is retried until it is stored
//! (the lease still held), so the job ends delivered with one request and no dead
//! letter. SQLite cannot be unplugged, so a wrapper makes every call of the worker's
//! store fail for a while, starting at the first outcome write.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deferhook::store::*;
use serde_json::json;
use uuid::Uuid;

use crate::app::Db;
use crate::faulty_store::{Fault, FaultyStore};
use crate::receiver::Receiver;
use crate::setup::instance_on;

/// Fails every store call for `outage` from the first outcome write on.
fn outage_from_first_outcome(outage: Duration) -> Fault {
    let down_since: Mutex<Option<Instant>> = Mutex::new(None);
    Arc::new(move |call| {
        let mut down_since = down_since.lock().unwrap();
        if call == "record_outcome" {
            down_since.get_or_insert_with(Instant::now);
        }
        match *down_since {
            Some(since) if since.elapsed() < outage => {
                Err(StoreError::Unavailable("injected outage".into()))
            }
            _ => Ok(()),
        }
    })
}

async fn c03_an_outcome_is_stored_once_the_store_is_back(db: Db) {
    let receiver = Receiver::ok().await;
    let database = db.database().await;
    let url = database.url.clone();
    let inner = deferhook::store::open(&url).await.unwrap();
    let outage = Duration::from_secs(2);
    let store = FaultyStore::wrap(inner.clone(), outage_from_first_outcome(outage));
    let app = instance_on(&url)
        .flags(&["--lease-ms", "3000", "--attempt-timeout-ms", "2000"])
        .store(inner.clone())
        .worker_store(store)
        .start()
        .await;
    app.subscriber("s", &receiver.url("/"), None).await;
    let job = app.job("s", "evt-c03", json!({})).await;
    let id: Uuid = job["id"].as_str().unwrap().parse().unwrap();

    // The store goes down as the outcome is first written, right after the 200; the
    // attempt ends only once the outcome is stored.
    let ran = app.run_pending().await;
    let answered = receiver.requests()[0].at;
    let stored_after = answered.elapsed();
    assert_eq!(ran.attempted(), 1);
    assert_eq!(ran.completed[0].stored, Some(Fenced::Applied));
    let job = inner.get_job(id, app.now()).await.unwrap().unwrap();
    assert_eq!(job.state, deferhook::domain::JobState::Delivered);
    assert!(
        stored_after >= outage - Duration::from_millis(200),
        "stored during the outage?"
    );
    assert!(
        stored_after < outage + Duration::from_secs(3),
        "stored {stored_after:?} after"
    );
    assert_eq!(job.attempts, 1);
    assert_eq!(job.dead_reason, None);
    app.advance(3_600_000);
    assert_eq!(app.run_pending().await.attempted(), 0);
    assert_eq!(receiver.requests().len(), 1, "the job was sent again");
    let attempts = inner.list_attempts(id, app.now()).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        attempts[0].outcome,
        deferhook::domain::attempt::AttemptOutcome::Delivered
    );
    app.stop().await;
    drop(database);
}

crate::on_both_backends!(c03_an_outcome_is_stored_once_the_store_is_back);
