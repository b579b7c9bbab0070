//! Settings from command-line flags, each with a `DEFERHOOK_*` environment variable
//! (docs/DESIGN.md §6): the server's ([`ServeArgs`]) and the database's ([`DatabaseArgs`]).
//! The command line's root, `Cli`, is in [`crate::cli::command`].

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use clap::Args;
use ipnet::IpNet;

use crate::api::auth::{ApiToken, ApiTokens};
use crate::api::connections::{ConnectionLimits, MAX_CONNECTIONS_LIMIT};
use crate::api::{ApiSettings, AttemptTimeouts};
use crate::clock_sync::ClockSyncSettings;
use crate::delivery::DeliverySettings;
use crate::delivery::resolve::Resolver;
use crate::delivery::retention::RetentionSettings;
use crate::delivery::slots::MAX_SLOTS;
use crate::domain::circuit::CircuitPolicy;
use crate::domain::destination_state::{
    DEFAULT_DESTINATION_MAX_IN_FLIGHT, DestinationPolicy, MAX_DESTINATION_IN_FLIGHT,
};
use crate::domain::endpoint::EndpointPolicy;
use crate::domain::job_template::JobLimits;
use crate::domain::policy::BackoffPolicy;
use crate::domain::replay_plan::ReplayLimits;
use crate::domain::schedule_quota::{
    DEFAULT_MAX_JOBS_PER_MINUTE, DEFAULT_MAX_SCHEDULES, DEFAULT_MIN_PERIOD_MS, ScheduleQuotas,
};
use crate::domain::target::TargetPolicy;
use crate::store::{MAX_REPLAY_JOBS, Sealer};

/// Most jobs one claim takes (docs/DESIGN.md §3.1): a claim's cost is mostly reading
/// the subscribers with due work and ranking their candidates, whatever it takes, so a
/// backlog drains in fewer, larger claims.
const CLAIM_BATCH: u32 = 400;
/// The longest a worker sleeps without looking for due jobs; wake-ups on insert and at
/// the next due time make it rarely matter.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Which database to use. `Debug` hides a password in the URL, and `--help` does not
/// show the variable's value.
#[derive(Clone, Args)]
pub struct DatabaseArgs {
    /// `sqlite://PATH` (the embedded default, created when missing) or
    /// `postgres://USER@HOST:PORT/DATABASE` (PostgreSQL; needed for several instances).
    /// Prefer the environment variable when the URL holds a password.
    #[arg(
        long,
        env = "DEFERHOOK_DATABASE_URL",
        default_value = "sqlite://deferhook.db",
        hide_env_values = true
    )]
    pub database_url: String,
}

impl std::fmt::Debug for DatabaseArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = match url::Url::parse(&self.database_url) {
            Ok(mut url) if url.password().is_some() => {
                let _ = url.set_password(Some("redacted"));
                url.to_string()
            }
            Ok(_) => self.database_url.clone(),
            Err(_) => "<not a URL>".to_owned(),
        };
        f.debug_struct("DatabaseArgs")
            .field("database_url", &shown)
            .finish()
    }
}

/// A flag's value that must not be shown: `Debug` prints `[redacted]`, and clap is told
/// to hide it (`hide_env_values`) in `--help`.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretText(String);

impl SecretText {
    /// The text itself, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::str::FromStr for SecretText {
    type Err = std::convert::Infallible;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(SecretText(text.to_owned()))
    }
}

