//! The audit: a pure function of the run's [`History`] and the drained store's
//! [`StoreView`] that judges every job (the checks are in `audit_checks.rs`). A job is
//! known at the receiver by (subscriber from the path, `webhook-id` = event id).
//!
//! The one excuse is a SIGSTOP: a stopped process's request may arrive after its
//! lease was taken over, so a request that starts (or, for `overlap`, is open) during a
//! SIGSTOP window or within `after_stop_ms` after it is counted against that window
//! instead of being a violation.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::history::{FaultKind, FaultWindow, History, Ms, OpKind, OpOutcome, ReceiverKind};
use super::store_view::{StoreView, StoredAttempt, StoredJob};
use super::verdict::{Counts, Verdict, Violation, op_name};

/// The audit's allowances.
#[derive(Debug, Clone, Copy)]
pub struct AuditSettings {
    /// Slack for one machine's scheduling between the server's clock read and the
    /// receiver's (ms).
    pub tolerance_ms: i64,
    /// How long two requests of one job may seem open at once (ms): the receiver
    /// notices a sender's close a moment after it happens. Far below the least
    /// backoff, so a retry that overlapped its predecessor is still caught.
    pub overlap_ms: i64,
    /// How long after a SIGSTOP window's end (SIGCONT) a stopped process's request may
    /// still arrive (ms).
    pub after_stop_ms: i64,
    /// When the last worker stopped (the store is read after it, with no worker to
    /// claim what comes due).
    pub workers_stopped_ms: Ms,
    /// How long a due job may wait for a claim while workers run (ms): the worker's
    /// 1 s poll fallback and a claim.
    pub claim_slack_ms: i64,
    /// How long after a PostgreSQL restart window a 503 is still expected (ms).
    pub after_db_ms: i64,
    /// How long after a fault (of any kind but the skewed clock, which lasts the
    /// whole run) a due job may wait without an attempt (ms): `starved`.
    pub quiet_after_fault_ms: i64,
    /// The receiver kind of a subscriber id (shown in the histories).
    pub kind_of: fn(&str) -> Option<ReceiverKind>,
}

/// One stored job and what the run recorded about it.
pub(super) struct Case<'a> {
    pub job: &'a StoredJob,
    /// Its attempt rows, oldest first (empty when none were read).
    pub attempts: &'a [StoredAttempt],
    /// Indices in `history.requests` of its requests, by start.
    pub requests: Vec<usize>,
    /// Indices in `history.ops` of the ops on it (creates and fan-outs of its key,
    /// cancels and reschedules of its id, replays of its subscriber), by sending time.
    pub ops: Vec<usize>,
    /// When it was created (its UUIDv7's instant; else its first op's sending).
    pub created_ms: Ms,
}

/// The audit's working state: its inputs and what it found.
pub(super) struct Audit<'a> {
    pub history: &'a History,
    pub store: &'a StoreView,
    pub settings: &'a AuditSettings,
    pub violations: Vec<Violation>,
    /// Per fault window (index in `history.faults`), the requests it excused.
    pub excused: BTreeMap<usize, BTreeSet<usize>>,
    /// Requests of each (subscriber, event id), by start.
    pub requests_of: HashMap<(&'a str, &'a str), Vec<usize>>,
    /// Create and fan-out ops of each (subscriber, event id).
    pub creates_of: HashMap<(&'a str, &'a str), Vec<usize>>,
}

/// Judges the run: every check of `audit_checks.rs` over every job and op, with the
/// counts of [`Counts::of`].
pub fn audit(history: &History, store: &StoreView, settings: &AuditSettings) -> Verdict {
    let mut audit = Audit::new(history, store, settings);
    let cases = audit.cases();
    audit.producer_checks();
    let mut duplicates = 0;
    for case in &cases {
        duplicates += audit.job_checks(case);
    }
    audit.gauges();
    let excused: Vec<(FaultWindow, usize)> = audit
        .excused
        .iter()
        .map(|(&window, requests)| (history.faults[window].clone(), requests.len()))
        .collect();
    Verdict {
        counts: Counts::of(history, store, duplicates, &excused),
        violations: audit.violations,
        excused,
    }
}

