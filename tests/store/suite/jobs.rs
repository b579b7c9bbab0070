//! Creating jobs: a new job is `scheduled`, a repeat of (subscriber, event) is the
//! existing job (its stored payload delivered byte for byte), batches are all or nothing, and
//! concurrent repeats create exactly one job.

use deferhook::domain::JobState;
use deferhook::store::{CreateOutcome, Job, JobFilter, NewJob, SharedStore, StoreError};

use crate::support::{add_subscriber, at, claim_one, create, ids, list, new_job};

/// The payload of contract case C-07: escapes, non-ASCII, a big integer and `1.0`, which
/// a re-serialisation would change.
const C07: &str = r#"{"b":1,"a":"\u001B é \u2028 😀","n":12345678901234567890,"f":1.0}"#;

fn expect_existing(outcome: &CreateOutcome) -> &Job {
    match outcome {
        CreateOutcome::Existing { job } => job,
        CreateOutcome::Created(job) => panic!("job {} was created, expected Existing", job.id),
    }
}

fn expect_created(outcome: &CreateOutcome) -> &Job {
    match outcome {
        CreateOutcome::Created(job) => job,
        CreateOutcome::Existing { job, .. } => panic!("job {} existed, expected Created", job.id),
    }
}

store_case!(
    create_returns_a_scheduled_job,
    async |store: SharedStore| {
        add_subscriber(&store, "orders").await;
        let new = NewJob {
            max_attempts: Some(3),
            created_at: at(-500),
            ..new_job("orders", "order-1", at(10_000), at(90_000))
        };

        let outcomes = store.create_jobs(vec![new.clone()]).await.unwrap();

        assert_eq!(outcomes.len(), 1);
        let expected = Job {
            id: new.id,
            subscriber_id: "orders".into(),
            event_id: "order-1".into(),
            state: JobState::Scheduled,
            attempts: 0,
            max_attempts: Some(3),
            deliver_at: at(10_000),
            deadline: at(90_000),
            due_at: Some(at(10_000)),
            created_at: at(-500),
            updated_at: at(-500),
            delivered_at: None,
            dead_at: None,
            dead_reason: None,
            dead_detail: None,
            last_error: None,
            lease: None,
            subscriber_enabled: true,
            subscriber_deleted: false,
            event_type: None,
            schedule_id: None,
        };
        assert_eq!(expect_created(&outcomes[0]), &expected);
        assert_eq!(store.get_job(new.id, at(0)).await.unwrap(), Some(expected));
    }
);

store_case!(
    repeat_is_existing_and_delivers_the_stored_payload,
    async |store: SharedStore| {
        add_subscriber(&store, "orders").await;
        let first = NewJob {
            payload: C07.into(),
            ..new_job("orders", "order-1", at(0), at(60_000))
        };
        let created = create(&store, vec![first.clone()]).await.remove(0);

        // Same (subscriber, event) and the same JSON value written differently: another
        // id, payload text and schedule change nothing.
        let repeat = NewJob {
            payload:
                r#"{ "a": "\u001b é \u2028 😀", "b": 1, "f": 1.0, "n": 12345678901234567890 }"#
                    .into(),
            max_attempts: Some(9),
            ..new_job("orders", "order-1", at(5_000), at(70_000))
        };
        let outcomes = store.create_jobs(vec![repeat.clone()]).await.unwrap();

        assert_eq!(outcomes.len(), 1);
        let job = expect_existing(&outcomes[0]);
        assert_eq!(job, &created);
        assert_eq!(store.get_job(repeat.id, at(0)).await.unwrap(), None);
        assert_eq!(ids(&list(&store, JobFilter::default()).await), [first.id]);
        assert_eq!(job.deliver_at, at(0));
        // The bytes that go out are the ones that came in.
        let claimed = claim_one(&store, "w", at(0)).await;
        assert_eq!(claimed.payload.as_bytes(), C07.as_bytes());
    }
);

store_case!(
    a_different_payload_is_a_conflict_and_writes_nothing,
    async |store: SharedStore| {
        add_subscriber(&store, "orders").await;
        let first = create(
            &store,
            vec![new_job("orders", "order-1", at(0), at(60_000))],
        )
        .await
        .remove(0);
        let fresh = new_job("orders", "order-2", at(0), at(60_000));
        let conflicting = NewJob {
            payload: r#"{"n":2}"#.into(),
            ..new_job("orders", "order-1", at(0), at(60_000))
        };

        let result = store.create_jobs(vec![fresh.clone(), conflicting]).await;

        match result {
            Err(StoreError::PayloadConflict {
                job_id,
                subscriber_id,
                event_id,
            }) => {
                assert_eq!(job_id, first.id);
                assert_eq!(subscriber_id, "orders");
                assert_eq!(event_id, "order-1");
            }
            other => panic!("expected PayloadConflict, got {other:?}"),
        }
        assert_eq!(
            store.get_job(fresh.id, at(0)).await.unwrap(),
            None,
            "nothing written"
        );
        assert_eq!(ids(&list(&store, JobFilter::default()).await), [first.id]);
    }
);

