//! The chaos soak (issue #17): load and seeded faults against real `deferhook`
//! processes for `--minutes`, then every job audited against the receivers' record
//! and the producer's (BENCHMARKS.md, "Reliability").
//!
//! A run: print the plan and its seed; start the database (a SQLite file, or a private
//! PostgreSQL cluster that the faults may restart), the receivers (one listener per
//! [`history::ReceiverKind`]) and the instances (one on SQLite; on PostgreSQL the last
//! of two or more runs with a skewed clock); register the subscribers; drive the load
//! while the faults are injected one at a time; heal everything, stop the load and
//! let the jobs drain (every deadline passes within [`DRAIN`]); read the store through
//! the API; audit. Exits non-zero on any violation, naming the job and its history.

mod audit;
mod audit_checks;
mod cluster;
mod faketime;
mod faults;
mod fleet;
mod history;
mod load;
mod load_jobs;
mod load_ops;
mod load_schedule;
mod load_send;
mod plan;
mod receiver;
mod settle;
mod skew;
mod stalls;
mod store_view;
mod verdict;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::args::{Args, Backend};
use super::clock::now_ms;
use history::{FaultKind, FaultWindow, History};
use plan::Plan;
use store_view::StoreView;

/// How often the run prints its progress.
const PROGRESS: Duration = Duration::from_secs(30);

/// Runs the soak; an error (exit code 1) on any violation.
pub async fn run(args: &Args) -> anyhow::Result<()> {
    let seed = args.seed.unwrap_or_else(|| now_ms() as u64 % 1_000_000);
    let postgres = args.backend == Backend::Postgres;
    let load_for = Duration::from_secs(args.minutes * 60);
    let mut plan = Plan::new(seed, load_for, args.instances as usize, postgres);
    let libfaketime = match plan.skewed {
        Some(_) => {
            let found = faketime::library();
            if let (None, Some(named)) = (&found, std::env::var_os("DEFERHOOK_LIBFAKETIME")) {
                anyhow::bail!(
                    "DEFERHOOK_LIBFAKETIME names {}, which is not a file",
                    PathBuf::from(named).display()
                );
            }
            if found.is_none() {
                if std::env::var("CI").is_ok_and(|v| v == "true") {
                    anyhow::bail!(
                        "libfaketime is not installed (Debian: apt-get install faketime), and \
                         CI=true needs the skewed-clock fault"
                    );
                }
                println!("chaos: libfaketime is not installed; no instance runs skewed");
                plan.skewed = None;
            }
            found
        }
        None => None,
    };
    print!("{plan}");
    let missing: Vec<&str> = plan
        .applicable()
        .into_iter()
        .filter(|&kind| kind != FaultKind::Skewed && !plan.faults.iter().any(|f| f.kind == kind))
        .map(FaultKind::name)
        .collect();
    if !missing.is_empty() {
        println!(
            "chaos: the run is too short for every kind of fault (two minutes are enough); \
             none of: {}",
            missing.join(", ")
        );
    }
    println!(
        "replay this run: deferhook-bench --scenario chaos --minutes {} --backend {} \
         --instances {} --chaos-rate {} --seed {seed}",
        args.minutes,
        if postgres { "postgres" } else { "sqlite" },
        args.instances,
        args.chaos_rate
    );
    let log_dir = std::env::temp_dir().join(format!(
        "deferhook-chaos-{}-{}",
        std::process::id(),
        now_ms()
    ));
    std::fs::create_dir_all(&log_dir)?;
    println!(
        "chaos: server logs in {} (removed after a passing run, kept otherwise)",
        log_dir.display()
    );
    // Ctrl-C or SIGTERM ends the run through the destructors: the instances are
    // killed, the private cluster is stopped and its directory removed.
    let outcome = tokio::select! {
        outcome = soak(args, &plan, &log_dir, libfaketime) => outcome,
        signal = interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
    };
    match &outcome {
        Ok(verdict) if verdict.passed() => {
            let _ = std::fs::remove_dir_all(&log_dir);
        }
        _ => println!("chaos: logs kept in {}", log_dir.display()),
    }
    let verdict = outcome?;
    verdict.print();
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "scenario": "chaos",
            "seed": plan.seed,
            "minutes": args.minutes,
            "backend": if postgres { "postgres" } else { "sqlite" },
            "instances": plan.instances,
            "chaos_rate": args.chaos_rate,
            "verdict": verdict.json(),
        });
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)?;
        println!("JSON written to {}", path.display());
    }
    if !verdict.passed() {
        anyhow::bail!(
            "the chaos soak found {} violation(s); replay with --seed {}",
            verdict.violations.len(),
            plan.seed
        );
    }
    Ok(())
}

