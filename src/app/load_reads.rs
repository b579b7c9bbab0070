//! The subscriber loads that job views need (why a due job waits: its subscriber at its
//! limit, its destination held; docs/DESIGN.md §5.3), read once for all the requests
//! waiting together.
//!
//! Every `POST /v1/jobs` answers its job's view, and the view of a job due now reads its
//! subscriber's load: on PostgreSQL two queries per created job, which cost the database
//! more than the create itself (issue #18: 0.86 against 0.50 ms of database CPU per
//! job in `burst --concurrency 50`). Requests queue; one task takes the first, then
//! everything queued meanwhile (the mechanism of the group commits,
//! [`crate::store::group_commit`]), and reads the loads of its distinct subscribers in
//! one statement ([`crate::store::Store::subscriber_loads`]; one per subscriber
//! before issue #36, a statement per created job when jobs spread over many
//! subscribers), at the latest `now` among them. Every read starts after each of its requests was
//! queued, so after that request's own write committed: a view is never older than
//! its request.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use crate::domain::Timestamp;
use crate::domain::waiting::SubscriberLoad;
use crate::store::group_commit::{GroupCommit, GroupLimits, GroupResults, same_kind};
use crate::store::{SharedStore, StoreError};

/// Subscribers' loads by id.
type Loads = HashMap<String, SubscriberLoad>;

/// Most requests one read serves.
const MAX_GROUP: usize = 1_024;
/// Groups read at once.
const PARALLEL: usize = 4;

/// A handle to the reading task; cloning shares it.
#[derive(Clone, Debug)]
pub struct LoadReads {
    group: GroupCommit<(String, Timestamp), Option<SubscriberLoad>>,
}

impl LoadReads {
    /// Starts the task on `store` (within a tokio runtime).
    pub fn spawn(store: SharedStore) -> Self {
        Self::spawn_with(move |ids: Vec<String>, now| {
            let store = store.clone();
            async move { store.subscriber_loads(&ids, now).await }
        })
    }

    /// Starts the task with `load` reading the loads of some subscribers (those that
    /// exist).
    fn spawn_with<L, Fut>(load: L) -> Self
    where
        L: Fn(Vec<String>, Timestamp) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Loads, StoreError>> + Send + 'static,
    {
        let limits = GroupLimits {
            max_weight: MAX_GROUP,
            parallel: PARALLEL,
        };
        let load = Arc::new(load);
        let group = GroupCommit::spawn(
            limits,
            |_| 1,
            move |requests| {
                let load = load.clone();
                async move { read_group(&*load, requests).await }
            },
        );
        LoadReads { group }
    }

    /// Subscriber `id`'s load, read after this call (`None`: no such subscriber).
    ///
    /// # Errors
    /// The store's error for that subscriber's read.
    pub async fn get(
        &self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SubscriberLoad>, StoreError> {
        self.group.submit((id.to_owned(), now)).await
    }
}

/// Reads the distinct subscribers of `requests` with one call of `load`, at their
/// latest `now`; a failed read fails each request of the group with its kind.
async fn read_group<L, Fut>(
    load: &L,
    requests: Vec<(String, Timestamp)>,
) -> GroupResults<Option<SubscriberLoad>>
where
    L: Fn(Vec<String>, Timestamp) -> Fut,
    Fut: Future<Output = Result<Loads, StoreError>> + Send + 'static,
{
    let Some(now) = requests.iter().map(|(_, now)| *now).max() else {
        return Vec::new();
    };
    let distinct: std::collections::BTreeSet<&str> =
        requests.iter().map(|(id, _)| id.as_str()).collect();
    let ids = distinct.into_iter().map(str::to_owned).collect();
    match load(ids, now).await {
        Ok(loads) => requests
            .iter()
            .map(|(id, _)| Ok(loads.get(id).copied()))
            .collect(),
        Err(error) => requests.iter().map(|_| Err(same_kind(&error))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::testing::START;

    /// The reads, as (subscribers, now); each read waits for `gate`.
    type Reads = Arc<Mutex<Vec<(Vec<String>, Timestamp)>>>;

    fn some_load() -> SubscriberLoad {
        SubscriberLoad {
            open_attempts: 0,
            max_in_flight: 1,
            started_last_second: 0,
            rate_limit_per_second: None,
            last_started_at: None,
            destination_hold: None,
            destination_hold_until: None,
            endpoint_hold: None,
            endpoint_hold_until: None,
            recent: Default::default(),
        }
    }

    #[tokio::test]
    async fn requests_waiting_together_share_one_read_begun_after_them() {
        let reads: Reads = Arc::default();
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        let held = gate.clone().lock_owned().await;
        let (seen, inner) = (reads.clone(), gate.clone());
        let loads = LoadReads::spawn_with(move |ids: Vec<String>, now| {
            let (seen, gate) = (seen.clone(), inner.clone());
            async move {
                let _open = gate.lock().await;
                seen.lock().unwrap().push((ids.clone(), now));
                if ids.iter().any(|id| id == "broken") {
                    return Err(StoreError::Unavailable("down".into()));
                }
                Ok(ids
                    .into_iter()
                    .filter(|id| id != "gone")
                    .map(|id| (id, some_load()))
                    .collect())
            }
        });
        let get = |id: &'static str, at: u64| {
            let loads = loads.clone();
            tokio::spawn(async move { loads.get(id, START.plus_ms(at)).await })
        };
        // The first read holds the task while the rest queue behind it.
        let first = get("a", 0);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let rest = [get("b", 1), get("a", 3), get("gone", 2), get("b", 1)];
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        drop(held);
        assert!(first.await.unwrap().unwrap().is_some());
        let mut answers = Vec::new();
        for task in rest {
            answers.push(task.await.unwrap().unwrap());
        }
        let found: Vec<bool> = answers.iter().map(Option::is_some).collect();
        assert_eq!(found, [true, true, false, true], "`gone` does not exist");
        let reads = reads.lock().unwrap().clone();
        // One read of the first request, then one read of the distinct subscribers of
        // the group that queued meanwhile, at the group's latest `now`.
        assert_eq!(reads[0], (vec!["a".to_owned()], START));
        assert_eq!(
            reads[1..],
            [(
                vec!["a".to_owned(), "b".to_owned(), "gone".to_owned()],
                START.plus_ms(3)
            )]
        );

        // A failed read answers each request of its group with its kind.
        let held = gate.clone().lock_owned().await;
        let blocker = get("a", 4);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let broken = [get("broken", 5), get("a", 5)];
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        drop(held);
        assert!(blocker.await.unwrap().unwrap().is_some());
        for task in broken {
            let answer = task.await.unwrap();
            assert!(answer.is_err_and(|e| e.is_transient()));
        }
    }
}
