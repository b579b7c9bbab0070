//! Creating jobs in SQLite: the statements of a group's transaction (see
//! [`crate::store::creates`]), on the one writer.

use super::{Pools, Tx};
use crate::store::StoreError;
use crate::store::creates::{CreateStatements, KnownSubscribers};
use crate::store::dialect::Query;
use crate::store::transactions::Transactions;

/// Whether subscriber `?1` is enabled; no row when it does not exist or is being
/// deleted (docs/DESIGN.md §5.3.1).
const SUBSCRIBER_ENABLED: &str =
    "SELECT enabled FROM subscribers WHERE id = ?1 AND deleted_at IS NULL";

impl CreateStatements for Pools {
    /// Inserts one job unless its key exists.
    const INSERT: &'static str = "INSERT INTO jobs (id, subscriber_id, event_id, payload, state, \
        max_attempts, deliver_at, deadline, due_at, created_at, updated_at, event_type, \
        schedule_id, payload_id) \
        VALUES (?1, ?2, ?3, ?4, 'scheduled', ?5, ?6, ?7, ?6, ?8, ?8, ?9, ?10, ?11) \
        ON CONFLICT (subscriber_id, event_id) DO NOTHING";
    /// The job of key (`?1`, `?2`) with its own payload and its shared payload's id.
    const FIND: &'static str = "SELECT j.id, j.subscriber_id, j.event_id, j.state, j.attempts, \
        j.max_attempts, j.deliver_at, j.deadline, j.due_at, j.created_at, j.updated_at, \
        j.delivered_at, j.dead_at, j.dead_reason, j.dead_detail, j.last_error_class, j.last_error_status, \
        j.last_error_reason, j.last_error_body, j.lease_owner, j.lease_token, \
        j.lease_expires_at, s.enabled AS subscriber_enabled, j.event_type, j.schedule_id, \
        j.payload, j.payload_id \
        FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
        WHERE j.subscriber_id = ?1 AND j.event_id = ?2";

    async fn known_subscribers(tx: &mut Tx, ids: &[&str]) -> Result<KnownSubscribers, StoreError> {
        let mut known = KnownSubscribers::new();
        for &id in ids {
            let query = Query::new(SUBSCRIBER_ENABLED).text(id.to_owned());
            let enabled: Option<(bool,)> = Pools::fetch_optional(tx, query).await?;
            if let Some((enabled,)) = enabled {
                known.insert(id.to_owned(), enabled);
            }
        }
        Ok(known)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use uuid::Uuid;

    use crate::store::sqlite::test_store;
    use crate::store::{NewJob, Store, WorkerStore};
    use crate::testing::START;

    /// The store wakes its worker for a created job due before the worker's plan, and
    /// not for one due after it.
    #[tokio::test]
    async fn a_created_job_due_before_the_plan_wakes_the_worker() {
        let store = test_store().await;
        let job = |event: &str, due_in_ms: u64| NewJob {
            id: Uuid::now_v7(),
            subscriber_id: "s".into(),
            event_id: event.into(),
            payload: std::sync::Arc::from("{}"),
            deliver_at: START.plus_ms(due_in_ms),
            deadline: START.plus_ms(600_000),
            max_attempts: None,
            created_at: START,
            event_type: None,
            schedule_id: None,
        };
        let wake = store.wake();
        let woken = || tokio::time::timeout(Duration::from_millis(50), wake.notified());
        wake.sleeping_until(START.plus_ms(10_000));
        store.create_jobs(vec![job("later", 20_000)]).await.unwrap();
        assert!(woken().await.is_err(), "due after the plan");
        store.create_jobs(vec![job("sooner", 1_000)]).await.unwrap();
        assert!(woken().await.is_ok(), "due before the plan");
    }
}
