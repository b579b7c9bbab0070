//! Event types (issue #20): the patterns a subscriber subscribes with, the subscribers
//! an event type matches (exact names, trailing wildcards, none), and the event type a
//! job keeps, lists by and is claimed with.

use deferhook::store::{JobFilter, SharedStore, SubscriberPatch, SubscriberPut};

use crate::support::{at, claim, create, ids, list, new_job, set_enabled, subscriber_put};

fn subscribed(id: &str, patterns: &[&str]) -> SubscriberPut {
    SubscriberPut {
        event_types: Some(patterns.iter().map(|p| p.to_string()).collect()),
        ..subscriber_put(id)
    }
}

async fn matched(store: &SharedStore, name: &str) -> Vec<String> {
    store.subscribers_of_event_type(name, 100).await.unwrap()
}

store_case!(
    an_event_type_matches_exact_names_and_prefix_wildcards,
    async |store: SharedStore| {
        for (id, patterns) in [
            ("a-exact", &["shipment.delivered"][..]),
            ("b-shipments", &["shipment.*"][..]),
            ("c-everything", &["*"][..]),
            ("d-invoices", &["invoice.*", "refund.issued"][..]),
            ("e-none", &[][..]),
        ] {
            store
                .put_subscriber(subscribed(id, patterns), at(0))
                .await
                .unwrap();
        }
        assert_eq!(
            matched(&store, "shipment.delivered").await,
            ["a-exact", "b-shipments", "c-everything"]
        );
        assert_eq!(
            matched(&store, "shipment.created").await,
            ["b-shipments", "c-everything"]
        );
        assert_eq!(
            matched(&store, "shipment").await,
            ["c-everything"],
            "`shipment.*` needs the dot"
        );
        assert_eq!(
            matched(&store, "refund.issued").await,
            ["c-everything", "d-invoices"]
        );
        assert_eq!(
            matched(&store, "shipment.delivered.late").await,
            ["b-shipments", "c-everything"],
            "an exact name is not a prefix"
        );
        let first = store
            .subscribers_of_event_type("shipment.delivered", 2)
            .await
            .unwrap();
        assert_eq!(
            first,
            ["a-exact", "b-shipments"],
            "at most the limit, in id order"
        );
    }
);

store_case!(
    a_subscriber_keeps_its_types_until_a_put_or_patch_replaces_them,
    async |store: SharedStore| {
        let put = subscribed("s", &["shipment.*", "invoice.paid"]);
        let created = store.put_subscriber(put, at(0)).await.unwrap().subscriber;
        assert_eq!(created.event_types, ["shipment.*", "invoice.paid"]);
        // A put that leaves them out keeps them.
        let kept = store
            .put_subscriber(subscriber_put("s"), at(1))
            .await
            .unwrap()
            .subscriber;
        assert_eq!(kept.event_types, ["shipment.*", "invoice.paid"]);
        assert_eq!(matched(&store, "invoice.paid").await, ["s"]);
        // A patch replaces them all.
        let patch = SubscriberPatch {
            event_types: Some(vec!["refund.*".into()]),
            ..SubscriberPatch::default()
        };
        let patched = store
            .patch_subscriber("s", patch, at(2))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(patched.event_types, ["refund.*"]);
        assert_eq!(
            store
                .get_subscriber("s")
                .await
                .unwrap()
                .unwrap()
                .event_types,
            ["refund.*"]
        );
        assert!(matched(&store, "invoice.paid").await.is_empty());
        assert_eq!(matched(&store, "refund.issued").await, ["s"]);
        // An empty list subscribes to nothing.
        let none = store
            .put_subscriber(subscribed("s", &[]), at(3))
            .await
            .unwrap()
            .subscriber;
        assert!(none.event_types.is_empty());
        assert!(matched(&store, "refund.issued").await.is_empty());
    }
);

store_case!(
    paused_subscribers_match_and_deleted_ones_do_not,
    async |store: SharedStore| {
        for id in ["kept", "paused", "deleted"] {
            store
                .put_subscriber(subscribed(id, &["order.*"]), at(0))
                .await
                .unwrap();
        }
        set_enabled(&store, "paused", false, at(1)).await;
        store.delete_subscriber("deleted", at(2)).await.unwrap();
        assert_eq!(matched(&store, "order.placed").await, ["kept", "paused"]);
        // The id, created again, subscribes afresh: the deleted one's types are gone.
        store
            .put_subscriber(subscriber_put("deleted"), at(3))
            .await
            .unwrap();
        assert_eq!(matched(&store, "order.placed").await, ["kept", "paused"]);
        assert!(
            store
                .get_subscriber("deleted")
                .await
                .unwrap()
                .unwrap()
                .event_types
                .is_empty()
        );
    }
);

store_case!(
    a_job_keeps_its_event_type_and_schedule_and_lists_by_them,
    async |store: SharedStore| {
        store
            .put_subscriber(subscriber_put("s"), at(0))
            .await
            .unwrap();
        let typed = deferhook::store::NewJob {
            event_type: Some("shipment.delivered".into()),
            ..new_job("s", "e1", at(0), at(60_000))
        };
        let scheduled = deferhook::store::NewJob {
            schedule_id: Some("nightly".into()),
            ..new_job("s", "e2", at(0), at(60_000))
        };
        let plain = new_job("s", "e3", at(0), at(60_000));
        let created = create(&store, vec![typed, scheduled, plain]).await;
        assert_eq!(created[0].event_type.as_deref(), Some("shipment.delivered"));
        assert_eq!(created[1].schedule_id.as_deref(), Some("nightly"));
        let read = store.get_job(created[0].id, at(0)).await.unwrap().unwrap();
        assert_eq!(read, created[0], "read back as created");

        let by_type = list(
            &store,
            JobFilter {
                event_type: Some("shipment.delivered".into()),
                ..JobFilter::default()
            },
        )
        .await;
        assert_eq!(ids(&by_type), [created[0].id]);
        let by_schedule = list(
            &store,
            JobFilter {
                schedule_id: Some("nightly".into()),
                states: vec![deferhook::domain::JobState::Scheduled],
                ..JobFilter::default()
            },
        )
        .await;
        assert_eq!(ids(&by_schedule), [created[1].id]);

        // The claim hands the worker the type (the `webhook-event-type` header).
        let mut types: Vec<_> = claim(&store, at(1), 10)
            .await
            .into_iter()
            .map(|claimed| (claimed.event_id, claimed.event_type))
            .collect();
        types.sort();
        assert_eq!(
            types,
            [
                ("e1".to_owned(), Some("shipment.delivered".to_owned())),
                ("e2".to_owned(), None),
                ("e3".to_owned(), None),
            ]
        );
    }
);
