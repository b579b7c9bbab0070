//! Group commit of attempt outcomes: attempts that finish at about the same time share
//! one store write (one transaction, one fsync), while each still learns its own
//! result, fenced by its own lease token (DESIGN §3, throughput shape).

use std::sync::Arc;

use crate::domain::Clock;
use crate::store::group_commit::{GroupCommit, GroupLimits, same_kind};
use crate::store::{Fenced, OutcomeRecord, SharedStore, StoreError};

/// Most outcomes written together.
const MAX_BATCH: usize = 256;

/// A handle to the recorder task; cloning shares it. The task ends when every handle is
/// dropped.
#[derive(Debug, Clone)]
pub struct Recorder {
    writes: GroupCommit<OutcomeRecord, Fenced>,
}

impl Recorder {
    /// Starts the recorder task over `store`; each group is written at the clock's
    /// `now` when its write starts.
    pub fn spawn(store: SharedStore, clock: Arc<dyn Clock>) -> Recorder {
        let limits = GroupLimits {
            max_weight: MAX_BATCH,
            parallel: 1,
        };
        let writes = GroupCommit::spawn(
            limits,
            |_| 1,
            move |records: Vec<OutcomeRecord>| {
                let (store, now) = (store.clone(), clock.now());
                async move {
                    match store.record_outcomes(&records, now).await {
                        Ok(results) => results.into_iter().map(Ok).collect(),
                        Err(error) => records.iter().map(|_| Err(same_kind(&error))).collect(),
                    }
                }
            },
        );
        Recorder { writes }
    }

    /// Writes `record` with whatever else is waiting, and returns its own result.
    pub async fn record(&self, record: OutcomeRecord) -> Result<Fenced, StoreError> {
        self.writes.submit(record).await
    }
}
