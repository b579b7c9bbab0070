//! The audit's result: what the run did (counts), what it must not have done
//! (violations, each with the job's history) and what the faults excused; printed for a
//! person and as JSON for `--json`.

use std::collections::BTreeMap;

use serde::Serialize;
use uuid::Uuid;

use super::history::{FaultKind, FaultWindow, History, Ms, OpKind, OpOutcome};
use super::store_view::StoreView;

/// Violations printed in full; the rest are counted.
const PRINTED: usize = 20;
/// The note of an attempt whose request was resent on a fresh connection (DESIGN §3).
pub const RESENT: &str = "resent once on a fresh connection";

/// The answers of one kind of producer operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OpCounts {
    /// 2xx.
    pub ok: usize,
    /// 4xx, by status.
    pub client_error: BTreeMap<u16, usize>,
    /// 503 (with or without `Retry-After`).
    pub unavailable: usize,
    /// Any other status (another 5xx, 1xx, 3xx).
    pub other: usize,
    /// No answer (refused, reset, timed out).
    pub no_answer: usize,
}

/// What the run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Distinct job ids in 2xx answers to creates and fan-outs.
    pub jobs_acknowledged: usize,
    /// Jobs in the store.
    pub jobs_stored: usize,
    /// Stored jobs per final state.
    pub jobs_by_state: BTreeMap<String, usize>,
    /// Requests the receivers saw.
    pub requests: usize,
    /// Of those, answered 2xx.
    pub accepted: usize,
    /// Per job, accepted requests beyond the first, summed.
    pub duplicates: usize,
    /// Attempts whose request was resent on a fresh connection.
    pub resends: usize,
    /// Attempts whose outcome is `unknown`.
    pub unknown_attempts: usize,
    /// Producer operations per kind (`create`, `fan_out`, …) and answer.
    pub ops: BTreeMap<String, OpCounts>,
    /// Faults per kind, every kind (zeros included).
    pub faults: BTreeMap<String, usize>,
    /// Requests a fault excused, per fault kind, every kind.
    pub excused: BTreeMap<String, usize>,
    /// When the load began (Unix ms): fault windows print as seconds after it.
    pub load_started_ms: Ms,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The check's name (`lost`, `overlap`, …; see `audit`).
    pub check: &'static str,
    /// The job, when the check is about one stored job.
    pub job_id: Option<Uuid>,
    pub subscriber: Option<String>,
    pub event_id: Option<String>,
    /// The job's state in the store.
    pub state: Option<String>,
    /// What is wrong, in a sentence.
    pub detail: String,
    /// The job's compact history: attempt rows, receiver requests and producer ops,
    /// times relative to the job's creation.
    pub history: Vec<String>,
}

/// The audit's result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    pub counts: Counts,
    pub violations: Vec<Violation>,
    /// Each fault window that excused requests, with how many (distinct) requests.
    pub excused: Vec<(FaultWindow, usize)>,
}

impl Verdict {
    /// Whether no check found a violation.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// Adds a violation that no job carries: an instance that exited by itself, or
    /// one that did not stop on SIGTERM at the end (check `process`).
    pub fn process_failure(&mut self, detail: String) {
        self.violations.push(Violation {
            check: "process",
            job_id: None,
            subscriber: None,
            event_id: None,
            state: None,
            detail,
            history: Vec::new(),
        });
    }

    /// Prints [`Verdict::text`] to standard output.
    pub fn print(&self) {
        print!("{}", self.text());
    }

    /// A readable summary: the counts, the excuses, and each violation with its
    /// history (the first 20 in full, then how many more).
    pub fn text(&self) -> String {
        let c = &self.counts;
        let mut out = String::new();
        let mut line = |text: String| {
            out.push_str(&text);
            out.push('\n');
        };
        line(format!(
            "chaos audit: {}",
            if self.passed() {
                "passed".to_owned()
            } else {
                format!("FAILED, {} violation(s)", self.violations.len())
            }
        ));
        line(format!(
            "  jobs: {} acknowledged, {} stored ({})",
            c.jobs_acknowledged,
            c.jobs_stored,
            join(c.jobs_by_state.iter().map(|(k, v)| format!("{k} {v}")))
        ));
        line(format!(
            "  requests: {} seen, {} answered 2xx, {} duplicate(s) (2xx beyond a job's first; \
             allowed per job up to its attempts of unknown outcome plus its resends: in all \
             {} resend(s), {} attempt(s) recorded unknown)",
            c.requests, c.accepted, c.duplicates, c.resends, c.unknown_attempts
        ));
        for (kind, n) in &c.ops {
            line(format!(
                "  op {kind:<10} 2xx {} 4xx {}{} 503 {} other {} no answer {}",
                n.ok,
                n.client_error.values().sum::<usize>(),
                if n.client_error.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({})",
                        join(
                            n.client_error
                                .iter()
                                .map(|(status, k)| format!("{status} ×{k}"))
                        )
                    )
                },
                n.unavailable,
                n.other,
                n.no_answer
            ));
        }
        line(format!(
            "  faults: {}",
            join(c.faults.iter().map(|(k, v)| format!("{k} {v}")))
        ));
        line(format!(
            "  excused requests: {}",
            join(c.excused.iter().map(|(k, v)| format!("{k} {v}")))
        ));
        for (fault, n) in &self.excused {
            let instance = fault
                .instance
                .map_or(String::new(), |i| format!(" instance {i}"));
            let at = |ms: Ms| (ms - c.load_started_ms) as f64 / 1000.0;
            line(format!(
                "    {}{instance} at {:.1}–{:.1} s: {n} request(s)",
                fault.kind.name(),
                at(fault.start_ms),
                at(fault.end_ms)
            ));
        }
        let mut by_check: BTreeMap<&str, usize> = BTreeMap::new();
        for violation in &self.violations {
            *by_check.entry(violation.check).or_default() += 1;
        }
        if !by_check.is_empty() {
            line(format!(
                "  violations: {}",
                join(by_check.iter().map(|(k, v)| format!("{k} {v}")))
            ));
        }
        for v in self.violations.iter().take(PRINTED) {
            let id = v.job_id.map_or("-".to_owned(), |id| id.to_string());
            line(format!(
                "  [{}] job {id} subscriber {} event {} state {}: {}",
                v.check,
                v.subscriber.as_deref().unwrap_or("-"),
                v.event_id.as_deref().unwrap_or("-"),
                v.state.as_deref().unwrap_or("-"),
                v.detail
            ));
            for row in &v.history {
                line(format!("      {row}"));
            }
        }
        if self.violations.len() > PRINTED {
            line(format!(
                "  … and {} more violation(s)",
                self.violations.len() - PRINTED
            ));
        }
        out
    }

    /// The verdict as JSON: `{counts, violations, excused: [[fault, n], …]}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

