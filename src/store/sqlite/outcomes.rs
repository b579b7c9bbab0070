//! Outcomes in SQLite: the statements of a batch (see [`crate::store::outcomes`]).
//! The batch (`?1`) is read as rows with `json_each` and `json_extract`.

use super::Pools;
use crate::store::outcomes::{Apply, OutcomeStatements};

/// The batch `?1` (see [`crate::store::outcomes::to_json`]) as rows `v`, one per
/// record: the finish and the apply read the same columns.
macro_rules! batch_rows {
    () => {
        "(SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token, \
           json_extract(value, '$.number') AS number, \
           json_extract(value, '$.finished_at') AS finished_at, \
           json_extract(value, '$.outcome') AS outcome, json_extract(value, '$.status') AS status, \
           json_extract(value, '$.error_class') AS error_class, \
           json_extract(value, '$.reason') AS reason, \
           json_extract(value, '$.body_excerpt') AS body_excerpt, \
           json_extract(value, '$.state') AS state, json_extract(value, '$.due_at') AS due_at, \
           json_extract(value, '$.attempts') AS attempts, \
           json_extract(value, '$.dead_reason') AS dead_reason, \
           json_extract(value, '$.deadline') AS deadline, \
           json_extract(value, '$.possible_duplicate') AS possible_duplicate, \
           json_extract(value, '$.resent') AS resent, \
           json_extract(value, '$.now') AS now \
         FROM json_each(?1)) AS v"
    };
}

/// Finishes each attempt of the batch: its row is named by its lease token, so a late
/// result still lands on its own attempt. A resent request makes it a possible duplicate.
pub(crate) const FINISH_ATTEMPTS: &str = concat!(
    "UPDATE attempts SET finished_at = v.finished_at, \
        outcome = v.outcome, status = v.status, error_class = v.error_class, reason = v.reason, \
        body_excerpt = v.body_excerpt, \
        possible_duplicate = CASE WHEN v.resent THEN 1 ELSE attempts.possible_duplicate END FROM \
        ",
    batch_rows!(),
    " \
        WHERE attempts.job_id = v.id AND attempts.number = v.number \
        AND attempts.lease_token = v.token"
);

/// Applies each transition only while its lease holds (fencing token, `in_flight`);
/// returns the (id, token) of those applied. `+jobs.state` keeps the planner on the
/// primary key, driven by the batch: with an index on the state it would walk every
/// job in flight and re-read the whole batch for each (see the plan test).
pub(crate) const APPLY_TRANSITIONS: &str = concat!(
    "UPDATE jobs SET state = v.state, \
    due_at = v.due_at, attempts = v.attempts, \
    dead_reason = v.dead_reason, dead_detail = NULL, deadline = v.deadline, \
    possible_duplicate = v.possible_duplicate, updated_at = v.now, \
    lease_owner = NULL, lease_expires_at = NULL, \
    delivered_at = CASE WHEN v.state = 'delivered' THEN v.finished_at ELSE delivered_at END, \
    dead_at = CASE WHEN v.state = 'dead' THEN v.now ELSE dead_at END, \
    last_error_class = CASE WHEN v.error_class IS NULL THEN last_error_class ELSE v.error_class END, \
    last_error_status = CASE WHEN v.error_class IS NULL THEN last_error_status ELSE v.status END, \
    last_error_reason = CASE WHEN v.error_class IS NULL THEN last_error_reason ELSE v.reason END, \
    last_error_body = CASE WHEN v.error_class IS NULL THEN last_error_body ELSE v.body_excerpt END \
    FROM \
    ",
    batch_rows!(),
    " \
    WHERE jobs.id = v.id AND jobs.lease_token = v.token AND +jobs.state = 'in_flight' \
    RETURNING jobs.id, jobs.lease_token"
);

impl OutcomeStatements for Pools {
    // One writer connection takes every write in turn: no row locks, no lock order.
    const LOCK_SUBSCRIBERS: Option<&'static str> = None;
    const APPLY: Apply = Apply::Separate {
        finish: FINISH_ATTEMPTS,
        apply: APPLY_TRANSITIONS,
    };
    /// Pauses the subscriber of job `?1` at `?2` for reason `gone` (its receiver
    /// answered 410); one already paused keeps its reason.
    const PAUSE_SUBSCRIBER: &'static str = "UPDATE subscribers SET enabled = 0, paused_reason = 'gone', \
        paused_at = ?2, updated_at = ?2 \
        WHERE id = (SELECT subscriber_id FROM jobs WHERE id = ?1) AND enabled = 1";
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::domain::attempt::AttemptOutcome;
    use crate::domain::{JobEvent, JobState, job};
    use crate::store::sqlite::test_store;
    use crate::store::{
        AttemptResult, ClaimRequest, Fenced, LeaseRef, NewJob, OutcomeRecord, Store, WorkerStore,
    };
    use crate::testing::START;

    /// Outcomes recorded one by one go through the group commit, each with its own
    /// result: a repeat of a lease already written is late.
    #[tokio::test]
    async fn outcomes_recorded_one_by_one_keep_their_own_results() {
        let store = test_store().await;
        let jobs = (0..2)
            .map(|n| NewJob {
                id: Uuid::now_v7(),
                subscriber_id: "s".into(),
                event_id: format!("e{n}"),
                payload: "{}".into(),
                deliver_at: START,
                deadline: START.plus_ms(60_000),
                max_attempts: None,
                created_at: START,
                event_type: None,
                schedule_id: None,
            })
            .collect();
        store.create_jobs(jobs).await.unwrap();
        let claimed = store
            .claim(ClaimRequest {
                now: START,
                limit: 10,
                owner: "w".into(),
                lease_ms: 30_000,
            })
            .await
            .unwrap();
        assert_eq!(claimed.len(), 2);
        let finished = START.plus_ms(5);
        let record = |n: usize| {
            let job = &claimed[n];
            OutcomeRecord {
                lease: LeaseRef {
                    job_id: job.job_id,
                    token: job.lease_token,
                },
                subscriber_id: job.subscriber_id.clone(),
                attempt: job.attempt,
                started_at: START,
                finished_at: finished,
                attempt_timeout_ms: 10_000,
                result: AttemptResult {
                    outcome: AttemptOutcome::Delivered,
                    status: Some(200),
                    error_class: None,
                    reason: None,
                    body_excerpt: None,
                    resent: false,
                },
                retry_after: None,
                transition: job::transition(&job.snapshot, JobEvent::Delivered, finished).unwrap(),
                pause_subscriber: false,
            }
        };
        let (first, second) = tokio::join!(
            store.record_outcome(record(0), finished),
            store.record_outcome(record(1), finished),
        );
        assert_eq!(
            (first.unwrap(), second.unwrap()),
            (Fenced::Applied, Fenced::Applied)
        );
        let again = store.record_outcome(record(0), finished).await.unwrap();
        assert_eq!(again, Fenced::Late);
        for job in &claimed {
            let stored = store.get_job(job.job_id, finished).await.unwrap().unwrap();
            assert_eq!(stored.state, JobState::Delivered);
        }
    }
}
