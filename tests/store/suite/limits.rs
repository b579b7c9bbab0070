//! Per-subscriber limits and fairness in the claim (docs/DESIGN.md §3): a rate limit paces
//! attempts, a large backlog does not starve other subscribers, and the load the API
//! shows in `waiting_reason` is the load the claim sees.

use deferhook::domain::Timestamp;
use deferhook::store::{SharedStore, SubscriberPut};

use crate::support::{add_subscriber, at, claim, claimed_ids, create, new_job, subscriber_put};

async fn put(store: &SharedStore, put: SubscriberPut) {
    store.put_subscriber(put, at(0)).await.unwrap();
}

// 5/s: one attempt every 200 ms, never more than 5 in any second.
store_case!(a_rate_limit_paces_attempts, async |store: SharedStore| {
    put(
        &store,
        SubscriberPut {
            rate_limit_per_second: Some(Some(5)),
            max_in_flight: Some(100),
            ..subscriber_put("paced")
        },
    )
    .await;
    create(
        &store,
        (0..20)
            .map(|n| new_job("paced", &format!("e{n}"), at(-1_000 - n), at(600_000)))
            .collect(),
    )
    .await;

    let mut starts: Vec<Timestamp> = Vec::new();
    for ms in (0..=2_000).step_by(50) {
        for _ in claim(&store, at(ms), 10).await {
            starts.push(at(ms));
        }
    }

    // 0, 200, 400, …, 2000: 11 attempts, 200 ms apart.
    let expected: Vec<Timestamp> = (0..=2_000).step_by(200).map(at).collect();
    assert_eq!(starts, expected);
});

// Round-robin: the first batch takes from every subscriber with due work, however
// large one backlog is and however old.
store_case!(
    a_large_backlog_does_not_starve_the_others,
    async |store: SharedStore| {
        put(
            &store,
            SubscriberPut {
                max_in_flight: Some(1_000),
                ..subscriber_put("big")
            },
        )
        .await;
        add_subscriber(&store, "small").await;
        let mut jobs = (0..50)
            .map(|n| new_job("big", &format!("b{n}"), at(-10_000 + n), at(600_000)))
            .collect::<Vec<_>>();
        jobs.push(new_job("small", "s0", at(-1), at(600_000)));
        jobs.push(new_job("small", "s1", at(0), at(600_000)));
        let created = create(&store, jobs).await;

        let batch = claimed_ids(&claim(&store, at(0), 4).await);

        let small: Vec<_> = created[50..].iter().map(|j| j.id).collect();
        assert_eq!(batch.len(), 4);
        assert!(
            batch.contains(&small[0]) && batch.contains(&small[1]),
            "{batch:?}"
        );
    }
);

// `subscriber_load` counts live leases and the last second's attempts.
store_case!(
    the_subscriber_load_is_what_the_claim_sees,
    async |store: SharedStore| {
        put(
            &store,
            SubscriberPut {
                max_in_flight: Some(3),
                rate_limit_per_second: Some(Some(50)),
                ..subscriber_put("s")
            },
        )
        .await;
        create(
            &store,
            (0..5)
                .map(|n| new_job("s", &format!("e{n}"), at(-10), at(600_000)))
                .collect(),
        )
        .await;
        assert_eq!(claim(&store, at(0), 10).await.len(), 3, "max_in_flight 3");

        let load = store.subscriber_load("s", at(10)).await.unwrap().unwrap();
        assert_eq!(load.open_attempts, 3);
        assert_eq!(load.max_in_flight, 3);
        assert_eq!(load.started_last_second, 3);
        assert_eq!(load.rate_limit_per_second, Some(50));
        assert_eq!(load.last_started_at, Some(at(0)));
        let later = store
            .subscriber_load("s", at(1_000))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(later.started_last_second, 0);
        assert_eq!(later.last_started_at, None);
        assert!(
            store
                .subscriber_load("ghost", at(0))
                .await
                .unwrap()
                .is_none()
        );
    }
);

// `subscriber_loads` reads several subscribers' loads at once (the views of a group of
// creates), each as `subscriber_load` reads it alone; one that does not exist has none.
store_case!(
    the_loads_of_several_subscribers_are_each_its_own,
    async |store: SharedStore| {
        for (id, limit, rate) in [("busy", 2, Some(50)), ("idle", 7, None)] {
            put(
                &store,
                SubscriberPut {
                    max_in_flight: Some(limit),
                    rate_limit_per_second: Some(rate),
                    ..subscriber_put(id)
                },
            )
            .await;
        }
        create(
            &store,
            (0..4)
                .map(|n| new_job("busy", &format!("e{n}"), at(-10), at(600_000)))
                .collect(),
        )
        .await;
        assert_eq!(claim(&store, at(0), 10).await.len(), 2, "max_in_flight 2");

        let ids = ["idle", "ghost", "busy"].map(String::from);
        let loads = store.subscriber_loads(&ids, at(10)).await.unwrap();
        assert_eq!(
            loads.len(),
            2,
            "no load of a subscriber that does not exist"
        );
        let (busy, idle) = (loads["busy"], loads["idle"]);
        assert_eq!((busy.open_attempts, busy.max_in_flight), (2, 2));
        assert_eq!(busy.started_last_second, 2);
        assert_eq!(busy.rate_limit_per_second, Some(50));
        assert_eq!((idle.open_attempts, idle.max_in_flight), (0, 7));
        assert_eq!(idle.rate_limit_per_second, None);
        for id in ["busy", "idle"] {
            let alone = store.subscriber_load(id, at(10)).await.unwrap().unwrap();
            assert_eq!(alone, loads[id], "{id}");
        }
        assert!(
            store
                .subscriber_loads(&[], at(10))
                .await
                .unwrap()
                .is_empty()
        );
    }
);

// The worker sleeps until there is something to do: not while a subscriber at its
// limit holds due work, but when a rate limit next allows an attempt, a job comes due,
// a lease expires or a deadline passes.
store_case!(next_wake_respects_the_limits, async |store: SharedStore| {
    assert_eq!(store.next_wake_at(at(0)).await.unwrap(), None, "idle");
    put(
        &store,
        SubscriberPut {
            max_in_flight: Some(1),
            ..subscriber_put("narrow")
        },
    )
    .await;
    create(
        &store,
        (0..3)
            .map(|n| new_job("narrow", &format!("n{n}"), at(-10), at(600_000)))
            .collect(),
    )
    .await;
    assert_eq!(
        store.next_wake_at(at(0)).await.unwrap(),
        Some(at(0)),
        "due now"
    );
    let claimed = claim(&store, at(0), 10).await;
    assert_eq!(claimed.len(), 1);
    // At its limit: the next thing is the lease expiring, not the held backlog.
    assert_eq!(
        store.next_wake_at(at(5)).await.unwrap(),
        Some(claimed[0].lease_expires_at)
    );

    put(
        &store,
        SubscriberPut {
            rate_limit_per_second: Some(Some(5)),
            max_in_flight: Some(100),
            ..subscriber_put("paced")
        },
    )
    .await;
    create(
        &store,
        (0..3)
            .map(|n| new_job("paced", &format!("p{n}"), at(-10), at(600_000)))
            .collect(),
    )
    .await;
    assert_eq!(claim(&store, at(100), 10).await.len(), 1, "one per 200 ms");
    assert_eq!(store.next_wake_at(at(110)).await.unwrap(), Some(at(300)));
    // A job coming due sooner wins.
    create(&store, vec![new_job("paced", "soon", at(150), at(600_000))]).await;
    assert_eq!(store.next_wake_at(at(110)).await.unwrap(), Some(at(150)));
});
