//! The figures of a run: one table for people, the same figures as JSON.

use comfy_table::Table;
use serde_json::{Value, json};

use super::args::{Args, Scenario};
use super::arrivals;
use super::scenario::Outcome;
use super::stats::Spread;

/// The figures of one run.
pub struct Report {
    settings: Value,
    expects_delivery: bool,
    jobs: usize,
    delivered: usize,
    duplicates: usize,
    unexpected: usize,
    accepted_per_s: f64,
    delivered_per_s: f64,
    lateness_ms: Spread,
    create_latency_ms: Spread,
    probe_latency_ms: Spread,
    peak_rss_mib: Vec<f64>,
    cpu_seconds: Vec<f64>,
    /// Server CPU (all instances, their whole life) per job, in ms: per delivered job,
    /// or per accepted job when the jobs were meant to wait (`backlog`).
    server_cpu_ms_per_job: f64,
    /// PostgreSQL's CPU (all its processes, from the load's start until every job
    /// arrived) per job, in ms; `None` on SQLite (its work is the server's).
    database_cpu_ms_per_job: Option<f64>,
    /// `fanout --payload-bytes` (C-21): what one large payload cost.
    large: Option<LargeFigures>,
}

/// What one event with a large payload cost (C-21; issue #36's target: the store grows
/// by at most twice the payload plus 2 KiB per job, the server's memory by at most
/// 256 MiB).
#[derive(Debug, Clone, Copy)]
struct LargeFigures {
    payload_bytes: u64,
    store_growth_bytes: i64,
    /// The store's growth beyond twice the payload, per job, in bytes.
    store_bytes_per_job: f64,
    /// The servers' peak resident memory over their memory before the event, in MiB.
    rss_growth_mib: f64,
    /// Deliveries that carried the payload's exact bytes.
    exact: usize,
}

impl Report {
    /// Computes the figures from what the run observed.
    pub fn new(args: &Args, outcome: &Outcome) -> Self {
        let matched = arrivals::match_to_jobs(&outcome.created, &outcome.arrivals);
        let (duplicates, unexpected) = (matched.duplicates, matched.unexpected);
        let lateness: Vec<f64> = matched.first.iter().map(|(_, late)| *late).collect();
        let last_arrival_ms = matched.first.iter().map(|(a, _)| a.at_ms).max();
        let accepted: Vec<i64> = outcome.created.iter().map(|j| j.accepted_ms).collect();
        let first_accept = accepted.iter().min().copied();
        let last_accept = accepted.iter().max().copied();
        let jobs_done = if outcome.expects_delivery {
            lateness.len()
        } else {
            outcome.created.len()
        };
        let per_job = |seconds: f64| seconds * 1_000.0 / jobs_done.max(1) as f64;
        let per_second = |count: usize, from: Option<i64>, to: Option<i64>| match (from, to) {
            (Some(from), Some(to)) if to > from => count as f64 * 1_000.0 / (to - from) as f64,
            _ => 0.0,
        };
        Report {
            settings: settings(args),
            expects_delivery: outcome.expects_delivery,
            jobs: outcome.created.len(),
            delivered: lateness.len(),
            duplicates,
            unexpected,
            accepted_per_s: per_second(
                outcome.created.len(),
                Some(outcome.load_started_ms),
                last_accept,
            ),
            delivered_per_s: per_second(lateness.len(), first_accept, last_arrival_ms),
            lateness_ms: Spread::of(lateness),
            create_latency_ms: Spread::of(outcome.created.iter().map(|j| j.latency_ms).collect()),
            probe_latency_ms: Spread::of(outcome.probe_latencies_ms.clone()),
            peak_rss_mib: outcome
                .usage
                .iter()
                .map(|u| u.peak_rss_kib as f64 / 1_024.0)
                .collect(),
            cpu_seconds: outcome.usage.iter().map(|u| u.cpu_seconds).collect(),
            server_cpu_ms_per_job: per_job(outcome.usage.iter().map(|u| u.cpu_seconds).sum()),
            database_cpu_ms_per_job: outcome.database_cpu_seconds.map(per_job),
            large: outcome.large_payload.map(|large| {
                let peak_kib: u64 = outcome.usage.iter().map(|u| u.peak_rss_kib).sum();
                let beyond = large.store_growth_bytes - 2 * large.bytes as i64;
                LargeFigures {
                    payload_bytes: large.bytes,
                    store_growth_bytes: large.store_growth_bytes,
                    store_bytes_per_job: beyond as f64 / outcome.created.len().max(1) as f64,
                    rss_growth_mib: peak_kib.saturating_sub(large.rss_before_kib) as f64 / 1_024.0,
                    exact: outcome
                        .arrivals
                        .iter()
                        .filter(|a| a.body_hash == large.hash)
                        .count(),
                }
            }),
        }
    }

