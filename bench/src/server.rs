//! The `deferhook serve` processes under test: started on port 0 with an API token and
//! `--allow-private-targets` (the receiver is on 127.0.0.1), their address read from the
//! log, their peak RSS and CPU time read from `/proc` before SIGTERM stops them.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// The bearer token the benchmark's servers accept.
pub const TOKEN: &str = "deferhook-bench-token-0123456789";
/// The log line's field that carries the API address.
const MARKER: &str = "local_addr=";
/// Longest a server may take to log its address.
const STARTUP: Duration = Duration::from_secs(30);
/// Longest a server may take to exit after SIGTERM before it is killed.
const STOPPING: Duration = Duration::from_secs(15);

/// One running server.
pub struct Server {
    child: Child,
    /// `http://addr` of its API.
    pub base: String,
}

/// What `/proc` said about a server just before it was stopped.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Peak resident set size (`VmHWM`), in KiB.
    pub peak_rss_kib: u64,
    /// User plus system CPU time, in seconds.
    pub cpu_seconds: f64,
}

/// The binary to run: `--server-binary`, or `deferhook` next to this executable.
pub fn binary(flag: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(path) = flag {
        return Ok(path.clone());
    }
    let me = std::env::current_exe()?;
    let dir = me.parent().context("the executable has no directory")?;
    Ok(dir.join("deferhook"))
}

/// The server's `RUST_LOG`: its start-up line only, plus any directives in
/// `DEFERHOOK_BENCH_SERVER_LOG`.
fn server_log() -> String {
    let base = "warn,deferhook::server=info";
    match std::env::var("DEFERHOOK_BENCH_SERVER_LOG") {
        Ok(extra) if !extra.trim().is_empty() => format!("{base},{extra}"),
        _ => base.to_owned(),
    }
}

impl Server {
    /// Starts `binary serve` on `database_url` with the extra `flags` and waits for its
    /// API address.
    pub fn start(binary: &PathBuf, database_url: &str, flags: &[String]) -> anyhow::Result<Self> {
        let mut command = Command::new(binary);
        // SAFETY: `prctl` is async-signal-safe; it only sets a flag of the child.
        unsafe {
            use std::os::unix::process::CommandExt;
            // The server dies with the bench (killed, or Ctrl-C'd), never left behind
            // on a throwaway database.
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command
            .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
            .arg(database_url)
            .args(["--api-token", TOKEN, "--allow-private-targets"])
            .args(flags)
            // Only the startup line: a log line per request would cost what is measured.
            // DEFERHOOK_BENCH_SERVER_LOG adds directives, for profiling (e.g.
            // `sqlx::query=debug` logs each statement with its time).
            .env("RUST_LOG", server_log())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stderr = child.stderr.take().context("stderr is piped")?;
        let (found, address) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if sent {
                    eprintln!("server: {line}");
                } else if let Some(at) = line.find(MARKER) {
                    let rest = &line[at + MARKER.len()..];
                    let addr = rest.split_whitespace().next().unwrap_or_default();
                    let _ = found.send(addr.trim_matches('"').to_owned());
                    sent = true;
                }
            }
        });
        match address.recv_timeout(STARTUP) {
            Ok(addr) => Ok(Server {
                child,
                base: format!("http://{addr}"),
            }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!("{} did not log its address", binary.display())
            }
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the server's usage from `/proc`, then stops it with SIGTERM.
    pub fn stop(mut self) -> anyhow::Result<Usage> {
        let pid = self.child.id();
        let usage = usage(pid)?;
        // SAFETY: `kill` with a valid signal number on our own child's pid.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        let stopping = Instant::now();
        while self.child.try_wait()?.is_none() {
            if stopping.elapsed() > STOPPING {
                self.child.kill()?;
                self.child.wait()?;
                anyhow::bail!("the server did not stop within {STOPPING:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(usage)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `VmRSS` of process `pid` now, in KiB (from `/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .context("no VmRSS in /proc/<pid>/status")
}

/// `VmHWM` from `/proc/<pid>/status`; `utime + stime` from `/proc/<pid>/stat` divided
/// by `sysconf(_SC_CLK_TCK)`.
fn usage(pid: u32) -> anyhow::Result<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let peak_rss_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .context("no VmHWM in /proc/<pid>/status")?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces;
    // utime and stime are fields 14 and 15 of the whole line.
    let after = stat
        .rsplit_once(')')
        .context("malformed /proc/<pid>/stat")?
        .1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |n: usize| -> anyhow::Result<u64> {
        Ok(fields.get(n).context("short /proc/<pid>/stat")?.parse()?)
    };
    let total = ticks(11)? + ticks(12)?;
    Ok(Usage {
        peak_rss_kib,
        cpu_seconds: total as f64 / clock_ticks_per_second(),
    })
}

/// The unit of `/proc/<pid>/stat`'s CPU times: `sysconf(_SC_CLK_TCK)` (100 when unknown).
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if per_second > 0 {
        per_second as f64
    } else {
        100.0
    }
}