/// Settings of `deferhook serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The database.
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Address the API listens on (port 0 picks a free port). Without API tokens, only
    /// a loopback address.
    #[arg(long, env = "DEFERHOOK_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// An API token (repeat the flag for several, e.g. while rotating them; the
    /// variable takes a comma-separated list). With tokens, every `/v1/*` request needs
    /// `Authorization: Bearer <token>`, and the console (`/console/`) asks for one once;
    /// 16 to 512 visible ASCII characters each. Prefer the environment variable: a
    /// flag's value shows in the process list.
    #[arg(
        long = "api-token",
        env = "DEFERHOOK_API_TOKENS",
        value_name = "TOKEN",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub api_tokens: Vec<ApiToken>,
    /// Most bytes of a job's payload (larger ones get 413).
    #[arg(long, env = "DEFERHOOK_MAX_PAYLOAD_BYTES", default_value_t = 262_144,
          value_parser = clap::value_parser!(u64).range(1..=16 * 1024 * 1024))]
    pub max_payload_bytes: u64,
    /// Deadline after `deliver_at` for jobs that name none, in milliseconds.
    #[arg(long, env = "DEFERHOOK_DEFAULT_TTL_MS", default_value_t = 86_400_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub default_ttl_ms: u64,
    /// Longest an API request may take before it is answered 408, in milliseconds.
    #[arg(long, env = "DEFERHOOK_REQUEST_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_ms: u64,
    /// Longest a client may take to send a request's headers before its connection is
    /// closed (slow clients holding connections), in milliseconds.
    #[arg(long, env = "DEFERHOOK_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_ms: u64,
    /// Most API connections open at once; more wait in the listener's backlog until
    /// one closes. At most 768: connections share 1,024 descriptors with the database
    /// pool and logs, beside the worker's slots.
    #[arg(long, env = "DEFERHOOK_MAX_CONNECTIONS", default_value_t = 512,
          value_parser = clap::value_parser!(u64).range(1..=MAX_CONNECTIONS_LIMIT))]
    pub max_connections: u64,
    /// Most API connections open at once from one client address (IPv6: one /64); a
    /// further one is closed at once.
    #[arg(long, env = "DEFERHOOK_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 128,
          value_parser = clap::value_parser!(u64).range(1..=MAX_CONNECTIONS_LIMIT))]
    pub max_connections_per_client: u64,
    /// API tokens that are not valid one client address may present at once (bearer
    /// tokens and console logins together) before it is locked out; then one more
    /// every 6 s.
    #[arg(long, env = "DEFERHOOK_MAX_FAILED_CREDENTIALS", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_failed_credentials: u32,
    /// The URL browsers reach this server at (`https://deferhook.example.com`), when a
    /// proxy in front terminates TLS: with `https`, the console's cookies are always
    /// `Secure`, whether or not the proxy sends `X-Forwarded-Proto`.
    #[arg(long, env = "DEFERHOOK_PUBLIC_URL", value_name = "URL", value_parser = parse_public_url)]
    pub public_url: Option<url::Url>,
    /// On SIGTERM/SIGINT, how long open requests and running attempts may finish
    /// before the remaining leases are released, in milliseconds.
    #[arg(long, env = "DEFERHOOK_SHUTDOWN_GRACE_MS", default_value_t = 10_000)]
    pub shutdown_grace_ms: u64,
    /// One attempt's time limit (connect, response and body read), in milliseconds;
    /// must be shorter than the lease.
    #[arg(long, env = "DEFERHOOK_ATTEMPT_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub attempt_timeout_ms: u64,
    /// A worker's lease on a job, renewed while the attempt runs, in milliseconds.
    #[arg(long, env = "DEFERHOOK_LEASE_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(3..))]
    pub lease_ms: u64,
    /// Backoff after the first failed attempt (doubling after each), in milliseconds.
    #[arg(long, env = "DEFERHOOK_BACKOFF_BASE_MS", default_value_t = 1_000)]
    pub backoff_base_ms: u64,
    /// The cap on the backoff, in milliseconds.
    #[arg(long, env = "DEFERHOOK_BACKOFF_MAX_MS", default_value_t = 3_600_000)]
    pub backoff_max_ms: u64,
    /// Most attempts running at once in this instance (its worker's slots); each holds
    /// a socket, and the server raises its open-files limit to this plus 1,024 when the
    /// hard limit allows. Without it: as many as the open-files limit (raised to the
    /// hard limit, less 1,024) and --memory-budget-mb allow, 64 to 100,000.
    #[arg(long, env = "DEFERHOOK_MAX_IN_FLIGHT",
          value_parser = clap::value_parser!(u64).range(1..=MAX_SLOTS))]
    pub max_in_flight: Option<u64>,
    /// Memory that waiting attempts may use, in MiB, when --max-in-flight is not given:
    /// the slots are at most this over 64 KiB (what one waiting attempt costs, with
    /// room for larger payloads). The default, 512, is 8,192 slots: half of a 1 GiB
    /// container, the rest left to the process itself, the API and the database pool.
    #[arg(long, env = "DEFERHOOK_MEMORY_BUDGET_MB", default_value_t = 512,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub memory_budget_mb: u64,
    /// Requests open at once to one destination (a receiver's `host:port`), across all
    /// instances, unless an operator set its own (`PUT /v1/destinations/{host:port}`).
    #[arg(long, env = "DEFERHOOK_DESTINATION_MAX_IN_FLIGHT",
          default_value_t = DEFAULT_DESTINATION_MAX_IN_FLIGHT,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_DESTINATION_IN_FLIGHT)))]
    pub destination_max_in_flight: u32,
    /// Consecutive connection failures (refused, reset, TLS, DNS) at a destination's
    /// host before its circuit breaker opens. Timeouts and HTTP answers are the
    /// endpoint's (its own breaker judges them), not the host's.
    #[arg(long, env = "DEFERHOOK_CIRCUIT_FAILURE_THRESHOLD", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub circuit_failure_threshold: u32,
    /// How long an open circuit waits before its one probe, in milliseconds; doubled
    /// after each failed probe.
    #[arg(long, env = "DEFERHOOK_CIRCUIT_COOLDOWN_MS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub circuit_cooldown_ms: u64,
    /// The longest cool-down of an open circuit, in milliseconds.
    #[arg(long, env = "DEFERHOOK_CIRCUIT_MAX_COOLDOWN_MS", default_value_t = 300_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub circuit_max_cooldown_ms: u64,
    /// The window over which an endpoint's (a subscriber's) failure rate is measured,
    /// in milliseconds.
    #[arg(long, env = "DEFERHOOK_ENDPOINT_WINDOW_MS", default_value_t = 60_000,
          value_parser = clap::value_parser!(u64).range(1_000..=86_400_000))]
    pub endpoint_window_ms: u64,
    /// Results an endpoint needs in its window before its failure rate may open its
    /// circuit.
    #[arg(long, env = "DEFERHOOK_ENDPOINT_MIN_RESULTS", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub endpoint_min_results: u32,
    /// The failure rate of an endpoint's window, in percent, at or above which its
    /// circuit opens.
    #[arg(long, env = "DEFERHOOK_ENDPOINT_FAILURE_PERCENT", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub endpoint_failure_percent: u32,
    /// An endpoint whose typical attempt takes at least this long, in milliseconds, or
    /// one of whose attempts has been open this long without an answer, is
    /// long-running: together such endpoints hold at most half of a destination's
    /// places while quick ones use it too.
    #[arg(long, env = "DEFERHOOK_LONG_ATTEMPT_MS", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub long_attempt_ms: u64,
    /// The eligible → delivered objective behind `deferhook_jobs_past_slo`, in
    /// milliseconds.
    #[arg(long, env = "DEFERHOOK_DELIVERY_SLO_MS", default_value_t = 60_000)]
    pub delivery_slo_ms: u64,
    /// Warn in the log when this machine's clock and the database's differ by more
    /// than this, in milliseconds. On PostgreSQL each instance measures the offset at
    /// start and every 30 s and works on the database's time
    /// (`deferhook_clock_offset_seconds`); SQLite shares this machine's clock.
    #[arg(long, env = "DEFERHOOK_CLOCK_OFFSET_WARN_MS", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub clock_offset_warn_ms: u64,
    /// Most jobs requeued per second by all running replays together, across all
    /// instances (a replay's `rate_per_second` counts against it until it has
    /// released or skipped every job it matched).
    #[arg(long, env = "DEFERHOOK_MAX_REPLAY_RATE", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_replay_rate: u32,
    /// Most recurring schedules that may exist (enabled or paused): a PUT that would
    /// create one more is refused (422 naming `schedule_id`); replacing one is always
    /// allowed.
    #[arg(long, env = "DEFERHOOK_MAX_SCHEDULES", default_value_t = DEFAULT_MAX_SCHEDULES,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_schedules: u64,
    /// Shortest time between two periods of a recurring schedule, in milliseconds: a
    /// shorter `every_ms`, or a cron pattern whose periods come closer, is refused.
    #[arg(long, env = "DEFERHOOK_SCHEDULE_MIN_PERIOD_MS", default_value_t = DEFAULT_MIN_PERIOD_MS,
          value_parser = clap::value_parser!(u64).range(1_000..=86_400_000))]
    pub schedule_min_period_ms: u64,
    /// Most jobs one recurring schedule makes a minute (jobs a period × periods a
    /// minute): a faster schedule is refused, and one whose event type gains
    /// subscribers later skips periods to stay within it.
    #[arg(long, env = "DEFERHOOK_SCHEDULE_MAX_JOBS_PER_MINUTE",
          default_value_t = DEFAULT_MAX_JOBS_PER_MINUTE,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub schedule_max_jobs_per_minute: u64,
    /// How long delivered and cancelled jobs (with their attempts) are kept after they
    /// finish, in milliseconds; 0 keeps them forever. Instances that run the worker
    /// purge them every minute.
    #[arg(
        long,
        env = "DEFERHOOK_RETAIN_FINISHED_MS",
        default_value_t = 604_800_000
    )]
    pub retain_finished_ms: u64,
    /// How long dead jobs (with their attempts) are kept after they die, in
    /// milliseconds; 0 keeps them forever. Audit entries are kept for the longer of
    /// this and --retain-finished-ms.
    #[arg(
        long,
        env = "DEFERHOOK_RETAIN_DEAD_MS",
        default_value_t = 2_592_000_000
    )]
    pub retain_dead_ms: u64,
    /// Encrypts subscriber secrets at rest (ChaCha20-Poly1305) with this key: 32 random
    /// bytes in standard base64 (`openssl rand -base64 32`). Prefer the environment
    /// variable or --secret-key-file: a flag's value shows in the process list. Every
    /// instance sharing a database needs the same key. Without a key, an SQLite
    /// database gets one generated in a file beside it (`deferhook.db.key`); PostgreSQL
    /// keeps secrets in plaintext (a warning at start).
    #[arg(
        long,
        env = "DEFERHOOK_SECRET_KEY",
        hide_env_values = true,
        value_name = "BASE64",
        conflicts_with = "secret_key_file"
    )]
    pub secret_key: Option<SecretText>,
    /// A file holding the secret key (the same base64 text; surrounding whitespace is
    /// ignored), e.g. a mounted Docker or Kubernetes secret.
    #[arg(long, env = "DEFERHOOK_SECRET_KEY_FILE", value_name = "PATH")]
    pub secret_key_file: Option<PathBuf>,
    /// Store subscriber secrets in plaintext (a warning at start): no key file is
    /// generated beside an SQLite database. A database that already holds encrypted
    /// secrets still needs their key.
    #[arg(
        long,
        env = "DEFERHOOK_PLAINTEXT_SECRETS",
        conflicts_with_all = ["secret_key", "secret_key_file"]
    )]
    pub plaintext_secrets: bool,
    /// Deliver to internal addresses too: loopback, private (RFC 1918), link-local
    /// (cloud metadata), carrier-grade NAT, IPv6 unique local and site-local,
    /// unspecified, multicast, reserved and special-purpose. Off by default: such subscriber URLs are refused (422) and such
    /// targets are blocked before connecting.
    #[arg(long, env = "DEFERHOOK_ALLOW_PRIVATE_TARGETS")]
    pub allow_private_targets: bool,
    /// Permit targets in this range although it is internal (e.g. `10.20.0.0/16`, or
    /// one address); repeatable, comma-separated in the variable. An IPv4 range also
    /// permits the IPv4-mapped forms of its addresses, not their NAT64, 6to4 or
    /// IPv4-compatible forms (other hosts).
    #[arg(long = "allow-target-cidr", value_name = "CIDR", env = "DEFERHOOK_ALLOW_TARGET_CIDRS",
          value_delimiter = ',', value_parser = parse_cidr)]
    pub allow_target_cidrs: Vec<IpNet>,
    /// Run the API only (another instance delivers).
    #[arg(long, env = "DEFERHOOK_NO_WORKER", conflicts_with = "no_api")]
    pub no_worker: bool,
    /// Run the delivery worker only (no HTTP listener).
    #[arg(long, env = "DEFERHOOK_NO_API")]
    pub no_api: bool,
}

