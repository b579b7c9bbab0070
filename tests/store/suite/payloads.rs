//! Payloads stored once (issue #36, docs/DESIGN.md §3): the jobs of one request that
//! carry the same payload (a fan-out, a schedule's period) share one stored copy and
//! one copy per claim in memory; each delivery is still the producer's bytes; a lone job
//! keeps its payload in its own row; a repeat writes no new copy; retention deletes a
//! shared payload with the last job that references it, never before (CASES.md C-21).

use std::sync::Arc;

use deferhook::domain::JobEvent;
use deferhook::store::{CreateOutcome, StoreError};

use crate::finish::record;
use crate::support::{
    Backend, add_subscribers, at, claim, create, delivered, fan_out, new_job, read_count,
};

/// Escapes, non-ASCII, a big integer and `1.0`: bytes a re-serialisation would change.
const BODY: &str = r#"{"b":1,"a":"\u001B é \u2028 😀","n":12345678901234567890,"f":1.0}"#;

async fn stored_payloads(backend: &Backend) -> i64 {
    read_count(backend, "SELECT COUNT(*) FROM payloads").await
}

async fn jobs_with_own_payload(backend: &Backend) -> i64 {
    read_count(backend, "SELECT COUNT(*) FROM jobs WHERE payload <> ''").await
}

store_case!(
    the_jobs_of_one_request_share_one_stored_payload,
    async |backend: Backend| {
        let store = backend.store.clone();
        add_subscribers(&store, &["a", "b", "c", "lone"]).await;
        let payload: Arc<str> = Arc::from(BODY);

        create(&store, fan_out(&["a", "b", "c"], "e-1", &payload)).await;
        create(&store, vec![new_job("lone", "e-2", at(0), at(3_600_000))]).await;

        assert_eq!(
            stored_payloads(&backend).await,
            1,
            "one copy for three jobs"
        );
        assert_eq!(
            jobs_with_own_payload(&backend).await,
            1,
            "the lone job keeps its own"
        );
        let claimed = claim(&store, at(0), 10).await;
        assert_eq!(claimed.len(), 4);
        let shared: Vec<_> = claimed
            .iter()
            .filter(|c| c.subscriber_id != "lone")
            .collect();
        assert_eq!(shared.len(), 3);
        for job in &shared {
            assert_eq!(
                job.payload.as_bytes(),
                BODY.as_bytes(),
                "the producer's bytes"
            );
            assert!(
                Arc::ptr_eq(&job.payload, &shared[0].payload),
                "one copy in memory per claim"
            );
        }
        let lone = claimed.iter().find(|c| c.subscriber_id == "lone").unwrap();
        assert_eq!(lone.payload.as_bytes(), crate::support::PAYLOAD.as_bytes());
    }
);

store_case!(
    two_payloads_of_one_request_are_stored_once_each,
    async |backend: Backend| {
        let store = backend.store.clone();
        add_subscribers(&store, &["a", "b", "c", "d"]).await;
        let first: Arc<str> = Arc::from(r#"{"part":1}"#);
        let second: Arc<str> = Arc::from(r#"{"part":2}"#);
        let mut jobs = fan_out(&["a", "b"], "e", &first);
        jobs.extend(fan_out(&["c", "d"], "e", &second));

        create(&store, jobs).await;

        assert_eq!(stored_payloads(&backend).await, 2);
        let mut sent: Vec<(String, String)> = claim(&store, at(0), 10)
            .await
            .into_iter()
            .map(|c| (c.subscriber_id, c.payload.to_string()))
            .collect();
        sent.sort();
        let expected = [
            ("a", r#"{"part":1}"#),
            ("b", r#"{"part":1}"#),
            ("c", r#"{"part":2}"#),
            ("d", r#"{"part":2}"#),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(s, p)| ((*s).to_owned(), (*p).to_owned()))
            .collect();
        assert_eq!(sent, expected);
    }
);

store_case!(
    a_repeated_request_stores_no_new_copy,
    async |backend: Backend| {
        let store = backend.store.clone();
        add_subscribers(&store, &["a", "b", "c"]).await;
        create(&store, fan_out(&["a", "b"], "e", &Arc::from(BODY))).await;

        // The same event again, its payload the same JSON value written otherwise.
        let same: Arc<str> = Arc::from(format!(" {BODY} "));
        let again = store.create_jobs(fan_out(&["a", "b"], "e", &same)).await;
        let again = again.unwrap();
        assert!(
            again
                .iter()
                .all(|o| matches!(o, CreateOutcome::Existing { .. }))
        );
        assert_eq!(
            stored_payloads(&backend).await,
            1,
            "a repeat writes no copy"
        );

        // Another payload under the same event id: refused, nothing written.
        let other = fan_out(&["a", "b", "c"], "e", &Arc::from(r#"{"other":true}"#));
        let conflict = store.create_jobs(other).await;
        assert!(
            matches!(conflict, Err(StoreError::PayloadConflict { .. })),
            "{conflict:?}"
        );
        assert_eq!(stored_payloads(&backend).await, 1);
        assert_eq!(read_count(&backend, "SELECT COUNT(*) FROM jobs").await, 2);

        // One new subscriber among repeats: its job is written, with its own copy.
        let grown = store
            .create_jobs(fan_out(&["a", "b", "c"], "e", &same))
            .await
            .unwrap();
        assert!(matches!(grown[2], CreateOutcome::Created(_)));
        assert_eq!(stored_payloads(&backend).await, 2);
        let sent = claim(&store, at(0), 10).await;
        assert_eq!(sent.len(), 3);
        let c = sent.iter().find(|c| c.subscriber_id == "c").unwrap();
        assert_eq!(&*c.payload, &*same, "the new job's own request's bytes");
        for job in sent.iter().filter(|c| c.subscriber_id != "c") {
            assert_eq!(&*job.payload, BODY, "the stored jobs keep the first bytes");
        }
    }
);

store_case!(
    retention_deletes_a_shared_payload_with_its_last_job,
    async |backend: Backend| {
        let store = backend.store.clone();
        add_subscribers(&store, &["a", "b"]).await;
        let jobs = create(&store, fan_out(&["a", "b"], "e", &Arc::from(BODY))).await;
        let claimed = claim(&store, at(0), 10).await;
        let first = claimed.iter().find(|c| c.job_id == jobs[0].id).unwrap();
        record(
            &store,
            first,
            JobEvent::Delivered,
            delivered(200),
            at(1_000),
        )
        .await;

        let purged = store.purge_finished(Some(at(2_000)), None, 100).await;
        assert_eq!(purged.unwrap().total(), 1);
        assert_eq!(
            stored_payloads(&backend).await,
            1,
            "kept while a job references it"
        );
        let second = claimed.iter().find(|c| c.job_id == jobs[1].id).unwrap();
        assert_eq!(&*second.payload, BODY);
        record(
            &store,
            second,
            JobEvent::Delivered,
            delivered(200),
            at(1_500),
        )
        .await;

        let purged = store.purge_finished(Some(at(2_000)), None, 100).await;
        assert_eq!(purged.unwrap().total(), 1);
        assert_eq!(stored_payloads(&backend).await, 0, "gone with its last job");
    }
);