impl<'a> Audit<'a> {
    fn new(history: &'a History, store: &'a StoreView, settings: &'a AuditSettings) -> Self {
        let mut requests_of: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for (i, request) in history.requests.iter().enumerate() {
            requests_of
                .entry((&request.subscriber, &request.webhook_id))
                .or_default()
                .push(i);
        }
        for list in requests_of.values_mut() {
            list.sort_by_key(|&i| history.requests[i].started_ms);
        }
        let mut creates_of: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for (i, op) in history.ops.iter().enumerate() {
            match &op.kind {
                OpKind::Create {
                    subscriber,
                    event_id,
                    ..
                } => creates_of
                    .entry((subscriber, event_id))
                    .or_default()
                    .push(i),
                OpKind::FanOut {
                    event_id,
                    subscribers,
                    ..
                } => {
                    for subscriber in subscribers {
                        creates_of
                            .entry((subscriber, event_id))
                            .or_default()
                            .push(i);
                    }
                }
                _ => {}
            }
        }
        Audit {
            history,
            store,
            settings,
            violations: Vec::new(),
            excused: BTreeMap::new(),
            requests_of,
            creates_of,
        }
    }

    /// Every stored job with its requests and ops.
    fn cases(&self) -> Vec<Case<'a>> {
        let mut by_id: HashMap<Uuid, Vec<usize>> = HashMap::new();
        let mut replays: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, op) in self.history.ops.iter().enumerate() {
            match &op.kind {
                OpKind::Cancel { job_id } | OpKind::Reschedule { job_id, .. } => {
                    by_id.entry(*job_id).or_default().push(i);
                }
                OpKind::Replay { subscribers, .. } => {
                    for subscriber in subscribers {
                        replays.entry(subscriber).or_default().push(i);
                    }
                }
                _ => {}
            }
        }
        self.store
            .jobs
            .iter()
            .map(|job| {
                let key = (job.subscriber_id.as_str(), job.event_id.as_str());
                let mut ops: Vec<usize> = [
                    self.creates_of.get(&key),
                    by_id.get(&job.id),
                    replays.get(job.subscriber_id.as_str()),
                ]
                .into_iter()
                .flatten()
                .flatten()
                .copied()
                .collect();
                ops.sort_by_key(|&i| (self.history.ops[i].sent_ms, i));
                let created_ms = uuid_ms(&job.id)
                    .or_else(|| ops.first().map(|&i| self.history.ops[i].sent_ms))
                    .unwrap_or(job.deliver_at_ms);
                Case {
                    job,
                    attempts: self.store.attempts.get(&job.id).map_or(&[], Vec::as_slice),
                    requests: self.requests_of.get(&key).cloned().unwrap_or_default(),
                    ops,
                    created_ms,
                }
            })
            .collect()
    }

    /// The SIGSTOP window (index in `history.faults`) that covers `from..=to`
    /// extended by `after_stop_ms` and stopped the process of one of `case`'s attempts
    /// started before the window ended (its `lease_owner` names the pid), if any.
    pub fn stop_window(&self, case: &Case<'_>, from: Ms, to: Ms) -> Option<usize> {
        self.history.faults.iter().position(|fault| {
            fault.kind == FaultKind::Stop
                && fault.start_ms <= to
                && from <= fault.end_ms + self.settings.after_stop_ms
                && fault.pid.is_none_or(|pid| {
                    case.attempts.iter().any(|attempt| {
                        attempt.started_at_ms <= fault.end_ms && owner_pid(attempt) == Some(pid)
                    })
                })
        })
    }

    /// Excuses request `request` of `case` by the SIGSTOP window over `from..=to`;
    /// false when there is none (a violation then).
    pub fn excuse(&mut self, case: &Case<'_>, request: usize, from: Ms, to: Ms) -> bool {
        match self.stop_window(case, from, to) {
            Some(window) => {
                self.excused.entry(window).or_default().insert(request);
                true
            }
            None => false,
        }
    }

    /// Records a violation of `check` on a stored job, with its history.
    pub fn job_violation(&mut self, check: &'static str, case: &Case<'_>, detail: String) {
        let history = self.lines(case);
        self.violations.push(Violation {
            check,
            job_id: Some(case.job.id),
            subscriber: Some(case.job.subscriber_id.clone()),
            event_id: Some(case.job.event_id.clone()),
            state: Some(case.job.state.clone()),
            detail,
            history,
        });
    }

    /// Records a violation that names no stored job.
    pub fn other_violation(
        &mut self,
        check: &'static str,
        key: Option<(&str, &str)>,
        detail: String,
        history: Vec<String>,
    ) {
        self.violations.push(Violation {
            check,
            job_id: None,
            subscriber: key.map(|(s, _)| s.to_owned()),
            event_id: key.map(|(_, e)| e.to_owned()),
            state: None,
            detail,
            history,
        });
    }

    /// A job's compact history, times relative to its creation.
    fn lines(&self, case: &Case<'_>) -> Vec<String> {
        let at = |ms: Ms| format!("{:+}", ms - case.created_ms);
        let kind = (self.settings.kind_of)(&case.job.subscriber_id).map_or("?", |k| k.name());
        let job = case.job;
        let mut lines = vec![format!(
            "job: {kind} receiver, created {:.3} s into the load, {} attempt(s), max {:?}, \
             deliver_at {} deadline {} ms{}",
            (case.created_ms - self.history.load_started_ms) as f64 / 1000.0,
            job.attempts,
            job.max_attempts,
            at(job.deliver_at_ms),
            at(job.deadline_ms),
            job.dead_reason.as_ref().map_or(String::new(), |r| format!(
                ", dead ({r}) at {}",
                at(job.dead_at_ms.unwrap_or(0))
            ))
        )];
        for a in case.attempts {
            lines.push(format!(
                "attempt #{} {}..{} ms by {} {}{}{}{}",
                a.number,
                at(a.started_at_ms),
                a.finished_at_ms.map_or("open".to_owned(), at),
                a.lease_owner.as_deref().unwrap_or("?"),
                a.outcome,
                a.status.map_or(String::new(), |s| format!(" {s}")),
                a.reason
                    .as_ref()
                    .map_or(String::new(), |r| format!(" \"{r}\"")),
                if a.possible_duplicate {
                    " (possible duplicate)"
                } else {
                    ""
                }
            ));
        }
        for &i in &case.requests {
            let r = &self.history.requests[i];
            let end = match r.ended {
                Some((ms, ending)) => format!("{} ms {ending:?}", at(ms)),
                None => "open".to_owned(),
            };
            lines.push(format!("request {}..{end}", at(r.started_ms)));
        }
        for &i in &case.ops {
            lines.push(op_line(&self.history.ops[i], case.created_ms));
        }
        lines
    }
}

/// One op as a history line, times relative to `zero`.
pub(super) fn op_line(op: &super::history::Op, zero: Ms) -> String {
    let answer = match &op.outcome {
        OpOutcome::Status {
            status,
            retry_after,
        } => format!("{status}{}", if *retry_after { " Retry-After" } else { "" }),
        OpOutcome::NoAnswer { error } => format!("no answer ({error})"),
    };
    format!(
        "op {} {:+}..{:+} ms instance {} → {answer}",
        op_name(&op.kind),
        op.sent_ms - zero,
        op.answered_ms - zero,
        op.instance
    )
}

/// The Unix ms of a UUIDv7.
fn uuid_ms(id: &Uuid) -> Option<Ms> {
    let (seconds, nanos) = id.get_timestamp()?.to_unix();
    Some(seconds as Ms * 1_000 + Ms::from(nanos / 1_000_000))
}

/// The process id in an attempt's `lease_owner` (`<host>:<pid>:<hex>`).
fn owner_pid(attempt: &StoredAttempt) -> Option<u32> {
    attempt
        .lease_owner
        .as_deref()?
        .rsplit(':')
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