/// An absolute `http` or `https` URL with a host (`--public-url`).
fn parse_public_url(text: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text.trim()).map_err(|e| {
        format!("`{text}` is not an absolute URL ({e}), e.g. https://deferhook.example.com")
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "`{text}` must be an http:// or https:// URL with a host, e.g. https://deferhook.example.com"
        ));
    }
    Ok(url)
}

/// A CIDR (`10.0.0.0/8`, `fd00::/8`) or a single address (`/32` or `/128`), with the
/// host bits cleared.
fn parse_cidr(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .map(|net| net.trunc())
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("`{text}` is not a CIDR such as 10.0.0.0/8 or fd00::/8"))
}

impl ServeArgs {
    /// Which addresses deliveries may reach.
    pub fn target_policy(&self) -> Arc<TargetPolicy> {
        Arc::new(TargetPolicy {
            allow_private: self.allow_private_targets,
            allowed: self.allow_target_cidrs.clone(),
        })
    }

    /// The API's settings; fails when an API token is malformed (the message names
    /// it by position, never by value).
    pub fn api_settings(&self) -> anyhow::Result<ApiSettings> {
        Ok(ApiSettings {
            tokens: ApiTokens::new(&self.api_tokens).map_err(anyhow::Error::msg)?,
            target_policy: self.target_policy(),
            attempt_timeouts: AttemptTimeouts::new(self.attempt_timeout_ms, self.lease_ms),
            actions: tokio_util::task::TaskTracker::new(),
            public_https: self
                .public_url
                .as_ref()
                .is_some_and(|u| u.scheme() == "https"),
            max_failed_credentials: self.max_failed_credentials,
            job_limits: JobLimits {
                max_payload_bytes: usize::try_from(self.max_payload_bytes).unwrap_or(usize::MAX),
                default_ttl_ms: self.default_ttl_ms,
            },
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            delivery_slo_ms: self.delivery_slo_ms,
            replay_limits: ReplayLimits {
                max_rate_per_second: self.max_replay_rate,
                default_ttl_ms: self.default_ttl_ms,
                min_ttl_ms: self.attempt_timeout_ms,
                max_jobs: MAX_REPLAY_JOBS,
            },
            schedule_quotas: self.schedule_quotas(),
        })
    }

