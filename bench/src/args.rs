//! The benchmark's flags.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// deferhook-bench: load a real deferhook process and measure it.
#[derive(Debug, Parser)]
#[command(name = "deferhook-bench")]
pub struct Args {
    /// What load to apply.
    #[arg(long, value_enum, default_value_t = Scenario::Burst)]
    pub scenario: Scenario,
    /// Which database the server uses (a fresh one per run).
    #[arg(long, value_enum, default_value_t = Backend::Sqlite)]
    pub backend: Backend,
    /// Servers sharing the database (PostgreSQL only); the load is spread over them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub instances: u32,
    /// Jobs to create (`burst`, `backlog`), or subscribers of each event (`fanout`,
    /// `incident`).
    #[arg(long)]
    pub jobs: Option<u64>,
    /// `burst`, `steady`, `backlog`: subscribers the jobs are spread over (job n goes
    /// to subscriber n mod N), each with the API's largest `max_in_flight`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub subscribers: u64,
    /// `burst`, `steady`, `backlog`: receiver ports the subscribers are spread over,
    /// round-robin; each port is a destination of its own [default: the subscribers,
    /// at most 10].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    pub destinations: Option<u64>,
    /// Jobs per second (`steady`).
    #[arg(long, default_value_t = 1_000)]
    pub rate: u64,
    /// How long the load lasts, in seconds (`steady`).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// API requests in flight at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: u64,
    /// Subscribers of the `fanout`, `incident` or `on-call` event that answer slowly.
    #[arg(long, default_value_t = 300)]
    pub slow: u64,
    /// Subscribers of the `on-call` events that answer 500 until they recover.
    #[arg(long, default_value_t = 100)]
    pub failing: u64,
    /// Subscribers of the `on-call` events that answer 410 Gone.
    #[arg(long, default_value_t = 50)]
    pub gone: u64,
    /// `console`: the events fanned out to every subscriber (`--jobs` of them).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub events: u64,
    /// `on-call`: the replay's rate, in jobs per second.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub replay_rate: u64,
    /// `on-call`: once the incident has developed, print how to reach the server and
    /// wait this many seconds (or until Ctrl-C) before asking the questions, so a person
    /// can walk the incident with the CLI.
    #[arg(long, default_value_t = 0)]
    pub hold_seconds: u64,
    /// `fanout`: the event's payload is a JSON object of this many bytes (C-21: 262000)
    /// instead of a small one; the run then reports the store's and the server's growth
    /// and whether every delivery carried the payload's exact bytes.
    #[arg(long, default_value_t = 0)]
    pub payload_bytes: u64,
    /// How long a slow subscriber takes to answer, in milliseconds [default: 2000;
    /// 8000 for `incident`; 12000 for `on-call`, beyond the attempt timeout].
    #[arg(long)]
    pub slow_ms: Option<u64>,
    /// `incident`: issue #33's shape instead of #14's: every group on one `host:port`,
    /// told apart by path (`--slow` time out, `--failing` answer 500, `--gone` answer
    /// 410, the rest answer 200), three fan-outs, the servers' attempt timeout 5 s; its
    /// control answers 200 on every path.
    #[arg(long)]
    pub shared_host: bool,
    /// The jobs' time to live, in milliseconds [default: `incident` 30 s (issue #14's
    /// shape) or 90 s (`--shared-host`); otherwise the server's default].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ttl_ms: Option<u64>,
    /// The servers' `--attempt-timeout-ms` [default: 5 s with `--shared-host`;
    /// otherwise the server's default].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub attempt_timeout_ms: Option<u64>,
    /// Longest wait for every job to arrive (`incident`: every healthy job), in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// The `deferhook` binary to start (default: the one next to this executable).
    #[arg(long, value_name = "PATH")]
    pub server_binary: Option<PathBuf>,
    /// PostgreSQL server URL whose `postgres` database is used to create and drop the
    /// benchmark's database.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub postgres_url: String,
    /// `chaos`: how long the load and the faults last, in whole minutes (then the
    /// faults are healed, the jobs drain for about a minute and the audit runs).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub minutes: u64,
    /// `chaos`: the seed of the fault schedule and of the load's choices [default: from
    /// the clock; the run prints it, so a failure can be replayed].
    #[arg(long)]
    pub seed: Option<u64>,
    /// `chaos`: jobs created per second (lone creates and fan-outs together).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=2_000))]
    pub chaos_rate: u64,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// The load shapes of issue #8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// `--jobs` jobs, all due now.
    Burst,
    /// `--rate` jobs/s for `--seconds` s, each due 1–5 s after it is created.
    Steady,
    /// `--jobs` jobs due in an hour: memory and API latency while they wait.
    Backlog,
    /// One event to `--jobs` subscribers, `--slow` of them slow.
    Fanout,
    /// Four events in a row to `--jobs` subscribers, `--slow` of them sharing one slow
    /// destination (a receiver on its own port); then the same without the slow group
    /// (the control), on a fresh database and servers (issue #14).
    Incident,
    /// No server: the database's own ceilings (single-row commits/s, claimed rows/s).
    Ceilings,
    /// Three events to `--jobs` subscribers: `--slow` of them time out on one
    /// destination, `--failing` answer 500 until they recover, `--gone` answer 410;
    /// then the on-call questions of issue #16, one API call each, timed and checked.
    OnCall,
    /// Load, fan-outs, cancels, reschedules and replays against subscribers of six
    /// kinds for `--minutes`, with faults from a seeded schedule (SIGKILL, SIGSTOP,
    /// SIGTERM, a PostgreSQL restart on a private cluster, the receivers unreachable,
    /// a skewed clock); then every job audited (issue #17). Exits non-zero on any
    /// violation.
    Chaos,
    /// `--events` events (100) to `--jobs` subscribers (1,000), `--slow`, `--failing`
    /// and `--gone` of them as in `on-call`; once developed, every console page timed
    /// (issue #19: each under 100 ms with 100,000 jobs).
    Console,
}