fn join(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

/// An operation's kind as counted.
pub fn op_name(kind: &OpKind) -> &'static str {
    match kind {
        OpKind::Create { .. } => "create",
        OpKind::FanOut { .. } => "fan_out",
        OpKind::Cancel { .. } => "cancel",
        OpKind::Reschedule { .. } => "reschedule",
        OpKind::Replay { .. } => "replay",
        OpKind::Resume { .. } => "resume",
    }
}

impl Counts {
    /// The counts of a run; `duplicates` and `excused` (fault windows of
    /// `history.faults` with their excused requests) come from the audit.
    pub fn of(
        history: &History,
        store: &StoreView,
        duplicates: usize,
        excused: &[(FaultWindow, usize)],
    ) -> Counts {
        let mut acknowledged = std::collections::HashSet::new();
        let mut ops: BTreeMap<String, OpCounts> = BTreeMap::new();
        for op in &history.ops {
            if op.acknowledged() {
                match &op.kind {
                    OpKind::Create {
                        job_id: Some(id), ..
                    } => {
                        acknowledged.insert(*id);
                    }
                    OpKind::FanOut { job_ids, .. } => acknowledged.extend(job_ids.iter()),
                    _ => {}
                }
            }
            let n = ops.entry(op_name(&op.kind).to_owned()).or_default();
            match op.outcome {
                OpOutcome::Status { status, .. } => match status {
                    200..=299 => n.ok += 1,
                    400..=499 => *n.client_error.entry(status).or_default() += 1,
                    503 => n.unavailable += 1,
                    _ => n.other += 1,
                },
                OpOutcome::NoAnswer { .. } => n.no_answer += 1,
            }
        }
        let mut jobs_by_state = BTreeMap::new();
        for job in &store.jobs {
            *jobs_by_state.entry(job.state.clone()).or_default() += 1;
        }
        let rows = || store.attempts.values().flatten();
        let kinds = |count: &dyn Fn(FaultKind) -> usize| {
            FaultKind::ALL
                .iter()
                .map(|&kind| (kind.name().to_owned(), count(kind)))
                .collect::<BTreeMap<_, _>>()
        };
        Counts {
            jobs_acknowledged: acknowledged.len(),
            jobs_stored: store.jobs.len(),
            jobs_by_state,
            requests: history.requests.len(),
            accepted: history.requests.iter().filter(|r| r.accepted()).count(),
            duplicates,
            resends: rows()
                .filter(|a| a.reason.as_deref().is_some_and(|r| r.contains(RESENT)))
                .count(),
            unknown_attempts: rows().filter(|a| a.outcome == "unknown").count(),
            ops,
            faults: kinds(&|kind| history.faults.iter().filter(|f| f.kind == kind).count()),
            excused: kinds(&|kind| {
                excused
                    .iter()
                    .filter(|(f, _)| f.kind == kind)
                    .map(|(_, n)| n)
                    .sum()
            }),
            load_started_ms: history.load_started_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_prints_its_violations_and_counts_the_rest() {
        let violation = |n: usize| Violation {
            check: "lost",
            job_id: None,
            subscriber: Some(format!("fast-{n}")),
            event_id: Some("e".to_owned()),
            state: None,
            detail: "acknowledged but not stored".to_owned(),
            history: vec!["op create +0..+3 ms instance 0 → 201".to_owned()],
        };
        let verdict = Verdict {
            counts: Counts::of(&History::default(), &StoreView::default(), 0, &[]),
            violations: (0..25).map(violation).collect(),
            excused: Vec::new(),
        };
        assert!(!verdict.passed());
        let text = verdict.text();
        assert!(text.contains("FAILED, 25 violation(s)"), "{text}");
        assert!(
            text.contains("fast-19") && !text.contains("fast-20"),
            "{text}"
        );
        assert!(text.contains("and 5 more"), "{text}");
        assert_eq!(verdict.counts.faults.len(), FaultKind::ALL.len());
        let json = verdict.json();
        assert_eq!(json["violations"].as_array().map(Vec::len), Some(25));
        assert_eq!(json["counts"]["faults"]["sigstop"], 0);
    }
}
