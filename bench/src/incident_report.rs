//! The figures of `--scenario incident`: per fan-out, the healthy subscribers' lateness
//! in the incident and in the control and how far apart their p99s are; per run, the
//! deliveries, the slow destination's requests and the servers' usage. One text for
//! people, the same figures as JSON.

use std::collections::HashMap;

use comfy_table::Table;
use serde::Serialize;
use serde_json::{Value, json};

use super::args::Args;
use super::arrivals;
use super::incident::{Run, event_id};
use super::load::Created;
use super::receiver::Arrival;
use super::report::{compact, settings};
use super::stats::Spread;

/// Issue #14's target: on every fan-out, the healthy p99 at most this many milliseconds
/// above the control's (below it is no harm done, so it counts as within).
pub const TARGET_MS: f64 = 500.0;

/// One fan-out's healthy deliveries in one run.
#[derive(Debug, Clone, Serialize)]
pub struct Fanout {
    /// The event id.
    pub event_id: String,
    /// Healthy jobs the event created.
    pub jobs: usize,
    /// Of those, how many arrived.
    pub delivered: usize,
    /// Arrival minus due time of each job's first request, in milliseconds.
    pub lateness_ms: Spread,
}

/// The healthy destination's requests in one run, per fan-out.
#[derive(Debug, Clone, Serialize)]
pub struct Deliveries {
    /// One entry per event of `events`, in that order.
    pub fanouts: Vec<Fanout>,
    /// Requests for a job that had already arrived.
    pub duplicates: usize,
    /// Requests that match no job.
    pub unexpected: usize,
}

impl Deliveries {
    /// Matches `arrivals` to `jobs` by subscriber and event id (the `webhook-id`); a
    /// job's lateness is its first request's arrival minus its due time.
    pub fn of(events: &[String], jobs: &[Created], arrivals: &[Arrival]) -> Self {
        let matched = arrivals::match_to_jobs(jobs, arrivals);
        let (duplicates, unexpected) = (matched.duplicates, matched.unexpected);
        let mut lateness: HashMap<&str, Vec<f64>> = HashMap::new();
        for (arrival, late) in matched.first {
            lateness
                .entry(arrival.webhook_id.as_str())
                .or_default()
                .push(late);
        }
        let fanouts = events
            .iter()
            .map(|event| {
                let samples = lateness.remove(event.as_str()).unwrap_or_default();
                Fanout {
                    event_id: event.clone(),
                    jobs: jobs.iter().filter(|job| &job.event_id == event).count(),
                    delivered: samples.len(),
                    lateness_ms: Spread::of(samples),
                }
            })
            .collect();
        Deliveries {
            fanouts,
            duplicates,
            unexpected,
        }
    }

    /// Healthy jobs, and how many of them arrived.
    fn totals(&self) -> (usize, usize) {
        self.fanouts.iter().fold((0, 0), |(jobs, delivered), f| {
            (jobs + f.jobs, delivered + f.delivered)
        })
    }
}

/// One fan-out of the incident against the same fan-out of the control.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The event id.
    pub event_id: String,
    /// The healthy lateness in the incident, in milliseconds.
    pub incident_ms: Spread,
    /// The healthy lateness in the control, in milliseconds.
    pub control_ms: Spread,
    /// Incident p99 minus control p99, in milliseconds.
    pub p99_difference_ms: f64,
    /// Whether that difference is at most [`TARGET_MS`].
    pub within_target: bool,
}

/// Pairs the fan-outs of the two runs by position (both list the same events).
pub fn compare(incident: &Deliveries, control: &Deliveries) -> Vec<Comparison> {
    incident
        .fanouts
        .iter()
        .zip(&control.fanouts)
        .map(|(incident, control)| {
            let difference = incident.lateness_ms.p99 - control.lateness_ms.p99;
            Comparison {
                event_id: incident.event_id.clone(),
                incident_ms: incident.lateness_ms,
                control_ms: control.lateness_ms,
                p99_difference_ms: difference,
                within_target: difference <= TARGET_MS,
            }
        })
        .collect()
}

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunFigures {
    /// Subscribers on the healthy destination.
    pub healthy_subscribers: u64,
    /// Subscribers that answer slowly.
    pub slow_subscribers: u64,
    /// Subscribers answering 500 (shared host only).
    pub failing_subscribers: u64,
    /// Subscribers answering 410 (shared host only).
    pub gone_subscribers: u64,
    /// Jobs the slow subscribers got.
    pub slow_jobs: usize,
    /// The healthy deliveries.
    pub healthy: Deliveries,
    /// Requests the slow destination got until the run stopped waiting.
    pub slow_received: usize,
    /// The most requests the slow destination had open at once until then.
    pub slow_peak_open: usize,
    /// Each fan-out's `POST /v1/events` latency, in milliseconds.
    pub post_latency_ms: Vec<f64>,
    /// Each server's peak resident set, in MiB.
    pub server_peak_rss_mib: Vec<f64>,
    /// Each server's CPU time, in seconds.
    pub server_cpu_seconds: Vec<f64>,
}

