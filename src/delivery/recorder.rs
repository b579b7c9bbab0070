//! Group commit of attempt outcomes: attempts that finish at about the same time share
//! one store write (one transaction, one fsync), while each still learns its own
//! result, fenced by its own lease token (DESIGN §3, throughput shape).

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::domain::Clock;
use crate::store::{Fenced, OutcomeRecord, SharedStore, StoreError};

/// Most outcomes written together.
const MAX_BATCH: usize = 256;

struct Pending {
    record: OutcomeRecord,
    reply: oneshot::Sender<Result<Fenced, StoreError>>,
}

/// A handle to the recorder task; cloning shares it. The task ends when every handle is
/// dropped.
#[derive(Debug, Clone)]
pub struct Recorder {
    queue: mpsc::UnboundedSender<Pending>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("job", &self.record.lease.job_id)
            .finish()
    }
}

impl Recorder {
    /// Starts the recorder task over `store`.
    pub fn spawn(store: SharedStore, clock: Arc<dyn Clock>) -> Recorder {
        let (queue, mut pending) = mpsc::unbounded_channel::<Pending>();
        tokio::spawn(async move {
            while let Some(first) = pending.recv().await {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match pending.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                let records: Vec<OutcomeRecord> = batch.iter().map(|p| p.record.clone()).collect();
                match store.record_outcomes(&records, clock.now()).await {
                    Ok(results) => {
                        for (pending, result) in batch.into_iter().zip(results) {
                            let _ = pending.reply.send(Ok(result));
                        }
                    }
                    Err(error) => {
                        for pending in batch {
                            let _ = pending.reply.send(Err(same_kind(&error)));
                        }
                    }
                }
            }
        });
        Recorder { queue }
    }

    /// Writes `record` with whatever else is waiting, and returns its own result.
    pub async fn record(&self, record: OutcomeRecord) -> Result<Fenced, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Pending { record, reply })
            .map_err(|_| StoreError::Unavailable("the outcome recorder has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the outcome recorder has stopped".into()))?
    }
}

/// An error of the same kind (transient or not) for each writer of a failed batch.
fn same_kind(error: &StoreError) -> StoreError {
    if error.is_transient() {
        StoreError::Unavailable(error.to_string())
    } else {
        StoreError::Internal(error.to_string())
    }
}
