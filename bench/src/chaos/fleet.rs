//! The `deferhook serve` processes under the soak's faults: each started on port 0
//! with the soak's flags ([`super::plan`]), its address read from its log, which is
//! `<log_dir>/instance-<i>.log` (every start appends, after a separator line; nothing
//! reaches the console). One instance may run with a skewed clock under libfaketime.
//!
//! Each instance's state sits behind its own mutex, never held across an await, so an
//! `Arc<Fleet>` is shared by the soak's tasks. Waits poll `try_wait` between short
//! sleeps. An instance that exits while nobody killed or stopped it with SIGTERM is
//! recorded as a crash ([`Fleet::crashed`]).
//!
//! The servers get `PR_SET_PDEATHSIG`: they die with the thread that started them,
//! which is a runtime's worker thread (alive as long as the runtime) unless a start is
//! called from a thread that ends sooner (`spawn_blocking`, `block_in_place`).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::plan;
use crate::clock::now_ms;
use crate::server::TOKEN;

/// The log line's field that carries the API address.
const MARKER: &str = "local_addr=";
/// Longest an instance may take to log its address.
const STARTUP: Duration = Duration::from_secs(30);
/// Longest an instance may take to exit after SIGTERM, beyond its shutdown grace.
const STOPPING_BEYOND_GRACE: Duration = Duration::from_secs(10);
/// How often waits look again.
const POLL: Duration = Duration::from_millis(20);
/// The servers' `RUST_LOG`: their start-up line and warnings.
const RUST_LOG: &str = "warn,deferhook::server=info";

/// What every instance runs with.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// The `deferhook` binary.
    pub binary: PathBuf,
    /// `--database-url`, the same for every instance.
    pub database_url: String,
    /// Where `instance-<i>.log` go (created when missing).
    pub log_dir: PathBuf,
    /// The instance run with a skewed clock and its `FAKETIME` offset in seconds
    /// (positive: ahead), as [`super::plan::Plan::skewed`].
    pub skewed: Option<(usize, i64)>,
    /// libfaketime's library ([`super::faketime::library`]); required when `skewed` is set.
    pub libfaketime: Option<PathBuf>,
    /// `--no-worker`: the API alone (the audit reads a store no worker changes).
    pub api_only: bool,
}

/// The running instances.
pub struct Fleet {
    config: FleetConfig,
    slots: Vec<Mutex<Slot>>,
    /// Every exit nobody asked for: (instance, description), in the order seen.
    crashes: Mutex<Vec<(usize, String)>>,
}

/// One instance's state.
#[derive(Default)]
struct Slot {
    /// The process, until it has exited and been reaped.
    child: Option<Child>,
    /// `http://addr`, once the current process logged it.
    base: Option<String>,
    /// SIGSTOP sent, no SIGCONT since.
    stopped: bool,
    /// SIGTERM sent (or a kill under way): its exit is expected, not a crash.
    terminating: bool,
    /// The last process's exit status, once reaped.
    exit: Option<ExitStatus>,
    /// How many times it was started.
    starts: u32,
}

impl Fleet {
    /// Starts `instances` servers one after the other (each waits for its address,
    /// 30 s at most). An error when one does not start (the ones started are killed),
    /// or when an instance is to be skewed without a libfaketime library.
    pub async fn start(config: FleetConfig, instances: usize) -> anyhow::Result<Arc<Fleet>> {
        if let Some((instance, _)) = config.skewed {
            anyhow::ensure!(
                instance < instances,
                "the skewed instance {instance} is not one of {instances}"
            );
            anyhow::ensure!(
                config.libfaketime.is_some(),
                "a skewed instance needs libfaketime (Debian: apt-get install faketime; or \
                 set DEFERHOOK_LIBFAKETIME to its path)"
            );
        }
        std::fs::create_dir_all(&config.log_dir)
            .with_context(|| format!("creating {}", config.log_dir.display()))?;
        let fleet = Arc::new(Fleet {
            config,
            slots: (0..instances).map(|_| Mutex::default()).collect(),
            crashes: Mutex::default(),
        });
        for i in 0..instances {
            fleet.restart(i).await?;
        }
        Ok(fleet)
    }

    /// How many instances there are (running or not).
    pub fn instances(&self) -> usize {
        self.slots.len()
    }

    /// `http://addr` of instance i while it runs and is not stopped or terminating;
    /// None otherwise (and for an i out of range).
    pub fn base(&self, i: usize) -> Option<String> {
        let mut slot = self.slot(i).ok()?;
        self.poll(i, &mut slot);
        let serving = slot.child.is_some() && !slot.stopped && !slot.terminating;
        serving.then(|| slot.base.clone()).flatten()
    }

