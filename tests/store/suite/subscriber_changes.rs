//! Partial updates of a subscriber and resumes of paused ones (issue #16): only the
//! fields given change, a pause keeps why (`gone` for a 410, `operator`), a resume is
//! all or nothing.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent};
use deferhook::store::{
    PausedReason, ResumeSelection, SharedStore, StoreError, Subscriber, SubscriberPatch,
    SubscriberPut,
};

use crate::support::{
    add_subscriber, at, claim, claim_one, create_due, failed, outcome, set_enabled, subscriber_put,
};

/// Subscriber `id` as stored.
async fn stored(store: &SharedStore, id: &str) -> Subscriber {
    store.get_subscriber(id).await.unwrap().expect("it exists")
}

/// Pauses subscriber `id` as a `410 Gone` does, at `now` (one job created and claimed).
async fn pause_as_gone(store: &SharedStore, id: &str, now: i64) {
    create_due(store, id, at(now - 1)).await;
    let claimed = claim_one(store, "w", at(now)).await;
    let mut record = outcome(
        &claimed,
        JobEvent::TerminalFailure {
            reason: DeadReason::NonRetryableResponse,
        },
        failed(
            AttemptOutcome::Terminal,
            ErrorClass::Http4xx,
            Some(410),
            "HTTP 410 Gone",
            None,
        ),
        at(now),
    );
    record.pause_subscriber = true;
    store.record_outcomes(&[record], at(now)).await.unwrap();
}

store_case!(
    a_patch_changes_only_the_fields_given,
    async |store: SharedStore| {
        let put = SubscriberPut {
            max_in_flight: Some(5),
            rate_limit_per_second: Some(Some(10)),
            ..subscriber_put("orders")
        };
        store.put_subscriber(put, at(0)).await.unwrap();
        let before = stored(&store, "orders").await;

        let pause = SubscriberPatch {
            enabled: Some(false),
            ..SubscriberPatch::default()
        };
        let paused = store
            .patch_subscriber("orders", pause, at(1_000))
            .await
            .unwrap()
            .expect("it exists");
        let expected = Subscriber {
            enabled: false,
            paused_reason: Some(PausedReason::Operator),
            paused_at: Some(at(1_000)),
            updated_at: at(1_000),
            ..before.clone()
        };
        assert_eq!(paused, expected);
        assert_eq!(stored(&store, "orders").await, expected);

        let clear = SubscriberPatch {
            rate_limit_per_second: Some(None),
            max_in_flight: Some(7),
            ..SubscriberPatch::default()
        };
        let cleared = store
            .patch_subscriber("orders", clear, at(2_000))
            .await
            .unwrap()
            .unwrap();
        let expected = Subscriber {
            rate_limit_per_second: None,
            max_in_flight: 7,
            updated_at: at(2_000),
            ..expected
        };
        assert_eq!(
            cleared, expected,
            "still paused since 1 s, as an operator did"
        );

        let resume = SubscriberPatch {
            enabled: Some(true),
            url: Some("https://moved.example.test/hook".into()),
            ..SubscriberPatch::default()
        };
        let resumed = store
            .patch_subscriber("orders", resume, at(3_000))
            .await
            .unwrap()
            .unwrap();
        let expected = Subscriber {
            enabled: true,
            url: "https://moved.example.test/hook".into(),
            paused_reason: None,
            paused_at: None,
            updated_at: at(3_000),
            ..expected
        };
        assert_eq!(resumed, expected);
        let moved = store
            .get_destination("moved.example.test:443", at(3_000))
            .await
            .unwrap()
            .expect("the new URL's destination is assigned");
        assert_eq!(moved.subscribers, 1);
        let old = store
            .get_destination("orders.example.test:443", at(3_000))
            .await
            .unwrap()
            .expect("the old destination stays");
        assert_eq!(old.subscribers, 0);

        create_due(&store, "orders", at(0)).await;
        let claimed = claim_one(&store, "w", at(4_000)).await;
        assert_eq!(claimed.url, "https://moved.example.test/hook");
    }
);

store_case!(
    a_patch_of_an_unknown_subscriber_writes_nothing,
    async |store: SharedStore| {
        let patch = SubscriberPatch {
            url: Some("https://nobody.example.test/hook".into()),
            enabled: Some(false),
            ..SubscriberPatch::default()
        };
        let patched = store
            .patch_subscriber("nobody", patch, at(0))
            .await
            .unwrap();
        assert_eq!(patched, None);
        assert_eq!(store.get_subscriber("nobody").await.unwrap(), None);
        assert_eq!(
            store
                .get_destination("nobody.example.test:443", at(0))
                .await
                .unwrap()
                .map(|d| d.key),
            None
        );
    }
);

// A 410 pauses with reason `gone`; a later operator pause keeps it; PUT pauses as the
// operator.
store_case!(
    a_pause_keeps_its_reason_and_time,
    async |store: SharedStore| {
        add_subscriber(&store, "gone").await;
        pause_as_gone(&store, "gone", 500).await;
        let paused = stored(&store, "gone").await;
        assert!(!paused.enabled);
        assert_eq!(paused.paused_reason, Some(PausedReason::Gone));
        assert_eq!(paused.paused_at, Some(at(500)));

        set_enabled(&store, "gone", false, at(900)).await;
        let still = stored(&store, "gone").await;
        assert_eq!(still.paused_reason, Some(PausedReason::Gone));
        assert_eq!(still.paused_at, Some(at(500)));

        add_subscriber(&store, "manual").await;
        set_enabled(&store, "manual", false, at(700)).await;
        let manual = stored(&store, "manual").await;
        assert_eq!(manual.paused_reason, Some(PausedReason::Operator));
        assert_eq!(manual.paused_at, Some(at(700)));
        set_enabled(&store, "manual", true, at(800)).await;
        let enabled = stored(&store, "manual").await;
        assert_eq!((enabled.paused_reason, enabled.paused_at), (None, None));
    }
);

