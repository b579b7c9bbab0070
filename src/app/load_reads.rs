//! The subscriber loads that job views need (why a due job waits: its subscriber at its
//! limit, its destination held; docs/DESIGN.md §5.3), read once for all the requests
//! waiting together.
//!
//! Every `POST /v1/jobs` answers its job's view, and the view of a job due now reads its
//! subscriber's load: on PostgreSQL two queries per created job, which cost the database
//! more than the create itself (issue #18: 0.86 against 0.50 ms of database CPU per
//! job in `burst --concurrency 50`). Requests queue; one task takes the first, then
//! everything queued meanwhile (the mechanism of the group commits,
//! [`crate::store::group_commit`]), and reads each distinct subscriber's load once, at
//! the latest `now` among them. Every read starts after each of its requests was
//! queued, so after that request's own write committed: a view is never older than
//! its request.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use crate::domain::Timestamp;
use crate::domain::waiting::SubscriberLoad;
use crate::store::group_commit::{GroupCommit, GroupLimits, GroupResults, same_kind};
use crate::store::{SharedStore, StoreError};

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
        Self::spawn_with(move |id: String, now| {
            let store = store.clone();
            async move { store.subscriber_load(&id, now).await }
        })
    }

    /// Starts the task with `load` reading one subscriber's load.
    fn spawn_with<L, Fut>(load: L) -> Self
    where
        L: Fn(String, Timestamp) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<SubscriberLoad>, StoreError>> + Send + 'static,
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

/// Reads each distinct subscriber of `requests` once with `load`, all at once, at their
/// latest `now`.
async fn read_group<L, Fut>(
    load: &L,
    requests: Vec<(String, Timestamp)>,
) -> GroupResults<Option<SubscriberLoad>>
where
    L: Fn(String, Timestamp) -> Fut,
    Fut: Future<Output = Result<Option<SubscriberLoad>, StoreError>> + Send + 'static,
{
    let Some(now) = requests.iter().map(|(_, now)| *now).max() else {
        return Vec::new();
    };
    let mut reads = tokio::task::JoinSet::new();
    let mut distinct = std::collections::HashSet::new();
    for (id, _) in &requests {
        if distinct.insert(id.as_str()) {
            let (id, read) = (id.clone(), load(id.clone(), now));
            reads.spawn(async move { (id, read.await) });
        }
    }
    let mut loads: HashMap<String, Result<Option<SubscriberLoad>, StoreError>> = HashMap::new();
    while let Some(done) = reads.join_next().await {
        if let Ok((id, load)) = done {
            loads.insert(id, load);
        }
    }
    requests
        .iter()
        .map(|(id, _)| match loads.get(id.as_str()) {
            Some(Ok(load)) => Ok(*load),
            Some(Err(error)) => Err(same_kind(error)),
            None => Err(StoreError::Internal(
                "a subscriber-load read panicked".into(),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::testing::START;

    /// The loads read, as (subscriber, now); each read waits for `gate`.
    type Reads = Arc<Mutex<Vec<(String, Timestamp)>>>;

    #[tokio::test]
    async fn requests_waiting_together_share_one_read_per_subscriber_begun_after_them() {
        let reads: Reads = Arc::default();
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        let held = gate.clone().lock_owned().await;
        let (seen, inner) = (reads.clone(), gate.clone());
        let loads = LoadReads::spawn_with(move |id, now| {
            let (seen, gate) = (seen.clone(), inner.clone());
            async move {
                let _open = gate.lock().await;
                seen.lock().unwrap().push((id.clone(), now));
                match id.as_str() {
                    "broken" => Err(StoreError::Unavailable("down".into())),
                    "gone" => Ok(None),
                    _ => Ok(Some(SubscriberLoad {
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
                    })),
                }
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
        let rest = [get("a", 1), get("a", 3), get("gone", 2), get("broken", 1)];
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        drop(held);
        assert!(first.await.unwrap().unwrap().is_some());
        let mut answers = Vec::new();
        for task in rest {
            answers.push(task.await.unwrap());
        }
        assert!(answers[0].as_ref().unwrap().is_some());
        assert!(answers[1].as_ref().unwrap().is_some());
        assert!(answers[2].as_ref().unwrap().is_none());
        assert!(answers[3].as_ref().is_err_and(StoreError::is_transient));
        let reads = reads.lock().unwrap().clone();
        // One read of the first request, then one per distinct subscriber of the group
        // that queued meanwhile, all at the group's latest `now`.
        assert_eq!(reads[0], ("a".to_owned(), START));
        let mut group: Vec<_> = reads[1..].to_vec();
        group.sort();
        let at = START.plus_ms(3);
        assert_eq!(
            group,
            vec![("a".into(), at), ("broken".into(), at), ("gone".into(), at)]
        );
    }
}
