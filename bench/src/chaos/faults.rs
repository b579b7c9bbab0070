//! The fault injector: applies the plan's faults one after the other at their times,
//! and records each as a [`FaultWindow`] from its start to the moment it was healed.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::super::clock::now_ms;
use super::cluster::Cluster;
use super::fleet::Fleet;
use super::history::{FaultKind, FaultWindow};
use super::plan::{Plan, PlannedFault};
use super::receiver::Receivers;

/// What the faults act on.
pub struct Targets {
    pub fleet: Arc<Fleet>,
    /// The private PostgreSQL cluster (PostgreSQL runs only).
    pub cluster: Option<Arc<Cluster>>,
    pub receivers: Arc<Receivers>,
}

/// Applies `plan.faults` counted from `load_started`, until they are all done or `stop`
/// is cancelled (a fault under way is still healed). Each fault is printed as it starts.
/// An error means a fault could not be applied or healed (the soak cannot go on
/// meaningfully); the windows recorded so far come with it.
pub async fn inject(
    plan: &Plan,
    load_started: Instant,
    targets: &Targets,
    stop: &CancellationToken,
) -> (Vec<FaultWindow>, anyhow::Result<()>) {
    let mut windows = Vec::new();
    for fault in &plan.faults {
        tokio::select! {
            () = tokio::time::sleep_until((load_started + fault.at).into()) => {}
            () = stop.cancelled() => break,
        }
        let hit = fault.instance.map(|i| {
            let pid = targets.fleet.pid(i).map(|pid| format!(" (pid {pid})"));
            format!(" instance {i}{}", pid.unwrap_or_default())
        });
        println!(
            "chaos: {:>7.1} s  {}{}",
            load_started.elapsed().as_secs_f64(),
            fault.kind.name(),
            hit.unwrap_or_default()
        );
        match apply(fault, targets).await {
            Ok(window) => windows.push(window),
            Err(error) => {
                return (
                    windows,
                    Err(error.context(format!("applying {}", fault.kind.name()))),
                );
            }
        }
    }
    (windows, Ok(()))
}

/// One fault, from its start to its healing.
async fn apply(fault: &PlannedFault, targets: &Targets) -> anyhow::Result<FaultWindow> {
    let pid = fault.instance.and_then(|i| targets.fleet.pid(i));
    let start_ms = now_ms();
    let instance = || fault.instance.context("a process fault names its instance");
    match fault.kind {
        FaultKind::Kill => {
            let i = instance()?;
            targets.fleet.kill(i)?;
            tokio::time::sleep(fault.length).await;
            targets.fleet.restart(i).await?;
        }
        FaultKind::Stop => {
            let i = instance()?;
            targets.fleet.stop(i)?;
            tokio::time::sleep(fault.length).await;
            targets.fleet.cont(i)?;
        }
        FaultKind::Term => {
            let i = instance()?;
            let status = targets.fleet.term(i).await?;
            if !status.contains("exit status: 0") {
                anyhow::bail!("instance {i} exited with {status} after SIGTERM");
            }
            targets.fleet.restart(i).await?;
        }
        FaultKind::PostgresRestart => {
            let cluster = targets
                .cluster
                .clone()
                .context("a PostgreSQL restart needs the private cluster")?;
            let stopping = cluster.clone();
            tokio::task::spawn_blocking(move || stopping.stop()).await??;
            tokio::time::sleep(fault.length).await;
            tokio::task::spawn_blocking(move || cluster.start()).await??;
        }
        FaultKind::ReceiverDown => {
            targets.receivers.go_down().await;
            tokio::time::sleep(fault.length).await;
            targets.receivers.come_up().await?;
        }
        FaultKind::Skewed => {
            anyhow::bail!("a skewed clock is a start-up setting, not a timed fault")
        }
    }
    Ok(FaultWindow {
        kind: fault.kind,
        instance: fault.instance,
        pid,
        start_ms,
        end_ms: now_ms(),
    })
}