    /// The bounds on open API connections.
    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            total: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
            per_client: usize::try_from(self.max_connections_per_client).unwrap_or(usize::MAX),
        }
    }

    /// The quotas on recurring schedules (docs/DESIGN.md §5.14).
    pub fn schedule_quotas(&self) -> ScheduleQuotas {
        ScheduleQuotas {
            max_schedules: self.max_schedules,
            min_period_ms: self.schedule_min_period_ms,
            max_jobs_per_minute: self.schedule_max_jobs_per_minute,
        }
    }

    /// The header-read timeout of API connections.
    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    /// The sealer of the key that `--secret-key` or `--secret-key-file` gives; `None`
    /// without either (then [`crate::secret_key::choose`] decides). Errors name the
    /// flag or the file, never the key.
    pub fn given_sealer(&self) -> anyhow::Result<Option<Sealer>> {
        if let Some(key) = &self.secret_key {
            return Sealer::from_base64_key(key.expose())
                .map(Some)
                .context("--secret-key (DEFERHOOK_SECRET_KEY) is not usable");
        }
        if let Some(path) = &self.secret_key_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --secret-key-file {}", path.display()))?;
            return Sealer::from_base64_key(&text).map(Some).with_context(|| {
                format!(
                    "--secret-key-file {}: the key is not usable",
                    path.display()
                )
            });
        }
        Ok(None)
    }

    /// The shutdown grace period.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }

    /// How the instance's clock is set by the database's (docs/DESIGN.md §12).
    pub fn clock_sync_settings(&self) -> ClockSyncSettings {
        ClockSyncSettings {
            warn_ms: self.clock_offset_warn_ms,
            ..ClockSyncSettings::default()
        }
    }

    /// The retention task's settings (`0` in a flag: keep that kind forever).
    pub fn retention_settings(&self) -> RetentionSettings {
        RetentionSettings {
            retain_finished_ms: (self.retain_finished_ms > 0).then_some(self.retain_finished_ms),
            retain_dead_ms: (self.retain_dead_ms > 0).then_some(self.retain_dead_ms),
            ..RetentionSettings::default()
        }
    }

    /// The destinations' default limit and circuit breaker (docs/DESIGN.md §15); a
    /// maximum cool-down below the first is raised to it.
    pub fn destination_policy(&self) -> DestinationPolicy {
        DestinationPolicy {
            default_max_in_flight: self.destination_max_in_flight,
            circuit: CircuitPolicy {
                failure_threshold: self.circuit_failure_threshold,
                cooldown_ms: self.circuit_cooldown_ms,
                max_cooldown_ms: self.circuit_max_cooldown_ms.max(self.circuit_cooldown_ms),
            },
            endpoint: EndpointPolicy {
                window_ms: self.endpoint_window_ms,
                min_results: self.endpoint_min_results,
                failure_percent: self.endpoint_failure_percent,
                long_attempt_ms: self.long_attempt_ms,
            },
        }
    }

    /// The delivery worker's settings; `owner` names this instance's leases, and
    /// `slots` is how many attempts it runs at once (`--max-in-flight`, or the default
    /// [`WorkerSlots::choose`](crate::delivery::slots::WorkerSlots::choose) picks).
    pub fn delivery_settings(&self, owner: String, slots: u64) -> DeliverySettings {
        DeliverySettings {
            owner,
            lease_ms: self.lease_ms,
            attempt_timeout: Duration::from_millis(self.attempt_timeout_ms),
            backoff: BackoffPolicy {
                base_ms: self.backoff_base_ms,
                max_ms: self.backoff_max_ms,
            },
            max_in_flight: usize::try_from(slots).unwrap_or(usize::MAX),
            claim_batch: CLAIM_BATCH,
            poll_interval: POLL_INTERVAL,
            shutdown_grace: self.shutdown_grace(),
            long_attempt: Duration::from_millis(self.long_attempt_ms),
            target_policy: self.target_policy(),
            resolver: Resolver::system(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    use crate::cli::command::{Cli, Command};
    use clap::Parser;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_database_password_never_shows() {
        let args = DatabaseArgs {
            database_url: "postgres://u:PGPASSWORD@127.0.0.1/db".into(),
        };
        let shown = format!("{args:?}");
        assert!(!shown.contains("PGPASSWORD"), "{shown}");
        assert!(
            shown.contains("postgres://u:redacted@127.0.0.1/db"),
            "{shown}"
        );
        let command = Cli::command();
        for name in ["serve", "migrate"] {
            let sub = command.find_subcommand(name).unwrap();
            let arg = sub
                .get_arguments()
                .find(|arg| arg.get_id() == "database_url")
                .unwrap();
            assert!(arg.is_hide_env_values_set(), "{name}: --help shows the URL");
        }
    }

    #[test]
    fn serve_defaults_match_the_design() {
        let cli = Cli::try_parse_from(["deferhook", "serve"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(args.database.database_url, "sqlite://deferhook.db");
        assert_eq!(args.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(args.max_payload_bytes, 262_144);
        assert_eq!(args.default_ttl_ms, 86_400_000);
        assert_eq!(args.shutdown_grace_ms, 10_000);
        assert_eq!(args.attempt_timeout_ms, 10_000);
        assert_eq!(args.lease_ms, 30_000);
        assert_eq!(args.backoff_base_ms, 1_000);
        assert_eq!(args.backoff_max_ms, 3_600_000);
        assert_eq!(args.max_in_flight, None);
        assert_eq!(args.memory_budget_mb, 512);
        assert_eq!(args.delivery_slo_ms, 60_000);
        assert_eq!(args.clock_offset_warn_ms, 1_000);
        assert_eq!(args.clock_sync_settings().warn_ms, 1_000);
        assert_eq!(args.retain_finished_ms, 604_800_000);
        assert_eq!(args.retain_dead_ms, 2_592_000_000);
        let retention = args.retention_settings();
        assert_eq!(retention.retain_finished_ms, Some(604_800_000));
        assert_eq!(retention.retain_dead_ms, Some(2_592_000_000));
        assert_eq!(args.schedule_quotas(), ScheduleQuotas::default());
        assert_eq!(
            (args.max_schedules, args.schedule_min_period_ms),
            (1_000, 1_000)
        );
        assert_eq!(args.schedule_max_jobs_per_minute, 10_000);
        assert!(!args.no_worker && !args.no_api);
        assert_eq!(*args.target_policy(), TargetPolicy::default());
        assert!(args.delivery_settings("w".into(), 64).validate().is_ok());
    }

    #[test]
    fn an_explicit_max_in_flight_is_kept() {
        let args = serve(&["--max-in-flight", "3", "--memory-budget-mb", "64"]);
        assert_eq!(args.max_in_flight, Some(3));
        assert_eq!(args.memory_budget_mb, 64);
    }

    #[test]
    fn zero_retention_keeps_forever() {
        let cli = Cli::try_parse_from([
            "deferhook",
            "serve",
            "--retain-finished-ms",
            "0",
            "--retain-dead-ms",
            "0",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("expected serve")
        };
        let retention = args.retention_settings();
        assert_eq!(retention.retain_finished_ms, None);
        assert_eq!(retention.retain_dead_ms, None);
        assert!(!retention.enabled());
    }

    fn serve(args: &[&str]) -> ServeArgs {
        let argv = ["deferhook", "serve"].iter().chain(args).copied();
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Serve(args) => args,
            _ => panic!("expected serve"),
        }
    }

    const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

    #[test]
    fn the_public_url_is_an_http_or_https_url_and_https_makes_cookies_secure() {
        let https = serve(&["--public-url", "https://deferhook.example.com/"]);
        assert!(https.api_settings().unwrap().public_https);
        let http = serve(&["--public-url", "http://127.0.0.1:8080"]);
        assert!(!http.api_settings().unwrap().public_https);
        assert!(!serve(&[]).api_settings().unwrap().public_https);
        for bad in [
            "deferhook.example.com",
            "ftp://deferhook.example.com",
            "https://",
            "",
        ] {
            let argv = ["deferhook", "serve", "--public-url", bad];
            let error = Cli::try_parse_from(argv)
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(error.contains("--public-url"), "{bad}: {error}");
        }
    }

    #[test]
    fn failed_credentials_default_to_ten_and_may_be_raised() {
        assert_eq!(
            serve(&[]).api_settings().unwrap().max_failed_credentials,
            10
        );
        let raised = serve(&["--max-failed-credentials", "1000"]);
        assert_eq!(raised.api_settings().unwrap().max_failed_credentials, 1000);
        for bad in ["0", "1000001", "x"] {
            let argv = ["deferhook", "serve", "--max-failed-credentials", bad];
            assert!(Cli::try_parse_from(argv).is_err(), "{bad}");
        }
    }

    #[test]
    fn connection_limits_default_to_512_and_128_and_stay_within_the_descriptors() {
        let limits = serve(&[]).connection_limits();
        assert_eq!((limits.total, limits.per_client), (512, 128));
        for bad in ["0", "769"] {
            let argv = ["deferhook", "serve", "--max-connections", bad];
            assert!(Cli::try_parse_from(argv).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_secret_key_seals_and_its_debug_output_is_redacted() {
        let args = serve(&["--secret-key", KEY]);
        assert!(args.given_sealer().unwrap().unwrap().is_sealing());
        let shown = format!("{args:?}");
        assert!(!shown.contains(KEY), "{shown}");
        assert!(serve(&[]).given_sealer().unwrap().is_none());
    }

    #[test]
    fn a_key_file_is_read_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, format!("{KEY}\n")).unwrap();
        let args = serve(&["--secret-key-file", path.to_str().unwrap()]);
        assert!(args.given_sealer().unwrap().unwrap().is_sealing());

        let missing = dir.path().join("missing");
        let args = serve(&["--secret-key-file", missing.to_str().unwrap()]);
        let error = format!("{:#}", args.given_sealer().unwrap_err());
        assert!(error.contains("cannot read --secret-key-file"), "{error}");
    }

    #[test]
    fn a_bad_key_is_refused_without_echoing_it() {
        for bad in ["c2hvcnQ=", "not base64 !!", ""] {
            let error = format!(
                "{:#}",
                serve(&["--secret-key", bad]).given_sealer().unwrap_err()
            );
            assert!(error.contains("--secret-key"), "{error}");
            assert!(bad.is_empty() || !error.contains(bad), "{error}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "c2hvcnQ=").unwrap();
        let args = serve(&["--secret-key-file", path.to_str().unwrap()]);
        let error = format!("{:#}", args.given_sealer().unwrap_err());
        assert!(error.contains("32 bytes, found 5"), "{error}");
        assert!(!error.contains("c2hvcnQ="), "{error}");
    }

    #[test]
    fn the_key_and_the_key_file_exclude_each_other() {
        let argv = [
            "deferhook",
            "serve",
            "--secret-key",
            KEY,
            "--secret-key-file",
            "/k",
        ];
        let error = Cli::try_parse_from(argv).unwrap_err().to_string();
        assert!(!error.contains(KEY), "{error}");
        for key_flag in [["--secret-key", KEY], ["--secret-key-file", "/k"]] {
            let argv = ["deferhook", "serve", "--plaintext-secrets"]
                .into_iter()
                .chain(key_flag);
            let error = Cli::try_parse_from(argv).unwrap_err().to_string();
            assert!(error.contains("--plaintext-secrets"), "{error}");
            assert!(!error.contains(KEY), "{error}");
        }
    }

    #[test]
    fn bad_values_are_refused() {
        for args in [
            ["deferhook", "serve", "--listen", "nowhere"],
            ["deferhook", "serve", "--max-payload-bytes", "0"],
            ["deferhook", "serve", "--default-ttl-ms", "-5"],
            ["deferhook", "serve", "--retain-dead-ms", "-1"],
            ["deferhook", "serve", "--allow-target-cidr", "10.0.0.0/33"],
            ["deferhook", "serve", "--allow-target-cidr", "intranet"],
            ["deferhook", "serve", "--max-in-flight", "0"],
            ["deferhook", "serve", "--max-in-flight", "100001"],
            ["deferhook", "serve", "--memory-budget-mb", "0"],
            ["deferhook", "serve", "--clock-offset-warn-ms", "0"],
            ["deferhook", "serve", "--clock-offset-warn-ms", "-1"],
            ["deferhook", "serve", "--max-schedules", "0"],
            ["deferhook", "serve", "--schedule-min-period-ms", "999"],
            ["deferhook", "serve", "--schedule-max-jobs-per-minute", "0"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn target_flags() {
        let cli = Cli::try_parse_from([
            "deferhook",
            "serve",
            "--allow-private-targets",
            "--allow-target-cidr",
            "10.20.0.0/16",
            "--allow-target-cidr=fd00::1,192.168.1.7/24",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("expected serve")
        };
        let policy = args.target_policy();
        assert!(policy.allow_private);
        let allowed: Vec<String> = policy.allowed.iter().map(ToString::to_string).collect();
        assert_eq!(allowed, ["10.20.0.0/16", "fd00::1/128", "192.168.1.0/24"]);
    }
}