store_case!(
    a_resume_by_ids_enables_the_paused_ones_and_counts_them,
    async |store: SharedStore| {
        for id in ["a", "b", "c"] {
            add_subscriber(&store, id).await;
        }
        set_enabled(&store, "a", false, at(100)).await;
        set_enabled(&store, "b", false, at(100)).await;
        let waiting = create_due(&store, "a", at(0)).await;

        let ids = vec!["a".to_owned(), "c".to_owned()];
        let resumed = store
            .resume_subscribers(ResumeSelection::Ids(ids), at(1_000))
            .await
            .unwrap();

        assert_eq!(resumed, 1, "c was not paused");
        let a = stored(&store, "a").await;
        assert!(a.enabled);
        assert_eq!((a.paused_reason, a.paused_at), (None, None));
        assert_eq!(a.updated_at, at(1_000));
        assert_eq!(stored(&store, "c").await.updated_at, at(0));
        assert!(!stored(&store, "b").await.enabled);
        let claimed = claim(&store, at(1_000), 10).await;
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].job_id, waiting.id);
    }
);

store_case!(
    a_resume_naming_an_unknown_id_writes_nothing,
    async |store: SharedStore| {
        add_subscriber(&store, "a").await;
        set_enabled(&store, "a", false, at(100)).await;

        let ids = vec!["a".to_owned(), "nobody".to_owned(), "ghost".to_owned()];
        let refused = store
            .resume_subscribers(ResumeSelection::Ids(ids), at(1_000))
            .await;

        assert!(
            matches!(&refused, Err(StoreError::UnknownSubscriber(id)) if id == "nobody"),
            "got {refused:?}"
        );
        let a = stored(&store, "a").await;
        assert!(!a.enabled, "all or nothing");
        assert_eq!(a.paused_reason, Some(PausedReason::Operator));
    }
);

store_case!(
    a_resume_by_reason_enables_only_those_paused_for_it,
    async |store: SharedStore| {
        for id in ["gone1", "gone2", "manual", "live"] {
            add_subscriber(&store, id).await;
        }
        pause_as_gone(&store, "gone1", 100).await;
        pause_as_gone(&store, "gone2", 200).await;
        set_enabled(&store, "manual", false, at(300)).await;

        let resumed = store
            .resume_subscribers(ResumeSelection::Reason(PausedReason::Gone), at(1_000))
            .await
            .unwrap();

        assert_eq!(resumed, 2);
        assert!(stored(&store, "gone1").await.enabled);
        assert!(stored(&store, "gone2").await.enabled);
        let manual = stored(&store, "manual").await;
        assert!(!manual.enabled);
        assert_eq!(manual.paused_reason, Some(PausedReason::Operator));
        let again = store
            .resume_subscribers(ResumeSelection::Reason(PausedReason::Gone), at(2_000))
            .await
            .unwrap();
        assert_eq!(again, 0);
    }
);

// A subscriber's own attempt timeout (issue #33): set by a create, kept by a put or a
// patch that leaves it out, returned to the server's by `null`, and carried by each
// claimed job of it.
store_case!(
    an_attempt_timeout_is_kept_until_cleared_and_reaches_the_claim,
    async |store: SharedStore| {
        let put = SubscriberPut {
            attempt_timeout_ms: Some(Some(12_000)),
            ..subscriber_put("slow")
        };
        let created = store.put_subscriber(put, at(0)).await.unwrap();
        assert_eq!(created.subscriber.attempt_timeout_ms, Some(12_000));
        let again = store
            .put_subscriber(subscriber_put("slow"), at(1))
            .await
            .unwrap();
        assert_eq!(again.subscriber.attempt_timeout_ms, Some(12_000));
        create_due(&store, "slow", at(0)).await;
        let claimed = claim_one(&store, "w", at(10)).await;
        let twelve = std::time::Duration::from_millis(12_000);
        assert_eq!(claimed.attempt_timeout, Some(twelve));

        let other = SubscriberPatch {
            max_in_flight: Some(3),
            ..SubscriberPatch::default()
        };
        let kept = store.patch_subscriber("slow", other, at(20)).await.unwrap();
        assert_eq!(kept.unwrap().attempt_timeout_ms, Some(12_000));
        let shorter = SubscriberPatch {
            attempt_timeout_ms: Some(Some(7_500)),
            ..SubscriberPatch::default()
        };
        let patched = store
            .patch_subscriber("slow", shorter, at(30))
            .await
            .unwrap();
        assert_eq!(patched.unwrap().attempt_timeout_ms, Some(7_500));
        let cleared = SubscriberPatch {
            attempt_timeout_ms: Some(None),
            ..SubscriberPatch::default()
        };
        store
            .patch_subscriber("slow", cleared, at(40))
            .await
            .unwrap();
        assert_eq!(stored(&store, "slow").await.attempt_timeout_ms, None);
        create_due(&store, "slow", at(0)).await;
        let claimed = claim_one(&store, "w", at(50)).await;
        assert_eq!(claimed.attempt_timeout, None, "the worker's own");
        // An unknown subscriber: nothing written, none found.
        let ghost = SubscriberPatch {
            attempt_timeout_ms: Some(Some(1_000)),
            ..SubscriberPatch::default()
        };
        assert!(
            store
                .patch_subscriber("ghost", ghost, at(60))
                .await
                .unwrap()
                .is_none()
        );
    }
);
