//! On PostgreSQL an operator's change that may let due jobs go is announced to every
//! instance's worker (`NOTIFY deferhook_jobs`, docs/DESIGN.md §3.3, §12): a change to a
//! destination, a subscriber enabled again, subscribers resumed.

use std::sync::Arc;
use std::time::Duration;

use deferhook::store::{DestinationPut, ResumeSelection, SubscriberPatch};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::support::{at, subscriber_put};

/// Whether `notify` is woken within 2 s (a wake-up sent before is kept).
async fn woken(notify: &Notify) -> bool {
    tokio::time::timeout(Duration::from_secs(2), notify.notified())
        .await
        .is_ok()
}

#[tokio::test]
async fn operator_changes_that_may_free_work_are_announced() {
    let Some(database) = crate::pg::TestDatabase::create().await else {
        return;
    };
    let store = deferhook::store::open(&database.url)
        .await
        .expect("migrate");
    store
        .put_subscriber(subscriber_put("s"), at(0))
        .await
        .unwrap();
    // subscriber_put's URL: https://s.example.test/hook.
    let key = "s.example.test:443";
    let notify = Arc::new(Notify::new());
    let stop = CancellationToken::new();
    let listener = {
        let (store, notify, stop) = (store.clone(), notify.clone(), stop.clone());
        tokio::spawn(async move { store.listen_for_jobs(notify, stop).await })
    };
    // The listener wakes once when it starts listening.
    assert!(woken(&notify).await, "listening");

    let pause = DestinationPut {
        paused: Some(false),
        ..DestinationPut::default()
    };
    store.put_destination(key, pause, at(1)).await.unwrap();
    assert!(woken(&notify).await, "a destination changed");

    let disable = SubscriberPatch {
        enabled: Some(false),
        ..SubscriberPatch::default()
    };
    store.patch_subscriber("s", disable, at(2)).await.unwrap();
    let resumed = store
        .resume_subscribers(ResumeSelection::Ids(vec!["s".into()]), at(3))
        .await
        .unwrap();
    assert_eq!(resumed, 1);
    assert!(woken(&notify).await, "a subscriber resumed");

    stop.cancel();
    listener.await.unwrap();
}
