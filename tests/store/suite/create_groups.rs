//! Creates that share a group (issue #36): PostgreSQL writes a group's lone jobs in one
//! statement and the rest in a transaction, SQLite all in its batch writer. Whatever
//! the grouping, each request gets its own answer (created, a repeat, a conflict, an
//! unknown subscriber); a fan-out that conflicts writes nothing, its payload included;
//! racing identical fan-outs create each job once and leave no payload behind; and a
//! purge deletes its jobs' attempts (PostgreSQL has no cascading foreign key for them
//! since migration 0023) and a payload with its last job.

use std::sync::Arc;

use deferhook::domain::JobEvent;
use deferhook::store::{CreateOutcome, NewJob, SharedStore, StoreError};

use crate::finish::record;
use crate::support::{
    Backend, add_subscribers, at, claim, create, create_at_once, delivered, fan_out, new_job,
    read_count,
};

const BODY: &str = r#"{"n":12345678901234567890,"s":"\u00e9 é 😀"}"#;

/// Each request's answer in one word: `created`/`existing` per job (comma separated),
/// `unknown:<id>`, `conflict`, or the error.
fn answer(result: &Result<Vec<CreateOutcome>, StoreError>) -> String {
    match result {
        Ok(outcomes) => outcomes
            .iter()
            .map(|o| match o {
                CreateOutcome::Created(_) => "created",
                CreateOutcome::Existing { .. } => "existing",
            })
            .collect::<Vec<_>>()
            .join(","),
        Err(StoreError::UnknownSubscriber(id)) => format!("unknown:{id}"),
        Err(StoreError::PayloadConflict { .. }) => "conflict".into(),
        Err(other) => format!("error:{other:?}"),
    }
}

/// Sends `requests` at once; each one's answer, in order.
async fn at_once(store: &SharedStore, requests: Vec<Vec<NewJob>>) -> Vec<String> {
    create_at_once(store, requests)
        .await
        .iter()
        .map(answer)
        .collect()
}

fn job(subscriber: &str, event: &str, payload: &str) -> NewJob {
    NewJob {
        payload: Arc::from(payload),
        ..new_job(subscriber, event, at(0), at(3_600_000))
    }
}

fn sorted(mut pair: Vec<String>) -> Vec<String> {
    pair.sort();
    pair
}

store_case!(
    each_lone_create_of_a_group_gets_its_own_answer,
    async |backend: Backend| {
        let store = backend.store.clone();
        add_subscribers(&store, &["a", "b"]).await;
        let requests = vec![
            vec![job("a", "e1", BODY)],
            vec![job("ghost", "e1", BODY)],
            vec![job("b", "e1", BODY)],
            vec![job("a", "same", BODY)],
            vec![job("a", "same", BODY)],
            vec![job("a", "other", BODY)],
            vec![job("a", "other", r#"{"other":1}"#)],
            vec![job("zzz-ghost", "e9", BODY)],
        ];

        let answers = at_once(&store, requests).await;

        assert_eq!(answers[0], "created");
        assert_eq!(answers[1], "unknown:ghost");
        assert_eq!(answers[2], "created");
        assert_eq!(sorted(answers[3..5].to_vec()), ["created", "existing"]);
        assert_eq!(sorted(answers[5..7].to_vec()), ["conflict", "created"]);
        assert_eq!(answers[7], "unknown:zzz-ghost");
        assert_eq!(read_count(&backend, "SELECT COUNT(*) FROM jobs").await, 4);
    }
);

store_case!(
    a_conflicting_fan_out_writes_nothing_whatever_it_is_grouped_with,
    async |backend: Backend| {
        let store = backend.store.clone();
        add_subscribers(&store, &["a", "b", "c", "d"]).await;
        create(&store, vec![job("c", "e", r#"{"first":true}"#)]).await;
        let payload: Arc<str> = Arc::from(BODY);

        let alone = store
            .create_jobs(fan_out(&["a", "b", "c", "d"], "e", &payload))
            .await;
        assert_eq!(answer(&alone), "conflict");
        assert_eq!(
            read_count(&backend, "SELECT COUNT(*) FROM payloads").await,
            0
        );
        let requests = vec![
            fan_out(&["a", "b", "c", "d"], "e", &payload),
            vec![job("a", "lone", BODY)],
            fan_out(&["a", "b"], "ok", &Arc::from(BODY)),
        ];
        let answers = at_once(&store, requests).await;

        assert_eq!(answers, ["conflict", "created", "created,created"]);
        assert_eq!(
            read_count(&backend, "SELECT COUNT(*) FROM payloads").await,
            1
        );
        assert_eq!(read_count(&backend, "SELECT COUNT(*) FROM jobs").await, 4);
    }
);

store_case!(
    racing_identical_fan_outs_create_each_job_once,
    async |backend: Backend| {
        let store = backend.store.clone();
        let ids: Vec<String> = (0..40).map(|i| format!("s{i:02}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        add_subscribers(&store, &ids).await;
        let requests = (0..6)
            .map(|_| fan_out(&ids, "race", &Arc::from(BODY)))
            .collect();

        let answers = at_once(&store, requests).await;

        let created: usize = answers.iter().map(|a| a.matches("created").count()).sum();
        assert_eq!(created, 40, "{answers:?}");
        assert!(
            answers
                .iter()
                .all(|a| !a.contains("error") && !a.contains("conflict"))
        );
        assert_eq!(read_count(&backend, "SELECT COUNT(*) FROM jobs").await, 40);
        let orphans = "SELECT COUNT(*) FROM payloads p \
            WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.payload_id = p.id)";
        assert_eq!(
            read_count(&backend, orphans).await,
            0,
            "no payload left behind"
        );
        let claimed = claim(&store, at(0), 100).await;
        assert_eq!(claimed.len(), 40);
        assert!(
            claimed
                .iter()
                .all(|c| c.payload.as_bytes() == BODY.as_bytes())
        );
    }
);

store_case!(
    a_purge_deletes_its_jobs_attempts_and_a_payload_with_its_last_job,
    async |backend: Backend| {
        let store = backend.store.clone();
        add_subscribers(&store, &["a", "b"]).await;
        create(&store, fan_out(&["a", "b"], "e", &Arc::from(BODY))).await;
        let claimed = claim(&store, at(0), 10).await;
        let b = claimed.iter().find(|c| c.subscriber_id == "b").unwrap();
        record(&store, b, JobEvent::Delivered, delivered(200), at(1_000)).await;
        store.delete_subscriber("a", at(1_500)).await.unwrap();

        let purged = store.purge_finished(Some(at(2_000)), None, 100).await;
        assert_eq!(purged.unwrap().total(), 1);
        assert_eq!(
            read_count(&backend, "SELECT COUNT(*) FROM payloads").await,
            1,
            "a's dead job still references it"
        );
        let purged = store
            .purge_finished(Some(at(2_000)), Some(at(1_000_000)), 100)
            .await;
        assert_eq!(purged.unwrap().total(), 1);

        assert_eq!(
            read_count(&backend, "SELECT COUNT(*) FROM payloads").await,
            0
        );
        assert_eq!(read_count(&backend, "SELECT COUNT(*) FROM jobs").await, 0);
        assert_eq!(
            read_count(&backend, "SELECT COUNT(*) FROM attempts").await,
            0
        );
    }
);