store_case!(
    unknown_subscriber_writes_nothing,
    async |store: SharedStore| {
        add_subscriber(&store, "orders").await;
        let known = new_job("orders", "order-1", at(0), at(60_000));
        let ghost = new_job("ghost", "order-1", at(0), at(60_000));

        let result = store.create_jobs(vec![known.clone(), ghost]).await;

        match result {
            Err(StoreError::UnknownSubscriber(id)) => assert_eq!(id, "ghost"),
            other => panic!("expected UnknownSubscriber, got {other:?}"),
        }
        assert_eq!(store.get_job(known.id, at(0)).await.unwrap(), None);
        assert!(list(&store, JobFilter::default()).await.is_empty());
        // Nothing was half-written: the same job can now be created as new.
        let outcomes = store.create_jobs(vec![known.clone()]).await.unwrap();
        assert_eq!(expect_created(&outcomes[0]).id, known.id);
    }
);

store_case!(
    a_batch_creates_every_job_in_order,
    async |store: SharedStore| {
        add_subscriber(&store, "orders").await;
        add_subscriber(&store, "billing").await;
        let batch: Vec<NewJob> = (0..60)
            .map(|n| {
                let subscriber = if n % 2 == 0 { "orders" } else { "billing" };
                new_job(subscriber, &format!("event-{n}"), at(n), at(60_000))
            })
            .collect();

        let outcomes = store.create_jobs(batch.clone()).await.unwrap();

        assert_eq!(outcomes.len(), 60);
        for (new, outcome) in batch.iter().zip(&outcomes) {
            let job = expect_created(outcome);
            assert_eq!(job.id, new.id);
            assert_eq!(job.subscriber_id, new.subscriber_id);
            assert_eq!(job.event_id, new.event_id);
            assert_eq!(job.due_at, Some(new.deliver_at));
        }
        assert_eq!(list(&store, JobFilter::default()).await.len(), 60);
    }
);

store_case!(
    a_batch_mixes_existing_and_created,
    async |store: SharedStore| {
        add_subscriber(&store, "orders").await;
        let old = create(&store, vec![new_job("orders", "e-old", at(0), at(60_000))]).await;

        let fresh = new_job("orders", "e-new", at(0), at(60_000));
        let fresh_again = new_job("orders", "e-new", at(1), at(60_000));
        let old_again = new_job("orders", "e-old", at(2), at(60_000));
        let outcomes = store
            .create_jobs(vec![fresh.clone(), old_again, fresh_again.clone()])
            .await
            .unwrap();

        assert_eq!(outcomes.len(), 3);
        assert_eq!(expect_created(&outcomes[0]).id, fresh.id);
        assert_eq!(expect_existing(&outcomes[1]), &old[0]);
        // A repeat inside the batch meets the job created earlier in the same batch.
        assert_eq!(expect_existing(&outcomes[2]).id, fresh.id);
        assert_eq!(store.get_job(fresh_again.id, at(0)).await.unwrap(), None);
        assert_eq!(list(&store, JobFilter::default()).await.len(), 2);
    }
);

store_case!(
    concurrent_repeats_create_one_job,
    async |store: SharedStore| {
        add_subscriber(&store, "orders").await;
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let store = store.clone();
                let new = new_job("orders", "same-event", at(0), at(60_000));
                tokio::spawn(async move { store.create_jobs(vec![new]).await })
            })
            .collect();

        let mut created = Vec::new();
        let mut existing = Vec::new();
        for task in tasks {
            let mut outcomes = task.await.expect("task").expect("create_jobs");
            assert_eq!(outcomes.len(), 1);
            match outcomes.remove(0) {
                CreateOutcome::Created(job) => created.push(job),
                CreateOutcome::Existing { job } => existing.push(job),
            }
        }

        assert_eq!(created.len(), 1, "exactly one create wins");
        assert_eq!(existing.len(), 19);
        let winner = created[0].id;
        assert!(existing.iter().all(|job| job.id == winner));
        assert_eq!(ids(&list(&store, JobFilter::default()).await), [winner]);
    }
);

store_case!(an_empty_batch_is_fine, async |store: SharedStore| {
    let outcomes = store.create_jobs(Vec::new()).await.unwrap();
    assert!(outcomes.is_empty());
});

// Concurrent fan-outs of one event naming the same subscribers in different orders
// all succeed (no deadlock), creating each job once.
store_case!(
    concurrent_batches_in_any_order_succeed,
    async |store: SharedStore| {
        for n in 0..30 {
            add_subscriber(&store, &format!("s{n:02}")).await;
        }
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                let mut batch: Vec<NewJob> = (0..30)
                    .map(|n| new_job(&format!("s{n:02}"), "fan", at(0), at(60_000)))
                    .collect();
                batch.rotate_left(t * 4);
                if t % 2 == 1 {
                    batch.reverse();
                }
                tokio::spawn(async move { store.create_jobs(batch).await })
            })
            .collect();
        let mut created = 0;
        for task in tasks {
            let outcomes = task.await.expect("task").expect("no batch fails");
            created += outcomes
                .iter()
                .filter(|o| matches!(o, CreateOutcome::Created(_)))
                .count();
        }
        assert_eq!(created, 30, "each job created exactly once");
        assert_eq!(list(&store, JobFilter::default()).await.len(), 30);
    }
);