impl RunFigures {
    fn new(run: &Run) -> Self {
        let events: Vec<String> = (0..run.fanouts).map(event_id).collect();
        RunFigures {
            healthy_subscribers: run.healthy_subscribers,
            slow_subscribers: run.slow_subscribers,
            failing_subscribers: run.failing_subscribers,
            gone_subscribers: run.gone_subscribers,
            slow_jobs: run.slow_jobs,
            healthy: Deliveries::of(&events, &run.healthy_jobs, &run.healthy_arrivals),
            slow_received: run.slow_received,
            slow_peak_open: run.slow_peak_open,
            post_latency_ms: run.post_latency_ms.clone(),
            server_peak_rss_mib: run
                .usage
                .iter()
                .map(|u| u.peak_rss_kib as f64 / 1_024.0)
                .collect(),
            server_cpu_seconds: run.usage.iter().map(|u| u.cpu_seconds).collect(),
        }
    }

    /// Why the run broke an invariant, if it did.
    fn failure(&self) -> Option<String> {
        let (jobs, delivered) = self.healthy.totals();
        if self.healthy.duplicates > 0 || self.healthy.unexpected > 0 || delivered != jobs {
            return Some(format!(
                "{delivered} of {jobs} healthy jobs delivered, {} duplicates, {} unexpected \
                 requests",
                self.healthy.duplicates, self.healthy.unexpected
            ));
        }
        None
    }
}

/// The incident and its control, side by side.
pub struct IncidentReport {
    settings: Value,
    incident: RunFigures,
    control: RunFigures,
    fanouts: Vec<Comparison>,
}

impl IncidentReport {
    /// Computes the figures of both runs.
    pub fn new(args: &Args, incident: &Run, control: &Run) -> Self {
        let (incident, control) = (RunFigures::new(incident), RunFigures::new(control));
        let fanouts = compare(&incident.healthy, &control.healthy);
        IncidentReport {
            settings: settings(args),
            incident,
            control,
            fanouts,
        }
    }

    /// Whether every fan-out's healthy p99 is at most [`TARGET_MS`] above the control's.
    fn target_met(&self) -> bool {
        !self.fanouts.is_empty() && self.fanouts.iter().all(|f| f.within_target)
    }

    /// Why a run broke an invariant, if one did.
    pub fn failure(&self) -> Option<String> {
        let incident = self.incident.failure().map(|f| format!("incident: {f}"));
        let control = self.control.failure().map(|f| format!("control: {f}"));
        match (incident, control) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        }
    }

    /// The settings, the per-run table, the per-fan-out table and the verdict.
    pub fn text(&self) -> String {
        let verdict = if self.target_met() { "met" } else { "missed" };
        format!(
            "settings: {}\n\n{}\n\n{}\n\ntarget (every fan-out's healthy p99 at most \
             {TARGET_MS:.0} ms above the control's): {verdict}",
            compact(&self.settings),
            self.runs_table(),
            self.fanouts_table(),
        )
    }

    fn runs_table(&self) -> Table {
        let mut table = Table::new();
        table.load_style(comfy_table::presets::ASCII_MARKDOWN);
        table.set_header(["figure", "incident", "control"]);
        let rows: [Row; 7] = [
            ("subscribers healthy + slow + failing + gone", |r| {
                format!(
                    "{} + {} + {} + {}",
                    r.healthy_subscribers,
                    r.slow_subscribers,
                    r.failing_subscribers,
                    r.gone_subscribers
                )
            }),
            ("healthy jobs delivered", |r| {
                let (jobs, delivered) = r.healthy.totals();
                format!("{delivered} of {jobs}")
            }),
            ("healthy duplicates / unexpected", |r| {
                format!("{} / {}", r.healthy.duplicates, r.healthy.unexpected)
            }),
            ("fan-out POST latency ms (each)", |r| {
                list(&r.post_latency_ms, 0)
            }),
            (
                "unwell jobs / slow requests / most open (slow or shared host)",
                |r| {
                    format!(
                        "{} / {} / {}",
                        r.slow_jobs, r.slow_received, r.slow_peak_open
                    )
                },
            ),
            ("server peak RSS MiB (per instance)", |r| {
                list(&r.server_peak_rss_mib, 1)
            }),
            ("server CPU seconds (per instance)", |r| {
                list(&r.server_cpu_seconds, 2)
            }),
        ];
        for (name, value) in rows {
            table.add_row([name.to_owned(), value(&self.incident), value(&self.control)]);
        }
        table
    }

    fn fanouts_table(&self) -> Table {
        let spread = |s: &Spread| format!("{:.0} / {:.0} / {:.0}", s.p50, s.p99, s.max);
        let mut table = Table::new();
        table.load_style(comfy_table::presets::ASCII_MARKDOWN);
        table.set_header([
            "fan-out",
            "incident healthy lateness ms p50 / p99 / max",
            "control p50 / p99 / max",
            "p99 difference ms",
            "within target",
        ]);
        for fanout in &self.fanouts {
            table.add_row([
                fanout.event_id.clone(),
                spread(&fanout.incident_ms),
                spread(&fanout.control_ms),
                format!("{:+.0}", fanout.p99_difference_ms),
                if fanout.within_target { "yes" } else { "no" }.to_owned(),
            ]);
        }
        table
    }

    /// The figures as JSON.
    pub fn json(&self) -> Value {
        json!({
            "settings": self.settings,
            "target_ms": TARGET_MS,
            "target_met": self.target_met(),
            "fanouts": self.fanouts,
            "incident": self.incident,
            "control": self.control,
        })
    }
}