    /// Why the run failed its invariants, if it did: a duplicate or unexpected request,
    /// or (unless the jobs were meant to wait) a job that never arrived.
    pub fn failure(&self) -> Option<String> {
        if self.duplicates > 0 || self.unexpected > 0 {
            return Some(format!(
                "{} duplicates, {} unexpected requests",
                self.duplicates, self.unexpected
            ));
        }
        if let Some(large) = &self.large
            && large.exact != self.delivered
        {
            return Some(format!(
                "{} of {} deliveries carried the payload's exact bytes",
                large.exact, self.delivered
            ));
        }
        if self.expects_delivery && self.delivered != self.jobs {
            return Some(format!(
                "{} of {} jobs delivered",
                self.delivered, self.jobs
            ));
        }
        None
    }

    /// The figures as a two-column table.
    pub fn table(&self) -> Table {
        let spread = |s: &Spread| format!("{:.1} / {:.1} / {:.1}", s.p50, s.p99, s.max);
        let list = |values: &[f64], digits: usize| {
            let each: Vec<String> = values.iter().map(|v| format!("{v:.digits$}")).collect();
            each.join(" + ")
        };
        let mut table = Table::new();
        table.load_style(comfy_table::presets::ASCII_MARKDOWN);
        table.set_header(vec!["figure", "value"]);
        let mut rows = vec![
            ("settings", compact(&self.settings)),
            ("jobs accepted", self.jobs.to_string()),
            ("jobs delivered", self.delivered.to_string()),
            ("duplicates", self.duplicates.to_string()),
            ("unexpected requests", self.unexpected.to_string()),
            ("accepted jobs/s", format!("{:.0}", self.accepted_per_s)),
            (
                "delivered jobs/s (first accept → last delivered)",
                format!("{:.0}", self.delivered_per_s),
            ),
            (
                "create latency ms p50 / p99 / max",
                spread(&self.create_latency_ms),
            ),
            (
                "server peak RSS MiB (per instance)",
                list(&self.peak_rss_mib, 1),
            ),
            (
                "server CPU seconds (per instance)",
                list(&self.cpu_seconds, 2),
            ),
            (
                "CPU ms per job: server + database",
                format!(
                    "{:.3} + {}",
                    self.server_cpu_ms_per_job,
                    self.database_cpu_ms_per_job
                        .map_or("(in the server)".to_owned(), |ms| format!("{ms:.3}"))
                ),
            ),
        ];
        if self.expects_delivery {
            rows.insert(
                8,
                ("lateness ms p50 / p99 / max", spread(&self.lateness_ms)),
            );
        } else {
            let probes = (
                "API latency ms while waiting p50 / p99 / max",
                spread(&self.probe_latency_ms),
            );
            rows.push(probes);
        }
        if let Some(large) = &self.large {
            rows.push(("payload bytes", large.payload_bytes.to_string()));
            rows.push((
                "store growth MiB; bytes per job beyond 2 × payload",
                format!(
                    "{:.1}; {:.0}",
                    large.store_growth_bytes as f64 / 1_048_576.0,
                    large.store_bytes_per_job
                ),
            ));
            rows.push((
                "server RSS growth MiB (peak − before the event)",
                format!("{:.1}", large.rss_growth_mib),
            ));
            rows.push(("deliveries with the exact bytes", large.exact.to_string()));
        }
        for (name, value) in rows {
            table.add_row(vec![name.to_owned(), value]);
        }
        table
    }