/// The server's database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// A new file in a temporary directory.
    Sqlite,
    /// A new database on `--postgres-url`'s server, dropped afterwards (`chaos`: a
    /// private cluster of the installed server, which the soak may restart).
    Postgres,
}

impl Args {
    /// Rejects combinations the flags cannot express.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.instances > 1 && self.backend != Backend::Postgres {
            anyhow::bail!("--instances above 1 needs --backend postgres");
        }
        if self.destinations() > self.subscribers {
            anyhow::bail!("--destinations must not exceed --subscribers");
        }
        if self.scenario == Scenario::Fanout && self.slow > self.jobs() {
            anyhow::bail!("--slow must not exceed --jobs (the subscribers)");
        }
        if self.scenario == Scenario::Incident && self.slow >= self.jobs() {
            anyhow::bail!("--slow must be below --jobs (the subscribers): some must be healthy");
        }
        if self.shared_host && self.scenario != Scenario::Incident {
            anyhow::bail!("--shared-host is a shape of --scenario incident");
        }
        if (self.shared_host || matches!(self.scenario, Scenario::OnCall | Scenario::Console))
            && self.slow + self.failing + self.gone >= self.jobs()
        {
            anyhow::bail!(
                "--slow, --failing and --gone together must be below --jobs (the \
                 subscribers): some must be healthy"
            );
        }
        if matches!(self.scenario, Scenario::OnCall | Scenario::Console)
            && self.slow + self.failing + self.gone >= self.jobs()
        {
            anyhow::bail!(
                "--slow, --failing and --gone together must be below --jobs (the \
                 subscribers): some must be healthy"
            );
        }
        Ok(())
    }

    /// `--destinations`, or the subscribers up to 10.
    pub fn destinations(&self) -> u64 {
        self.destinations.unwrap_or(self.subscribers.min(10))
    }

    /// `--jobs`, or the scenario's default size.
    pub fn jobs(&self) -> u64 {
        self.jobs.unwrap_or(match self.scenario {
            Scenario::Burst => 10_000,
            Scenario::Steady | Scenario::Ceilings | Scenario::Chaos => 0,
            Scenario::Backlog => 100_000,
            Scenario::Fanout | Scenario::Incident | Scenario::OnCall => 2_000,
            Scenario::Console => 1_000,
        })
    }

    /// `--ttl-ms`, or the scenario's default (`None`: the server's).
    pub fn ttl_ms(&self) -> Option<u64> {
        match (self.ttl_ms, self.scenario) {
            (Some(ttl), _) => Some(ttl),
            (None, Scenario::Incident) if self.shared_host => Some(90_000),
            (None, Scenario::Incident) => Some(30_000),
            (None, _) => None,
        }
    }

    /// The flags every server of the run gets beyond the bench's own: the attempt
    /// timeout (`--attempt-timeout-ms`, 5 s by default with `--shared-host`).
    pub fn server_flags(&self) -> Vec<String> {
        let timeout = self
            .attempt_timeout_ms
            .or(self.shared_host.then_some(5_000));
        match timeout {
            Some(ms) => vec!["--attempt-timeout-ms".to_owned(), ms.to_string()],
            None => Vec::new(),
        }
    }

    /// `--slow-ms`, or the scenario's default: 8 s for `incident` (the slow endpoint of
    /// issue #14), 2 s otherwise.
    pub fn slow_ms(&self) -> u64 {
        self.slow_ms.unwrap_or(match self.scenario {
            Scenario::Incident => 8_000,
            Scenario::OnCall | Scenario::Console => 12_000,
            _ => 2_000,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(flags: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("deferhook-bench").chain(flags.iter().copied()))
            .expect("valid flags")
    }

    #[test]
    fn slow_ms_defaults_per_scenario_unless_given() {
        assert_eq!(parse(&["--scenario", "fanout"]).slow_ms(), 2_000);
        assert_eq!(parse(&["--scenario", "incident"]).slow_ms(), 8_000);
        let given = parse(&["--scenario", "incident", "--slow-ms", "500"]);
        assert_eq!(given.slow_ms(), 500);
    }

    #[test]
    fn destinations_default_to_the_subscribers_up_to_ten_and_never_exceed_them() {
        assert_eq!(parse(&[]).destinations(), 1);
        assert_eq!(parse(&["--subscribers", "4"]).destinations(), 4);
        assert_eq!(parse(&["--subscribers", "100"]).destinations(), 10);
        let given = parse(&["--subscribers", "100", "--destinations", "25"]);
        assert_eq!(given.destinations(), 25);
        assert!(given.check().is_ok());
        let more_ports = parse(&["--subscribers", "2", "--destinations", "3"]);
        assert!(more_ports.check().is_err());
    }

    #[test]
    fn the_shared_host_shape_sets_its_timeout_and_ttl() {
        let shared = parse(&["--scenario", "incident", "--shared-host"]);
        assert!(shared.check().is_ok());
        assert_eq!(shared.ttl_ms(), Some(90_000));
        assert_eq!(shared.server_flags(), ["--attempt-timeout-ms", "5000"]);
        let across = parse(&["--scenario", "incident"]);
        assert_eq!(
            (across.ttl_ms(), across.server_flags().len()),
            (Some(30_000), 0)
        );
        let given = parse(&["--scenario", "incident", "--shared-host", "--ttl-ms", "5"]);
        assert_eq!(given.ttl_ms(), Some(5));
        assert!(
            parse(&["--scenario", "burst", "--shared-host"])
                .check()
                .is_err()
        );
        let crowded = ["--scenario", "incident", "--shared-host", "--jobs", "400"];
        assert!(parse(&crowded).check().is_err());
    }

    #[test]
    fn incident_needs_a_healthy_subscriber() {
        let all_slow = parse(&["--scenario", "incident", "--jobs", "10", "--slow", "10"]);
        assert!(all_slow.check().is_err());
        let some_healthy = parse(&["--scenario", "incident", "--jobs", "10", "--slow", "9"]);
        assert!(some_healthy.check().is_ok());
        let on_call = |jobs: &str| {
            let flags = ["--scenario", "on-call", "--jobs", jobs, "--slow", "3"];
            parse(&[&flags[..], &["--failing", "3", "--gone", "3"]].concat()).check()
        };
        assert!(on_call("9").is_err());
        assert!(on_call("10").is_ok());
    }
}