/// Resolves on Ctrl-C (`SIGINT`) or `SIGTERM`, naming it.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return "SIGINT";
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// Everything between the plan and the verdict.
async fn soak(
    args: &Args,
    plan: &Plan,
    log_dir: &Path,
    libfaketime: Option<PathBuf>,
) -> anyhow::Result<verdict::Verdict> {
    let binary = super::server::binary(&args.server_binary)?;
    let cluster = if plan.postgres {
        let cluster = tokio::task::spawn_blocking(cluster::Cluster::create).await??;
        Some(Arc::new(cluster))
    } else {
        None
    };
    let database_url = match &cluster {
        Some(cluster) => cluster.database("deferhook_chaos").await?,
        None => format!("sqlite://{}", log_dir.join("chaos.db").display()),
    };
    let receivers = receiver::Receivers::start(plan.seed).await?;
    let fleet = fleet::Fleet::start(
        fleet::FleetConfig {
            binary,
            database_url: database_url.clone(),
            log_dir: log_dir.to_path_buf(),
            skewed: plan.skewed,
            libfaketime,
            api_only: false,
        },
        plan.instances,
    )
    .await?;
    let subscribers = plan::subscribers();
    let urls: Vec<(String, String)> = subscribers
        .iter()
        .map(|(id, kind)| (id.clone(), receivers.url(*kind, id)))
        .collect();
    let first = fleet.base(0).context("instance 0 is not running")?;
    load::register(&first, &urls).await?;

    let stop = CancellationToken::new();
    let watching = CancellationToken::new();
    let stalls = stalls::Stalls::watch(watching.clone());
    let load_started = Instant::now();
    let load_started_ms = now_ms();
    let live = fleet.clone();
    let targets: load::Targets = Arc::new(move || live.live());
    let driver = tokio::spawn(load::drive(
        targets,
        subscribers.clone(),
        plan.seed,
        args.chaos_rate,
        stop.clone(),
    ));
    let fault_targets = faults::Targets {
        fleet: fleet.clone(),
        cluster: cluster.clone(),
        receivers: receivers.clone(),
    };
    let injected = {
        let plan = plan.clone();
        let stop = stop.clone();
        tokio::spawn(
            async move { faults::inject(&plan, load_started, &fault_targets, &stop).await },
        )
    };
    let mut progress = tokio::time::interval(PROGRESS);
    progress.tick().await;
    let load_ends = tokio::time::sleep(Duration::from_secs(args.minutes * 60));
    tokio::pin!(load_ends);
    loop {
        tokio::select! {
            () = &mut load_ends => break,
            _ = progress.tick() => println!(
                "chaos: {:>5.0} s  {} requests received, {} instance(s) live",
                load_started.elapsed().as_secs_f64(),
                receivers.count(),
                fleet.live().len()
            ),
        }
    }
    stop.cancel();
    let (mut windows, injected) = injected.await?;
    let ops = driver.await?;
    let load_ended_ms = now_ms();
    injected?;
    // Heal whatever a fault left (none should be under way: they run one at a time).
    if let Some(cluster) = &cluster
        && !cluster.is_up()
    {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || cluster.start()).await??;
    }
    receivers.come_up().await?;
    fleet.heal().await?;
    if let Some((instance, _)) = plan.skewed {
        windows.push(FaultWindow {
            kind: FaultKind::Skewed,
            instance: Some(instance),
            pid: None,
            start_ms: load_started_ms,
            end_ms: load_ended_ms,
        });
    }
    println!(
        "chaos: load stopped after {:.0} s ({} operations); draining",
        load_started.elapsed().as_secs_f64(),
        ops.len()
    );
    settle::cancel_replays(&fleet).await?;
    let settled = settle::drain(&fleet).await?;
    // Every job terminal: the workers' gauges must equal the listing read below.
    let worker_gauges = if settled {
        store_view::gauges(&fleet.live()).await?
    } else {
        Vec::new()
    };
    // The store is read with no worker left to change it: the instances stop (SIGTERM,
    // their attempts finish or are released) and one API-only instance answers.
    let crashed = fleet.crashed();
    let stopped = fleet.shutdown().await;
    let workers_stopped_ms = now_ms();
    let reader = fleet::Fleet::start(
        fleet::FleetConfig {
            binary: super::server::binary(&args.server_binary)?,
            database_url,
            log_dir: log_dir.join("reader"),
            skewed: None,
            libfaketime: None,
            api_only: true,
        },
        1,
    )
    .await?;
    let mut view = store_view::read(&reader.live()).await?;
    view.gauges.extend(worker_gauges);
    reader.shutdown().await?;
    let history = History {
        requests: receivers.requests(),
        ops,
        faults: windows,
        load_started_ms,
        load_ended_ms,
    };
    let settings = audit::AuditSettings {
        tolerance_ms: TOLERANCE_MS,
        overlap_ms: OVERLAP_MS,
        workers_stopped_ms,
        claim_slack_ms: CLAIM_SLACK_MS,
        after_stop_ms: AFTER_STOP_MS,
        after_db_ms: AFTER_DB_MS,
        quiet_after_fault_ms: QUIET_AFTER_FAULT_MS,
        kind_of,
    };
    watching.cancel();
    let paused = stalls.seen();
    match paused.iter().max_by_key(|(_, late)| *late) {
        Some(&(at, longest)) => println!(
            "chaos: this process (the receivers' and the producer's) paused {} time(s) for \
             200 ms or more; the longest {longest} ms, ending {:.1} s into the load",
            paused.len(),
            (at - load_started_ms) as f64 / 1000.0
        ),
        None => println!("chaos: this process never paused for 200 ms or more"),
    }
    let mut verdict = audit::audit(&history, &view, &settings);
    for (instance, status) in crashed {
        verdict.process_failure(format!("instance {instance} exited by itself: {status}"));
    }
    if let Err(error) = stopped {
        verdict.process_failure(format!("stopping the instances at the end: {error:#}"));
    }
    for (file, lines) in deadlocks(log_dir) {
        verdict.process_failure(format!(
            "{file} logged {lines} deadlock(s) (40P01): the store's lock order was broken"
        ));
    }
    if !verdict.passed() {
        keep_record(log_dir, &history, &view);
    }
    Ok(verdict)
}