// Concurrent create requests share group commits (one transaction for many
// requests); each must still succeed or fail on its own, all or nothing: a request
// whose second job conflicts leaves none of its jobs, an unknown subscriber writes
// nothing, and the requests around them are written as if alone.
store_case!(
    concurrent_requests_succeed_or_fail_alone,
    async |store: SharedStore| {
        add_subscriber(&store, "a").await;
        let stored = NewJob {
            payload: r#"{"v":1}"#.into(),
            ..new_job("a", "dup", at(0), at(60_000))
        };
        create(&store, vec![stored.clone()]).await;
        let with = |event: &str, payload: &str| NewJob {
            payload: payload.into(),
            ..new_job("a", event, at(0), at(60_000))
        };
        let mut requests: Vec<Vec<NewJob>> = (0..40)
            .map(|n| vec![with(&format!("e{n}"), "{}")])
            .collect();
        // 40: written in key order, its job `aa1` is new and then `dup` conflicts with the
        // stored job.
        requests.push(vec![with("dup", r#"{"v":2}"#), with("aa1", r#"{"x":1}"#)]);
        // 41: names a subscriber that does not exist.
        requests.push(vec![new_job("ghost", "g", at(0), at(60_000))]);
        // 42: repeats the stored job.
        requests.push(vec![with("dup", r#"{"v":1}"#)]);
        // 43: the key and payload of request 40's rolled-back job.
        requests.push(vec![with("aa1", r#"{"x":1}"#)]);
        let results = crate::support::create_at_once(&store, requests).await;
        for (n, result) in results[..40].iter().enumerate() {
            let outcomes = result
                .as_ref()
                .unwrap_or_else(|e| panic!("request {n}: {e}"));
            assert_eq!(expect_created(&outcomes[0]).event_id, format!("e{n}"));
        }
        assert!(
            matches!(&results[40], Err(StoreError::PayloadConflict { event_id, .. }) if event_id == "dup"),
            "{:?}",
            results[40]
        );
        assert!(
            matches!(&results[41], Err(StoreError::UnknownSubscriber(id)) if id == "ghost"),
            "{:?}",
            results[41]
        );
        let repeat = results[42].as_ref().expect("the repeat");
        assert_eq!(expect_existing(&repeat[0]).id, stored.id);
        let aa1 = results[43].as_ref().expect("aa1 alone");
        let aa1 = expect_created(&aa1[0]).id;
        let jobs = list(&store, JobFilter::default()).await;
        assert_eq!(jobs.len(), 1 + 40 + 1, "nothing of request 40 stays");
        let stored_aa1: Vec<_> = jobs
            .iter()
            .filter(|j| j.event_id == "aa1")
            .map(|j| j.id)
            .collect();
        assert_eq!(stored_aa1, [aa1]);
        assert!(jobs.iter().all(|j| j.subscriber_id == "a"));
    }
);

// Many concurrent creates over few keys, lone and multi-job requests mixed, some
// conflicting: every request gets its own answer (created, existing, or a conflict),
// never a deadlock or another store failure, and each key has one job. Groups write
// in key order; mixing lone and multi-job requests in one transaction deadlocked on
// PostgreSQL.
store_case!(
    concurrent_mixed_creates_never_deadlock,
    async |store: SharedStore| {
        for s in ["a", "b", "c"] {
            add_subscriber(&store, s).await;
        }
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..4 {
            let mut requests = Vec::new();
            for _ in 0..600 {
                let size = if next(10) < 6 { 1 } else { 2 + next(6) };
                let mut keys = std::collections::BTreeSet::new();
                while (keys.len() as u64) < size {
                    keys.insert((["a", "b", "c"][next(3) as usize], next(40)));
                }
                let payload = if next(10) == 0 {
                    r#"{"v":2}"#
                } else {
                    r#"{"v":1}"#
                };
                let jobs: Vec<NewJob> = keys
                    .into_iter()
                    .map(|(s, e)| NewJob {
                        payload: payload.into(),
                        ..new_job(s, &format!("r{round}e{e}"), at(0), at(60_000))
                    })
                    .collect();
                requests.push(jobs);
            }
            for result in crate::support::create_at_once(&store, requests).await {
                match result {
                    Ok(_) | Err(StoreError::PayloadConflict { .. }) => {}
                    Err(other) => panic!("a create failed: {other}"),
                }
            }
        }
        let jobs = list(&store, JobFilter::default()).await;
        let keys: std::collections::HashSet<_> = jobs
            .iter()
            .map(|j| (j.subscriber_id.clone(), j.event_id.clone()))
            .collect();
        assert_eq!(keys.len(), jobs.len(), "one job per key");
    }
);
