//! The instance's heartbeat (docs/DESIGN.md §5.12): every [`HEARTBEAT_EVERY`] the
//! instance records its row in the store (its id, version, start, worker slots and the
//! slots its running attempts hold), so that every instance's console lists the same
//! live instances; when it stops it deletes its row. An instance not seen for
//! [`LIVE_WITHIN_MS`] is not live (it crashed, or lost the store).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::delivery::held_leases::HeldLeases;
use crate::domain::Clock;
use crate::store::{Heartbeat, SharedStore};

/// How often an instance records its heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// How recent an instance's heartbeat must be for it to count as live, in
/// milliseconds: three heartbeats, so one slow write does not hide it.
pub const LIVE_WITHIN_MS: u64 = 15_000;

/// What the heartbeat reports of this instance.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Its id (the worker's lease owner), version, start and worker slots; the slots
    /// in use are read at each beat.
    pub beat: Heartbeat,
    /// The leases its worker's running attempts hold (`None` without a worker).
    pub busy: Option<HeldLeases>,
}

impl Instance {
    /// The heartbeat as of now.
    fn current(&self) -> Heartbeat {
        let in_use = self.busy.as_ref().map_or(0, HeldLeases::len);
        Heartbeat {
            slots_in_use: u32::try_from(in_use).unwrap_or(u32::MAX),
            ..self.beat.clone()
        }
    }
}

/// Records `instance`'s heartbeat now and every [`HEARTBEAT_EVERY`] until `stop`, then
/// deletes its row. A failed write is logged once until one succeeds again.
pub async fn run(
    store: SharedStore,
    clock: Arc<dyn Clock>,
    instance: Instance,
    stop: CancellationToken,
) {
    let mut failing = false;
    loop {
        match store
            .record_heartbeat(instance.current(), clock.now())
            .await
        {
            Ok(()) => failing = false,
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(%error, "cannot record this instance's heartbeat; retrying");
            }
            Err(_) => {}
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(HEARTBEAT_EVERY) => {}
        }
    }
    if let Err(error) = store.forget_instance(&instance.beat.id).await {
        tracing::warn!(%error, "cannot delete this instance's heartbeat row");
    }
}