    /// Every instance that `base` answers for, with its base.
    pub fn live(&self) -> Vec<(usize, String)> {
        (0..self.instances())
            .filter_map(|i| self.base(i).map(|base| (i, base)))
            .collect()
    }

    /// Instance i's process id while its process exists (stopped included).
    pub fn pid(&self, i: usize) -> Option<u32> {
        let mut slot = self.slot(i).ok()?;
        self.poll(i, &mut slot);
        slot.child.as_ref().map(Child::id)
    }

    /// SIGKILL and reap. An error when instance i is not running.
    pub fn kill(&self, i: usize) -> anyhow::Result<()> {
        let mut slot = self.running(i)?;
        slot.terminating = true;
        let mut child = slot
            .child
            .take()
            .context("a running instance has a child")?;
        child
            .kill()
            .with_context(|| format!("killing instance {i}"))?;
        slot.exit = Some(child.wait()?);
        slot.stopped = false;
        Ok(())
    }

    /// SIGSTOP: the process freezes (its connections stay open); `base` is None until
    /// [`Fleet::cont`]. An error when instance i is not running.
    pub fn stop(&self, i: usize) -> anyhow::Result<()> {
        let mut slot = self.running(i)?;
        signal(&slot, libc::SIGSTOP)?;
        slot.stopped = true;
        Ok(())
    }

    /// SIGCONT. An error when instance i is not running.
    pub fn cont(&self, i: usize) -> anyhow::Result<()> {
        let mut slot = self.running(i)?;
        signal(&slot, libc::SIGCONT)?;
        slot.stopped = false;
        Ok(())
    }

    /// SIGTERM (and SIGCONT, when stopped), then wait for the exit: at most the
    /// shutdown grace plus 10 s; beyond, SIGKILL and an error. Returns the exit status
    /// text (`exit status: 0`). An error when instance i is not running.
    pub async fn term(&self, i: usize) -> anyhow::Result<String> {
        {
            let mut slot = self.running(i)?;
            slot.terminating = true;
            signal(&slot, libc::SIGTERM)?;
            if slot.stopped {
                signal(&slot, libc::SIGCONT)?;
                slot.stopped = false;
            }
        }
        let limit = Duration::from_millis(plan::SHUTDOWN_GRACE_MS) + STOPPING_BEYOND_GRACE;
        let started = Instant::now();
        loop {
            tokio::time::sleep(POLL).await;
            let mut slot = self.slot(i)?;
            self.poll(i, &mut slot);
            if slot.child.is_none() {
                return Ok(slot
                    .exit
                    .map(|status| status.to_string())
                    .unwrap_or_default());
            }
            if started.elapsed() > limit {
                kill_and_reap(&mut slot);
                anyhow::bail!("instance {i} did not exit within {limit:?} of SIGTERM; killed");
            }
        }
    }