/// A row of the per-run table: its name and how to write a run's value.
type Row = (&'static str, fn(&RunFigures) -> String);

/// `values` with `digits` decimals, joined by ` + `.
fn list(values: &[f64], digits: usize) -> String {
    let each: Vec<String> = values.iter().map(|v| format!("{v:.digits$}")).collect();
    each.join(" + ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(subscriber: &str, event_id: &str, due_ms: i64) -> Created {
        Created {
            subscriber: subscriber.to_owned(),
            event_id: event_id.to_owned(),
            due_ms,
            accepted_ms: due_ms,
            latency_ms: 0.0,
        }
    }

    fn arrival(subscriber: &str, event_id: &str, at_ms: i64) -> Arrival {
        Arrival {
            subscriber: subscriber.to_owned(),
            webhook_id: event_id.to_owned(),
            at_ms,
            body_hash: 0,
        }
    }

    fn events() -> Vec<String> {
        vec!["e1".to_owned(), "e2".to_owned()]
    }

    #[test]
    fn lateness_is_grouped_per_event_from_each_jobs_first_request() {
        let jobs = [
            job("a", "e1", 1_000),
            job("b", "e1", 1_000),
            job("a", "e2", 2_000),
            job("b", "e2", 2_000),
        ];
        let arrivals = [
            arrival("a", "e1", 1_010),
            arrival("b", "e1", 1_030),
            arrival("a", "e2", 2_500),
            arrival("a", "e1", 9_000),
            arrival("c", "e1", 1_000),
        ];
        let deliveries = Deliveries::of(&events(), &jobs, &arrivals);
        let first = &deliveries.fanouts[0];
        assert_eq!(
            (first.event_id.as_str(), first.jobs, first.delivered),
            ("e1", 2, 2)
        );
        let late = first.lateness_ms;
        assert_eq!((late.p50, late.p99, late.max), (10.0, 30.0, 30.0));
        let second = &deliveries.fanouts[1];
        assert_eq!((second.jobs, second.delivered), (2, 1));
        assert_eq!(second.lateness_ms.max, 500.0);
        assert_eq!((deliveries.duplicates, deliveries.unexpected), (1, 1));
        assert_eq!(deliveries.totals(), (4, 3));
    }

    #[test]
    fn an_event_without_arrivals_has_an_empty_spread() {
        let jobs = [job("a", "e1", 0), job("a", "e2", 0)];
        let deliveries = Deliveries::of(&events(), &jobs, &[arrival("a", "e1", 5)]);
        assert_eq!(deliveries.fanouts[1].delivered, 0);
        assert_eq!(deliveries.fanouts[1].lateness_ms.count, 0);
    }

    #[test]
    fn comparison_takes_incident_minus_control_p99_against_the_target() {
        let fanouts = |lateness: [i64; 2]| {
            let jobs = [job("a", "e1", 0), job("a", "e2", 0)];
            let arrivals = [
                arrival("a", "e1", lateness[0]),
                arrival("a", "e2", lateness[1]),
            ];
            Deliveries::of(&events(), &jobs, &arrivals)
        };
        let compared = compare(&fanouts([900, 4_900]), &fanouts([400, 1_400]));
        assert_eq!(compared[0].p99_difference_ms, 500.0);
        assert!(compared[0].within_target);
        assert_eq!(compared[1].p99_difference_ms, 3_500.0);
        assert!(!compared[1].within_target);
        let faster = compare(&fanouts([0, 501]), &fanouts([600, 0]));
        assert_eq!(faster[0].p99_difference_ms, -600.0);
        assert!(faster[0].within_target);
        assert!(!faster[1].within_target);
    }

    #[test]
    fn a_missing_healthy_delivery_is_a_failure() {
        let figures = |arrivals: &[Arrival]| RunFigures {
            healthy_subscribers: 1,
            slow_subscribers: 0,
            failing_subscribers: 0,
            gone_subscribers: 0,
            slow_jobs: 0,
            healthy: Deliveries::of(&events(), &[job("a", "e1", 0)], arrivals),
            slow_received: 0,
            slow_peak_open: 0,
            post_latency_ms: Vec::new(),
            server_peak_rss_mib: Vec::new(),
            server_cpu_seconds: Vec::new(),
        };
        assert!(figures(&[]).failure().is_some());
        assert!(figures(&[arrival("a", "e1", 1)]).failure().is_none());
        let twice = [arrival("a", "e1", 1), arrival("a", "e1", 2)];
        assert!(figures(&twice).failure().is_some());
    }
}