/// The instance logs in `log_dir` that mention a database deadlock, with how many
/// lines do: writers that take row locks in the store's one order never deadlock
/// (docs/DESIGN.md §3, lock order), so a deadlock retried in silence is still a fault.
fn deadlocks(log_dir: &Path) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(log_dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".log") {
            continue;
        }
        let text = std::fs::read(entry.path()).unwrap_or_default();
        let lines = String::from_utf8_lossy(&text)
            .lines()
            .filter(|line| line.contains("deadlock detected"))
            .count();
        if lines > 0 {
            found.push((name, lines));
        }
    }
    found.sort();
    found
}

/// Writes the whole record of a failed run beside its logs, as `history.json`: every
/// request the receivers saw, every producer operation, every fault window, and the
/// store as read at the end (jobs, attempts, gauges).
fn keep_record(log_dir: &Path, history: &History, view: &StoreView) {
    let path = log_dir.join("history.json");
    let record = serde_json::json!({ "history": history, "store": view });
    match serde_json::to_vec(&record).map(|bytes| std::fs::write(&path, bytes)) {
        Ok(Ok(())) => println!("chaos: the whole record is in {}", path.display()),
        Ok(Err(error)) => println!("chaos: could not write {}: {error}", path.display()),
        Err(error) => println!("chaos: could not encode the record: {error}"),
    }
}

/// Slack between a server's clock read and a receiver's on one busy machine, in ms.
const TOLERANCE_MS: i64 = 250;
/// How long two requests of one job may seem open at once, in ms (the receiver's
/// notice of a close; the least backoff is 125 ms).
const OVERLAP_MS: i64 = 50;
/// How long a due job may wait for a claim while workers run, in ms: the 1 s poll
/// fallback and a claim on a busy machine.
const CLAIM_SLACK_MS: i64 = 2_000;
/// How long after SIGCONT a stopped process's request may still arrive, in ms.
const AFTER_STOP_MS: i64 = 2_000;
/// How long after a PostgreSQL restart a 503 is still expected, in ms: the pool's
/// acquire timeout (5 s) and its reconnection.
const AFTER_DB_MS: i64 = 10_000;
/// How long after a fault a due job may wait without an attempt (ms): the longest
/// circuit cooldown (a destination that failed during the fault) plus a claim.
const QUIET_AFTER_FAULT_MS: i64 = plan::CIRCUIT_MAX_COOLDOWN_MS as i64 + CLAIM_SLACK_MS;

/// The receiver kind of a subscriber id (`fast-0` is `Fast`).
fn kind_of(subscriber: &str) -> Option<history::ReceiverKind> {
    let name = subscriber.split('-').next()?;
    history::ReceiverKind::ALL
        .into_iter()
        .find(|kind| kind.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subscriber_has_its_kind() {
        for (id, kind) in plan::subscribers() {
            assert_eq!(kind_of(&id), Some(kind));
        }
        assert_eq!(kind_of("nobody-1"), None);
    }
}
