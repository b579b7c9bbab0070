//! Subscribers: create with defaults, update keeping what a put leaves out, secrets
//! shown once, reads and id-ordered paging.

use deferhook::domain::secret::SigningSecret;
use deferhook::store::{PageRequest, PausedReason, SharedStore, Subscriber, SubscriberPut};

use crate::support::{at, claim_one, create_due, current_secret, subscriber_put};

// The store answers a trivial query.
store_case!(ping_answers, async |store: SharedStore| {
    store.ping().await.expect("ping");
});

store_case!(put_creates_with_defaults, async |store: SharedStore| {
    let put = subscriber_put("orders");
    let generated = put.generated_secret.clone();

    let outcome = store.put_subscriber(put, at(0)).await.unwrap();

    let expected = Subscriber {
        id: "orders".into(),
        url: "https://orders.example.test/hook".into(),
        max_in_flight: 16,
        rate_limit_per_second: None,
        enabled: true,
        created_at: at(0),
        updated_at: at(0),
        paused_reason: None,
        paused_at: None,
        event_types: Vec::new(),
        attempt_timeout_ms: None,
    };
    assert_eq!(outcome.subscriber, expected);
    assert_eq!(outcome.created_secret, Some(generated));
    assert_eq!(
        store.get_subscriber("orders").await.unwrap(),
        Some(expected)
    );
});

store_case!(
    put_again_updates_keeping_omitted_fields,
    async |store: SharedStore| {
        let first = SubscriberPut {
            max_in_flight: Some(5),
            rate_limit_per_second: Some(Some(10)),
            enabled: Some(false),
            ..subscriber_put("orders")
        };
        let secret = first.generated_secret.clone();
        store.put_subscriber(first, at(0)).await.unwrap();

        // Only the URL: everything else is kept, and the new generated secret is unused.
        let second = SubscriberPut {
            url: "https://new.example.test/hook".into(),
            ..subscriber_put("orders")
        };
        let outcome = store.put_subscriber(second, at(1_000)).await.unwrap();
        assert!(
            outcome.created_secret.is_none(),
            "an update never shows the secret"
        );
        let expected = Subscriber {
            id: "orders".into(),
            url: "https://new.example.test/hook".into(),
            max_in_flight: 5,
            rate_limit_per_second: Some(10),
            enabled: false,
            created_at: at(0),
            updated_at: at(1_000),
            paused_reason: Some(PausedReason::Operator),
            paused_at: Some(at(0)),
            event_types: Vec::new(),
            attempt_timeout_ms: None,
        };
        assert_eq!(outcome.subscriber, expected);
        assert_eq!(
            store.get_subscriber("orders").await.unwrap(),
            Some(expected.clone())
        );

        let third = SubscriberPut {
            url: expected.url.clone(),
            max_in_flight: Some(7),
            enabled: Some(true),
            ..subscriber_put("orders")
        };
        let outcome = store.put_subscriber(third, at(2_000)).await.unwrap();
        assert!(outcome.created_secret.is_none());
        let expected = Subscriber {
            max_in_flight: 7,
            enabled: true,
            updated_at: at(2_000),
            paused_reason: None,
            paused_at: None,
            ..expected
        };
        assert_eq!(outcome.subscriber, expected);

        // Jobs are still signed with the secret from the creation.
        let job = create_due(&store, "orders", at(0)).await;
        let claimed = claim_one(&store, "w", at(3_000)).await;
        assert_eq!(claimed.job_id, job.id);
        assert_eq!(current_secret(&claimed), &secret);
        assert_eq!(claimed.url, "https://new.example.test/hook");
    }
);

store_case!(
    rate_limit_some_none_clears_it,
    async |store: SharedStore| {
        let first = SubscriberPut {
            rate_limit_per_second: Some(Some(10)),
            ..subscriber_put("orders")
        };
        let created = store.put_subscriber(first, at(0)).await.unwrap();
        assert_eq!(created.subscriber.rate_limit_per_second, Some(10));

        let clear = SubscriberPut {
            rate_limit_per_second: Some(None),
            ..subscriber_put("orders")
        };
        let cleared = store.put_subscriber(clear, at(1)).await.unwrap();
        assert_eq!(cleared.subscriber.rate_limit_per_second, None);

        let keep = subscriber_put("orders");
        let kept = store.put_subscriber(keep, at(2)).await.unwrap();
        assert_eq!(kept.subscriber.rate_limit_per_second, None);
        let stored = store.get_subscriber("orders").await.unwrap().unwrap();
        assert_eq!(stored.rate_limit_per_second, None);
    }
);

store_case!(caller_given_secret_is_kept, async |store: SharedStore| {
    let chosen = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let put = SubscriberPut {
        secret: Some(chosen.clone()),
        ..subscriber_put("orders")
    };
    let generated = put.generated_secret.clone();
    assert_ne!(generated, chosen);

    let outcome = store.put_subscriber(put, at(0)).await.unwrap();
    assert_eq!(outcome.created_secret, Some(chosen.clone()));

    create_due(&store, "orders", at(0)).await;
    let claimed = claim_one(&store, "w", at(0)).await;
    assert_eq!(current_secret(&claimed), &chosen);
});

store_case!(get_unknown_is_none, async |store: SharedStore| {
    store
        .put_subscriber(subscriber_put("orders"), at(0))
        .await
        .unwrap();
    assert_eq!(store.get_subscriber("order").await.unwrap(), None);
    assert_eq!(store.get_subscriber("orders2").await.unwrap(), None);
});

store_case!(list_pages_in_id_order, async |store: SharedStore| {
    for id in ["s-c", "s-a", "s-e", "s-b", "s-d"] {
        store
            .put_subscriber(subscriber_put(id), at(0))
            .await
            .unwrap();
    }
    let page = |after: Option<&str>, limit| PageRequest {
        after: after.map(str::to_owned),
        limit,
    };
    let names = |subscribers: Vec<Subscriber>| {
        subscribers
            .into_iter()
            .map(|s| s.id)
            .collect::<Vec<String>>()
    };

    let first = store.list_subscribers(page(None, 2)).await.unwrap();
    assert_eq!(names(first), ["s-a", "s-b"]);
    let second = store.list_subscribers(page(Some("s-b"), 2)).await.unwrap();
    assert_eq!(names(second), ["s-c", "s-d"]);
    let third = store.list_subscribers(page(Some("s-d"), 2)).await.unwrap();
    assert_eq!(names(third), ["s-e"]);
    let past_end = store.list_subscribers(page(Some("s-e"), 2)).await.unwrap();
    assert!(past_end.is_empty());
    // `after` need not name a stored subscriber.
    let between = store
        .list_subscribers(page(Some("s-bb"), 10))
        .await
        .unwrap();
    assert_eq!(names(between), ["s-c", "s-d", "s-e"]);
    let all = store.list_subscribers(page(None, 100)).await.unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(all[0].max_in_flight, 16);
});