    /// The figures as JSON.
    pub fn json(&self) -> Value {
        json!({
            "settings": self.settings,
            "jobs": self.jobs,
            "delivered": self.delivered,
            "duplicates": self.duplicates,
            "unexpected": self.unexpected,
            "accepted_per_s": self.accepted_per_s,
            "delivered_per_s": self.delivered_per_s,
            "lateness_ms": self.lateness_ms,
            "create_latency_ms": self.create_latency_ms,
            "probe_latency_ms": self.probe_latency_ms,
            "server_peak_rss_mib": self.peak_rss_mib,
            "server_cpu_seconds": self.cpu_seconds,
            "server_cpu_ms_per_job": self.server_cpu_ms_per_job,
            "database_cpu_ms_per_job": self.database_cpu_ms_per_job,
            "large_payload": self.large.map(|l| json!({
                "payload_bytes": l.payload_bytes,
                "store_growth_bytes": l.store_growth_bytes,
                "store_bytes_per_job_beyond_twice_the_payload": l.store_bytes_per_job,
                "rss_growth_mib": l.rss_growth_mib,
                "exact_deliveries": l.exact,
            })),
        })
    }
}

/// `key=value` pairs of a JSON object, on one line.
pub fn compact(settings: &Value) -> String {
    let Some(object) = settings.as_object() else {
        return settings.to_string();
    };
    let pairs: Vec<String> = object
        .iter()
        .map(|(key, value)| {
            format!(
                "{key}={}",
                value.as_str().map_or(value.to_string(), str::to_owned)
            )
        })
        .collect();
    pairs.join(" ")
}

/// The run's flags that shape its figures, as a JSON object.
pub fn settings(args: &Args) -> Value {
    let mut settings = json!({
        "scenario": format!("{:?}", args.scenario).to_lowercase(),
        "backend": format!("{:?}", args.backend).to_lowercase(),
        "instances": args.instances,
        "concurrency": args.concurrency,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
    });
    match args.scenario {
        Scenario::Steady => {
            settings["rate"] = json!(args.rate);
            settings["seconds"] = json!(args.seconds);
            settings["subscribers"] = json!(args.subscribers);
            settings["destinations"] = json!(args.destinations());
        }
        Scenario::Fanout | Scenario::Incident | Scenario::OnCall | Scenario::Console => {
            settings["subscribers"] = json!(args.jobs());
            settings["slow"] = json!(args.slow);
            settings["slow_ms"] = json!(args.slow_ms());
            if args.payload_bytes > 0 {
                settings["payload_bytes"] = json!(args.payload_bytes);
            }
            if args.scenario == Scenario::Incident {
                settings["fanouts"] = json!(super::incident::fanouts(args));
                settings["shared_host"] = json!(args.shared_host);
                settings["ttl_ms"] = json!(args.ttl_ms());
                settings["server_flags"] = json!(args.server_flags());
                if args.shared_host {
                    settings["failing"] = json!(args.failing);
                    settings["gone"] = json!(args.gone);
                }
            }
            if args.scenario == Scenario::OnCall {
                settings["failing"] = json!(args.failing);
                settings["gone"] = json!(args.gone);
                settings["events"] = json!(super::on_call::EVENTS);
                settings["replay_rate"] = json!(args.replay_rate);
            }
        }
        Scenario::Burst | Scenario::Backlog => {
            settings["jobs"] = json!(args.jobs());
            settings["subscribers"] = json!(args.subscribers);
            settings["destinations"] = json!(args.destinations());
        }
        Scenario::Ceilings | Scenario::Chaos => settings["jobs"] = json!(args.jobs()),
    }
    settings
}

/// Prints a run's `text`, writes its `json` to `--json` when given, and fails when the
/// run broke an invariant (`failure`).
pub fn publish(
    args: &Args,
    text: String,
    json: Value,
    failure: Option<String>,
) -> anyhow::Result<()> {
    println!("{text}");
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)?;
        println!("JSON written to {}", path.display());
    }
    match failure {
        Some(failure) => anyhow::bail!("the run failed: {failure}"),
        None => Ok(()),
    }
}
