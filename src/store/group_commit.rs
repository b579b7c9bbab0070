//! Group commit: requests that arrive while a write is running share the next write
//! (one transaction, one fsync), while each caller still gets its own result, and only
//! after that write has committed (docs/DESIGN.md §3, throughput shape). The API's
//! subscriber-load reads share reads the same way ([`crate::app::load_reads`]).
//!
//! A queue feeds one task. The task takes the first waiting request, waits for a free
//! writer slot (`parallel` of them; 1 for SQLite's single writer), then takes whatever
//! else has queued meanwhile, up to `max_weight`, and hands the group to the write
//! function. The busier the store, the larger the groups: no timer, so an idle store
//! writes a lone request at once.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::StoreError;

/// One result per request of a group, in the group's order.
pub type GroupResults<Res> = Vec<Result<Res, StoreError>>;

struct Pending<Req, Res> {
    request: Req,
    reply: oneshot::Sender<Result<Res, StoreError>>,
}

/// A handle to a group-commit task; cloning shares it. The task ends when every
/// handle is dropped.
pub struct GroupCommit<Req, Res> {
    queue: mpsc::UnboundedSender<Pending<Req, Res>>,
}

impl<Req, Res> Clone for GroupCommit<Req, Res> {
    fn clone(&self) -> Self {
        GroupCommit {
            queue: self.queue.clone(),
        }
    }
}

impl<Req, Res> std::fmt::Debug for GroupCommit<Req, Res> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

/// How a [`GroupCommit`] forms and runs its groups.
#[derive(Debug, Clone, Copy)]
pub struct GroupLimits {
    /// Most total weight in one group; a request heavier than this is written alone.
    pub max_weight: usize,
    /// Groups written at once (1 keeps writes in order, as SQLite's one writer does).
    pub parallel: usize,
}

impl<Req: Send + 'static, Res: Send + 'static> GroupCommit<Req, Res> {
    /// Starts the task. `weight` sizes a request (e.g. its job count); `write` writes a
    /// group and returns exactly one result per request, in order (a shorter answer
    /// fails the requests left without one).
    pub fn spawn<W, Fut>(limits: GroupLimits, weight: fn(&Req) -> usize, write: W) -> Self
    where
        W: Fn(Vec<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = GroupResults<Res>> + Send + 'static,
    {
        let (queue, mut waiting) = mpsc::unbounded_channel::<Pending<Req, Res>>();
        let write = Arc::new(write);
        let slots = Arc::new(Semaphore::new(limits.parallel.max(1)));
        tokio::spawn(async move {
            let mut carried: Option<Pending<Req, Res>> = None;
            loop {
                let first = match carried.take() {
                    Some(first) => first,
                    None => match waiting.recv().await {
                        Some(first) => first,
                        None => break,
                    },
                };
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    break;
                };
                let mut total = weight(&first.request);
                let mut group = vec![first];
                while total < limits.max_weight {
                    let Ok(next) = waiting.try_recv() else { break };
                    let next_weight = weight(&next.request);
                    if total + next_weight > limits.max_weight {
                        carried = Some(next);
                        break;
                    }
                    total += next_weight;
                    group.push(next);
                }
                let write = write.clone();
                tokio::spawn(async move {
                    let (requests, replies): (Vec<Req>, Vec<_>) =
                        group.into_iter().map(|p| (p.request, p.reply)).unzip();
                    let mut results = write(requests).await.into_iter();
                    for reply in replies {
                        let result = results.next().unwrap_or_else(|| {
                            Err(StoreError::Internal(
                                "a group write left a request out".into(),
                            ))
                        });
                        let _ = reply.send(result);
                    }
                    drop(slot);
                });
            }
        });
        GroupCommit { queue }
    }

    /// Queues `request` for the next group write and waits for its own result.
    ///
    /// # Errors
    /// The write's error for this request, or [`StoreError::Unavailable`] when the task
    /// has stopped.
    pub async fn submit(&self, request: Req) -> Result<Res, StoreError> {
        let stopped =
            || StoreError::Unavailable("the store's group-commit task has stopped".into());
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Pending { request, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// An error of the same kind (transient or not) for each request of a failed group.
pub fn same_kind(error: &StoreError) -> StoreError {
    if error.is_transient() {
        StoreError::Unavailable(error.to_string())
    } else {
        StoreError::Internal(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn limits(max_weight: usize) -> GroupLimits {
        GroupLimits {
            max_weight,
            parallel: 1,
        }
    }

    #[tokio::test]
    async fn requests_waiting_together_share_one_write_and_keep_their_own_results() {
        let groups = Arc::new(Mutex::new(Vec::<Vec<u32>>::new()));
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        let held = gate.clone().lock_owned().await;
        let (entered, mut writing) = mpsc::unbounded_channel::<()>();
        let (seen, inner) = (groups.clone(), gate.clone());
        let commit = GroupCommit::spawn(
            limits(100),
            |_| 1,
            move |requests: Vec<u32>| {
                let (seen, gate, entered) = (seen.clone(), inner.clone(), entered.clone());
                async move {
                    let _ = entered.send(());
                    let _open = gate.lock().await;
                    seen.lock().unwrap().push(requests.clone());
                    requests
                        .into_iter()
                        .map(|r| match r {
                            3 => Err(StoreError::UnknownSubscriber("s".into())),
                            r => Ok(r * 10),
                        })
                        .collect()
                }
            },
        );
        let submit = |r: u32| {
            let commit = commit.clone();
            tokio::spawn(async move { commit.submit(r).await })
        };
        // The first request is written alone and holds the writer while the rest queue.
        let first = submit(1);
        writing.recv().await.unwrap();
        let rest: Vec<_> = (2..=4).map(submit).collect();
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        drop(held);
        assert_eq!(first.await.unwrap().unwrap(), 10);
        let mut answers = Vec::new();
        for task in rest {
            answers.push(task.await.unwrap().map_err(|e| e.to_string()));
        }
        assert_eq!(answers[0], Ok(20));
        assert!(
            answers[1]
                .as_ref()
                .is_err_and(|e| e.contains("does not exist"))
        );
        assert_eq!(answers[2], Ok(40));
        assert_eq!(*groups.lock().unwrap(), vec![vec![1], vec![2, 3, 4]]);
    }

    #[tokio::test]
    async fn a_group_never_exceeds_its_weight_and_a_heavy_request_goes_alone() {
        let groups = Arc::new(Mutex::new(Vec::<Vec<usize>>::new()));
        let seen = groups.clone();
        let commit = GroupCommit::spawn(
            limits(10),
            |r: &usize| *r,
            move |requests: Vec<usize>| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push(requests.clone());
                    requests.into_iter().map(Ok).collect()
                }
            },
        );
        let tasks: Vec<_> = [4, 4, 4, 25, 1]
            .into_iter()
            .map(|r| {
                let commit = commit.clone();
                tokio::spawn(async move { commit.submit(r).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        for group in groups.lock().unwrap().iter() {
            let weight: usize = group.iter().sum();
            assert!(weight <= 10 || group.len() == 1, "{group:?}");
        }
    }

    #[tokio::test]
    async fn a_short_answer_fails_the_requests_left_out() {
        let commit = GroupCommit::spawn(
            limits(10),
            |_| 1,
            |_requests: Vec<u8>| async { Vec::<Result<u8, StoreError>>::new() },
        );
        let error = commit.submit(1).await.unwrap_err();
        assert!(matches!(error, StoreError::Internal(_)), "{error}");
    }
}