    /// Starts instance i again (skewed again if it is the skewed one), waits for its
    /// address. An error when it is still running, or when it exits or logs no
    /// address within 30 s (then it is killed; an exit counts as a crash too).
    pub async fn restart(&self, i: usize) -> anyhow::Result<()> {
        let (log, offset) = {
            let mut slot = self.slot(i)?;
            self.poll(i, &mut slot);
            anyhow::ensure!(slot.child.is_none(), "instance {i} is still running");
            slot.starts += 1;
            let (child, log, offset) = self.spawn(i, slot.starts)?;
            *slot = Slot {
                child: Some(child),
                starts: slot.starts,
                ..Slot::default()
            };
            (log, offset)
        };
        let started = Instant::now();
        let mut seen = String::new();
        loop {
            read_since(&log, offset, &mut seen)?;
            if let Some(address) = address(&seen) {
                let base = format!("http://{address}");
                self.slot(i)?.base = Some(base.clone());
                if let Some((_, seconds)) = self.config.skewed.filter(|&(at, _)| at == i) {
                    super::skew::verify(&base, seconds).await?;
                }
                return Ok(());
            }
            {
                let mut slot = self.slot(i)?;
                self.poll(i, &mut slot);
                if slot.child.is_none() {
                    anyhow::bail!(
                        "instance {i} exited at start ({}); its log ({}):\n{}",
                        describe(slot.exit),
                        log.display(),
                        tail(&seen)
                    );
                }
                if started.elapsed() > STARTUP {
                    slot.terminating = true;
                    kill_and_reap(&mut slot);
                    anyhow::bail!(
                        "instance {i} logged no address within {STARTUP:?}; killed. Its log \
                         ({}):\n{}",
                        log.display(),
                        tail(&seen)
                    );
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Everything back: SIGCONT to stopped instances, restart of exited or killed
    /// ones (an instance terminating right now is left to its `term`). Tries every
    /// instance; the error names each that did not come back.
    pub async fn heal(&self) -> anyhow::Result<()> {
        let mut failures = Vec::new();
        for i in 0..self.instances() {
            let exited = {
                let mut slot = self.slot(i)?;
                self.poll(i, &mut slot);
                if slot.child.is_some() && slot.stopped {
                    if let Err(error) = signal(&slot, libc::SIGCONT) {
                        failures.push(format!("instance {i}: {error:#}"));
                    }
                    slot.stopped = false;
                }
                slot.child.is_none()
            };
            if exited && let Err(error) = self.restart(i).await {
                failures.push(format!("{error:#}"));
            }
        }
        anyhow::ensure!(failures.is_empty(), "heal: {}", failures.join("; "));
        Ok(())
    }

    /// SIGCONT + SIGTERM to all, then wait for the exits (at most the shutdown grace
    /// plus 10 s; beyond, SIGKILL). An error names every instance that had to be
    /// killed or exited with a failure status.
    pub async fn shutdown(&self) -> anyhow::Result<()> {
        let mut waiting = Vec::new();
        for i in 0..self.instances() {
            let mut slot = self.slot(i)?;
            self.poll(i, &mut slot);
            if slot.child.is_some() {
                slot.terminating = true;
                let _ = signal(&slot, libc::SIGTERM);
                let _ = signal(&slot, libc::SIGCONT);
                slot.stopped = false;
                waiting.push(i);
            }
        }
        let limit = Duration::from_millis(plan::SHUTDOWN_GRACE_MS) + STOPPING_BEYOND_GRACE;
        let started = Instant::now();
        let mut failures = Vec::new();
        while !waiting.is_empty() {
            let overdue = started.elapsed() > limit;
            let mut still = Vec::new();
            for i in waiting {
                let mut slot = self.slot(i)?;
                self.poll(i, &mut slot);
                if slot.child.is_none() {
                    if !slot.exit.is_some_and(|status| status.success()) {
                        failures.push(format!("instance {i}: {}", describe(slot.exit)));
                    }
                } else if overdue {
                    kill_and_reap(&mut slot);
                    failures.push(format!("instance {i}: no exit within {limit:?}; killed"));
                } else {
                    still.push(i);
                }
            }
            waiting = still;
            if !waiting.is_empty() {
                tokio::time::sleep(POLL).await;
            }
        }
        anyhow::ensure!(failures.is_empty(), "shutdown: {}", failures.join("; "));
        Ok(())
    }

    /// Every time an instance exited by itself (crashed: an exit that no `kill`,
    /// `term` or `shutdown` asked for, at start included), as (instance, its exit
    /// status and log file), in the order seen, over the fleet's whole life, so a
    /// crash stays reported after `heal` restarted the instance. The soak reports
    /// each as a violation.
    pub fn crashed(&self) -> Vec<(usize, String)> {
        for i in 0..self.instances() {
            if let Ok(mut slot) = self.slot(i) {
                self.poll(i, &mut slot);
            }
        }
        lock(&self.crashes).clone()
    }

    /// The log file of instance i.
    pub fn log_file(&self, i: usize) -> PathBuf {
        self.config.log_dir.join(format!("instance-{i}.log"))
    }

    fn slot(&self, i: usize) -> anyhow::Result<MutexGuard<'_, Slot>> {
        let slot = self
            .slots
            .get(i)
            .with_context(|| format!("no instance {i} of {}", self.instances()))?;
        Ok(lock(slot))
    }

    /// Instance i's slot, reaped, when its process is running.
    fn running(&self, i: usize) -> anyhow::Result<MutexGuard<'_, Slot>> {
        let mut slot = self.slot(i)?;
        self.poll(i, &mut slot);
        anyhow::ensure!(slot.child.is_some(), "instance {i} is not running");
        Ok(slot)
    }

    /// Reaps instance i's process if it has exited; an exit nobody asked for is a crash.
    fn poll(&self, i: usize, slot: &mut Slot) {
        let Some(child) = slot.child.as_mut() else {
            return;
        };
        let Ok(Some(status)) = child.try_wait() else {
            return;
        };
        slot.child = None;
        slot.base = None;
        slot.stopped = false;
        slot.exit = Some(status);
        if !slot.terminating {
            let what = format!(
                "exited by itself ({status}) at {} ms, start {}; log {}",
                now_ms(),
                slot.starts,
                self.log_file(i).display()
            );
            lock(&self.crashes).push((i, what));
        }
    }

    /// Starts instance i's process (start number `start`) with its stderr appended to
    /// its log after a separator; returns it, the log's path and where this start's
    /// lines begin.
    fn spawn(&self, i: usize, start: u32) -> anyhow::Result<(Child, PathBuf, u64)> {
        let path = self.log_file(i);
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let skew = self.config.skewed.filter(|&(instance, _)| instance == i);
        let skew_note = skew
            .map(|(_, s)| format!(", FAKETIME={s:+}s"))
            .unwrap_or_default();
        writeln!(
            log,
            "===== instance {i}, start {start}, at {} ms{skew_note} =====",
            now_ms()
        )?;
        let offset = log.metadata()?.len();
        let mut command = Command::new(&self.config.binary);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
            .arg(&self.config.database_url)
            .args(["--api-token", TOKEN, "--allow-private-targets"]);
        for (flag, ms) in [
            ("--lease-ms", plan::LEASE_MS),
            ("--attempt-timeout-ms", plan::ATTEMPT_TIMEOUT_MS),
            ("--shutdown-grace-ms", plan::SHUTDOWN_GRACE_MS),
            ("--backoff-base-ms", plan::BACKOFF_BASE_MS),
            ("--backoff-max-ms", plan::BACKOFF_MAX_MS),
            ("--circuit-max-cooldown-ms", plan::CIRCUIT_MAX_COOLDOWN_MS),
        ] {
            command.arg(flag).arg(ms.to_string());
        }
        if self.config.api_only {
            command.arg("--no-worker");
        }
        command
            .env("RUST_LOG", RUST_LOG)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        if let Some((_, seconds)) = skew {
            let library = self
                .config
                .libfaketime
                .as_ref()
                .context("a skewed instance needs libfaketime")?;
            command
                .env("LD_PRELOAD", library)
                .env("FAKETIME", format!("{seconds:+}s"));
        }
        // SAFETY: `prctl` is async-signal-safe; it only sets a flag of the child.
        unsafe {
            use std::os::unix::process::CommandExt;
            // The server dies with the soak (killed, or Ctrl-C'd), never left behind
            // on the throwaway database.
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.config.binary.display()))?;
        Ok((child, path, offset))
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            let slot = slot.get_mut().unwrap_or_else(PoisonError::into_inner);
            if let Some(mut child) = slot.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// SIGKILL to the slot's process, if any, and its exit status recorded.
fn kill_and_reap(slot: &mut Slot) {
    if let Some(mut child) = slot.child.take() {
        let _ = child.kill();
        slot.exit = child.wait().ok();
    }
    slot.base = None;
    slot.stopped = false;
}

/// An exit status as text (`exit status: 0`, `signal: 9 (SIGKILL)`).
fn describe(exit: Option<ExitStatus>) -> String {
    exit.map_or_else(|| "no exit status".to_owned(), |status| status.to_string())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sends `signal` to the slot's process.
fn signal(slot: &Slot, signal: libc::c_int) -> anyhow::Result<()> {
    let child = slot.child.as_ref().context("the instance is not running")?;
    // SAFETY: `kill` with a valid signal number on our own, not yet reaped, child.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    anyhow::ensure!(
        sent == 0,
        "signal {signal} to {}: {}",
        child.id(),
        std::io::Error::last_os_error()
    );
    Ok(())
}

/// Appends to `seen` what `path` holds from `offset + seen.len()` on.
fn read_since(path: &PathBuf, offset: u64, seen: &mut String) -> anyhow::Result<()> {
    let mut file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    file.seek(SeekFrom::Start(offset + seen.len() as u64))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    seen.push_str(&String::from_utf8_lossy(&bytes));
    Ok(())
}

/// The address in the first complete line of `log` that carries [`MARKER`].
fn address(log: &str) -> Option<String> {
    let complete = &log[..log.rfind('\n')? + 1];
    complete.lines().find_map(|line| {
        let rest = &line[line.find(MARKER)? + MARKER.len()..];
        let address = rest.split_whitespace().next()?.trim_matches('"');
        (!address.is_empty()).then(|| address.to_owned())
    })
}

/// The last lines of a log, for an error.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `target/debug/deferhook` next to this test's `deps` directory, or `None` (said
    /// in one line) where it was not built; under `CI=true` its absence fails.
    fn binary_or_skip() -> Option<PathBuf> {
        let me = std::env::current_exe().unwrap();
        let binary = me.parent()?.parent()?.join("deferhook");
        if binary.is_file() {
            return Some(binary);
        }
        let message = format!(
            "{} is missing (cargo build --bin deferhook)",
            binary.display()
        );
        assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{message}");
        eprintln!("skipping the fleet test: {message}");
        None
    }

    async fn healthz(base: &str) -> u16 {
        reqwest::Client::new()
            .get(format!("{base}/healthz"))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map(|response| response.status().as_u16())
            .unwrap_or(0)
    }

    #[test]
    fn the_address_is_read_from_a_complete_line() {
        let line = "2026-12-01T21:00:00Z  INFO deferhook::server: deferhook listening \
                    local_addr=127.0.0.1:40123\n";
        assert_eq!(address(line).as_deref(), Some("127.0.0.1:40123"));
        assert_eq!(address(line.trim_end()), None);
        assert_eq!(
            address("local_addr=\"127.0.0.1:1\" x\n").as_deref(),
            Some("127.0.0.1:1")
        );
        assert_eq!(address("nothing here\n"), None);
    }

    #[tokio::test]
    async fn a_skewed_instance_needs_the_library() {
        let config = FleetConfig {
            binary: PathBuf::from("/nonexistent/deferhook"),
            database_url: "postgres://127.0.0.1:1/none".into(),
            log_dir: std::env::temp_dir(),
            skewed: Some((1, 60)),
            libfaketime: None,
            api_only: false,
        };
        let error = Fleet::start(config, 2).await.err().unwrap();
        assert!(format!("{error:#}").contains("libfaketime"), "{error:#}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_instance_is_killed_stopped_terminated_and_restarted() {
        let Some(binary) = binary_or_skip() else {
            return;
        };
        let Some(cluster) = super::super::cluster::cluster_or_skip("the fleet test") else {
            return;
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let logs = tempfile::tempdir().unwrap();
        let config = FleetConfig {
            binary,
            database_url: cluster.database("fleet_test").await.unwrap(),
            log_dir: logs.path().join("logs"),
            skewed: None,
            libfaketime: None,
            api_only: false,
        };
        let fleet = Fleet::start(config, 1).await.unwrap();
        assert_eq!(fleet.instances(), 1);
        let base = fleet.base(0).unwrap();
        assert_eq!(fleet.live(), vec![(0, base.clone())]);
        assert_eq!(healthz(&base).await, 200);
        let first = fleet.pid(0).unwrap();

        fleet.stop(0).unwrap();
        assert_eq!(fleet.base(0), None);
        assert!(fleet.live().is_empty());
        assert_eq!(fleet.pid(0), Some(first));
        fleet.cont(0).unwrap();
        assert_eq!(healthz(&fleet.base(0).unwrap()).await, 200);

        fleet.kill(0).unwrap();
        assert_eq!((fleet.base(0), fleet.pid(0)), (None, None));
        assert!(fleet.kill(0).is_err());
        fleet.restart(0).await.unwrap();
        let second = fleet.pid(0).unwrap();
        assert_ne!(second, first);
        assert_eq!(healthz(&fleet.base(0).unwrap()).await, 200);

        // A stopped instance still terminates: SIGCONT follows the SIGTERM.
        fleet.stop(0).unwrap();
        assert_eq!(fleet.term(0).await.unwrap(), "exit status: 0");
        assert_eq!(fleet.base(0), None);
        assert!(fleet.crashed().is_empty());

        // An exit nobody asked for is a crash, and stays reported after heal.
        fleet.heal().await.unwrap();
        let third = fleet.pid(0).unwrap();
        // SAFETY: `kill` on the instance's pid, our child, not yet reaped.
        unsafe { libc::kill(third as libc::pid_t, libc::SIGKILL) };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let crashes = fleet.crashed();
        assert_eq!(crashes.len(), 1, "{crashes:?}");
        assert_eq!(crashes[0].0, 0);
        assert!(crashes[0].1.contains("signal: 9"), "{crashes:?}");
        fleet.heal().await.unwrap();
        assert_eq!(healthz(&fleet.base(0).unwrap()).await, 200);
        assert_eq!(fleet.crashed().len(), 1);

        fleet.shutdown().await.unwrap();
        assert_eq!(fleet.base(0), None);
        assert!(fleet.crashed().len() == 1);
        let log = std::fs::read_to_string(fleet.log_file(0)).unwrap();
        assert_eq!(log.matches("===== instance 0, start").count(), 4, "{log}");
        assert_eq!(log.matches(MARKER).count(), 4, "{log}");
    }
}
