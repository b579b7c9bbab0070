//! The audit's checks, named as in its violations: on the producer's ops (`lost`,
//! `unasked`, `half_written`, `producer_5xx`, `producer_4xx`, `producer_unanswered`), on each job (`unsettled`,
//! `unexplained`, `not_received`, `after_cancel`, `after_deadline`, `overlap`,
//! `duplicates`, `unrecorded`, `early`) and on the gauges (`gauges`).

use std::collections::{BTreeMap, HashSet};

use super::audit::{Audit, Case, op_line};
use super::history::{FaultKind, Ms, Op, OpKind, OpOutcome, ReceiverKind};
use super::store_view::StoredAttempt;
use super::verdict::RESENT;

/// The states that stay.
const TERMINAL: [&str; 3] = ["delivered", "dead", "cancelled"];
/// Waiting reasons that hold a due job legitimately at the end of the run.
const HELD: [&str; 4] = [
    "subscriber_paused",
    "destination_paused",
    "destination_circuit_open",
    "destination_at_limit",
];

impl Audit<'_> {
    /// `lost`, `unasked`, `half_written`, `producer_5xx`, and `unrecorded` for
    /// requests of no stored job.
    pub(super) fn producer_checks(&mut self) {
        let history = self.history;
        let stored: HashSet<_> = self.store.jobs.iter().map(|job| job.id).collect();
        let keys: HashSet<(&str, &str)> = self
            .store
            .jobs
            .iter()
            .map(|job| (job.subscriber_id.as_str(), job.event_id.as_str()))
            .collect();
        for (i, op) in history.ops.iter().enumerate() {
            let line = || vec![op_line(op, op.sent_ms)];
            match &op.kind {
                OpKind::Create {
                    subscriber,
                    event_id,
                    job_id: Some(id),
                    ..
                } if op.acknowledged() && !stored.contains(id) => self.other_violation(
                    "lost",
                    Some((subscriber, event_id)),
                    format!("job {id} was acknowledged but is not in the store"),
                    line(),
                ),
                OpKind::Create {
                    subscriber,
                    event_id,
                    job_id: None,
                    ..
                } if op.acknowledged() => self.other_violation(
                    "lost",
                    Some((subscriber, event_id)),
                    "a create was answered 2xx without a job id".to_owned(),
                    line(),
                ),
                OpKind::FanOut {
                    event_id,
                    subscribers,
                    job_ids,
                    ..
                } if op.acknowledged() => {
                    if job_ids.len() != subscribers.len() {
                        self.other_violation(
                            "lost",
                            None,
                            format!(
                                "a fan-out of event {event_id} to {} subscribers was answered \
                                 2xx with {} jobs",
                                subscribers.len(),
                                job_ids.len()
                            ),
                            line(),
                        );
                    }
                    for (subscriber, id) in subscribers.iter().zip(job_ids) {
                        if !stored.contains(id) {
                            self.other_violation(
                                "lost",
                                Some((subscriber, event_id)),
                                format!("job {id} was acknowledged but is not in the store"),
                                line(),
                            );
                        }
                    }
                }
                OpKind::FanOut {
                    event_id,
                    subscribers,
                    ..
                } => {
                    // Only the keys no other op asked for can tell.
                    let own: Vec<&String> = subscribers
                        .iter()
                        .filter(|s| self.creates_of[&(s.as_str(), event_id.as_str())].len() == 1)
                        .collect();
                    let written = own
                        .iter()
                        .filter(|s| keys.contains(&(s.as_str(), event_id.as_str())))
                        .count();
                    if written != 0 && written != own.len() {
                        self.other_violation(
                            "half_written",
                            None,
                            format!(
                                "an unacknowledged fan-out of event {event_id} left {written} of its {} jobs",
                                own.len()
                            ),
                            line(),
                        );
                    }
                }
                _ => {}
            }
            if let OpOutcome::Status {
                status,
                retry_after,
            } = op.outcome
                && status >= 500
            {
                let during_restart = history.faults.iter().any(|fault| {
                    fault.kind == FaultKind::PostgresRestart
                        && fault.start_ms <= op.answered_ms
                        && op.sent_ms <= fault.end_ms + self.settings.after_db_ms
                });
                if !(status == 503 && retry_after && during_restart) {
                    self.other_violation(
                        "producer_5xx",
                        None,
                        format!("op {i} answered {status} outside a PostgreSQL restart or without Retry-After"),
                        line(),
                    );
                }
            }
            if let OpOutcome::Status { status, .. } = op.outcome
                && (400..500).contains(&status)
                && !self.expected_4xx(op, status)
            {
                self.other_violation(
                    "producer_4xx",
                    None,
                    format!("op {i} answered {status}, which its request cannot have earned"),
                    line(),
                );
            }
            if let OpOutcome::NoAnswer { error } = &op.outcome
                && !self.may_go_unanswered(op)
            {
                self.other_violation(
                    "producer_unanswered",
                    None,
                    format!(
                        "op {i} got no answer ({error}) from instance {} while no fault hit it",
                        op.instance
                    ),
                    line(),
                );
            }
        }
        for job in &self.store.jobs {
            let key = (job.subscriber_id.as_str(), job.event_id.as_str());
            if !self.creates_of.contains_key(&key) {
                self.other_violation(
                    "unasked",
                    Some(key),
                    format!("stored job {} matches no create or fan-out", job.id),
                    Vec::new(),
                );
            }
        }
        let orphans: Vec<(String, String, usize)> = self
            .requests_of
            .iter()
            .filter(|(key, _)| !keys.contains(*key))
            .map(|((s, e), list)| (s.to_string(), e.to_string(), list.len()))
            .collect();
        for (subscriber, event, n) in orphans {
            self.other_violation(
                "unrecorded",
                Some((&subscriber, &event)),
                format!("{n} request(s) for a job the store does not have"),
                Vec::new(),
            );
        }
    }

    /// Whether the producer's well-formed `op` may be answered `status` (a 4xx):
    /// `409` for a cancel or reschedule of a job that moved on, or a replay while the
    /// running ones use the rate budget; `422` for a create, fan-out or reschedule
    /// whose deadline had passed by its answer (it waited that long in transit).
    /// Anything else (a `404` for a job the producer was given, a `401`, a `422` for a
    /// body the API should accept) is a fault.
    fn expected_4xx(&self, op: &Op, status: u16) -> bool {
        let expired = |deadline_ms: Ms| deadline_ms <= op.answered_ms + self.settings.tolerance_ms;
        match (&op.kind, status) {
            (OpKind::Cancel { .. } | OpKind::Replay { .. }, 409) => true,
            (OpKind::Reschedule { deadline_ms, .. }, 422) => expired(*deadline_ms),
            (OpKind::Reschedule { .. }, 409) => true,
            (OpKind::Create { deadline_ms, .. } | OpKind::FanOut { deadline_ms, .. }, 422) => {
                expired(*deadline_ms)
            }
            _ => false,
        }
    }

    /// Whether a fault explains `op` getting no answer: a kill, stop or SIGTERM of its
    /// instance open while it was out (until `after_stop_ms` after the window), or a
    /// PostgreSQL restart (until `after_db_ms` after it: a call waiting for a
    /// connection may outlast the producer's timeout).
    fn may_go_unanswered(&self, op: &Op) -> bool {
        self.history.faults.iter().any(|fault| {
            let after = match fault.kind {
                FaultKind::Kill | FaultKind::Stop | FaultKind::Term
                    if fault.instance == Some(op.instance) =>
                {
                    self.settings.after_stop_ms
                }
                FaultKind::PostgresRestart => self.settings.after_db_ms,
                _ => return false,
            };
            fault.start_ms <= op.answered_ms && op.sent_ms <= fault.end_ms + after
        })
    }

    /// Every check of one job; returns its duplicates (accepted requests beyond one).
    pub(super) fn job_checks(&mut self, case: &Case<'_>) -> usize {
        self.settled(case);
        self.explained(case);
        self.starved(case);
        self.timing(case);
        self.overlap(case);
        self.counted(case)
    }

    /// `unsettled`.
    fn settled(&mut self, case: &Case<'_>) {
        let job = case.job;
        // Due after the workers stopped (less the time a claim may take), or not yet
        // due: waiting, since no worker was left to claim it.
        let read_at = self.settings.workers_stopped_ms - self.settings.claim_slack_ms;
        let future = |at: Option<i64>| at.is_some_and(|at| at > read_at);
        let waiting = match job.state.as_str() {
            state if TERMINAL.contains(&state) => return,
            "scheduled" => future(Some(job.deliver_at_ms)),
            "retrying" => future(job.next_attempt_at_ms),
            _ => false,
        } || job
            .waiting_reason
            .as_deref()
            .is_some_and(|reason| HELD.contains(&reason));
        if !(waiting && job.deadline_ms > read_at + self.settings.tolerance_ms) {
            self.job_violation(
                "unsettled",
                case,
                format!("{} at the end, and nothing holds it", job.state),
            );
        }
    }

    /// `unexplained`.
    fn explained(&mut self, case: &Case<'_>) {
        let job = case.job;
        let tolerance = self.settings.tolerance_ms;
        let last = case.attempts.last();
        let last_is =
            |outcomes: &[&str]| last.is_some_and(|a| outcomes.contains(&a.outcome.as_str()));
        let mut problems = Vec::new();
        let contiguous = case
            .attempts
            .iter()
            .enumerate()
            .all(|(i, a)| a.number as usize == i + 1);
        if !contiguous || case.attempts.len() != job.attempts as usize {
            problems.push(format!(
                "attempt rows {:?} for {} attempt(s)",
                case.attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
                job.attempts
            ));
        }
        let explained = match (job.state.as_str(), job.dead_reason.as_deref()) {
            ("delivered", _) => (last_is(&["delivered"]) && job.delivered_at_ms.is_some())
                .then_some(())
                .ok_or("delivered without a delivered last attempt and delivered_at".to_owned()),
            ("dead", Some("max_attempts")) => (job.max_attempts == Some(job.attempts))
                .then_some(())
                .ok_or("dead (max_attempts) with attempts left".to_owned()),
            ("dead", Some("deadline_exceeded")) => {
                let at_deadline = job
                    .dead_at_ms
                    .is_some_and(|at| at >= job.deadline_ms - tolerance);
                (at_deadline || last_is(&["retryable", "unknown"]))
                    .then_some(())
                    .ok_or("dead (deadline_exceeded) before its deadline, after no failure".to_owned())
            }
            ("dead", Some("non_retryable_response")) => last_is(&["terminal"])
                .then_some(())
                .ok_or("dead (non_retryable_response) without a terminal last attempt".to_owned()),
            ("dead", reason) => Err(format!("dead for a reason that cannot happen here: {reason:?}")),
            ("cancelled", _) => case
                .ops
                .iter()
                .any(|&i| {
                    matches!(self.history.ops[i].kind, OpKind::Cancel { job_id } if job_id == job.id)
                })
                .then_some(())
                .ok_or("cancelled, but no cancel was sent".to_owned()),
            _ => Ok(()),
        };
        if let Err(problem) = explained {
            problems.push(problem);
        }
        // A cancel answered 200 is final: nothing (a late result, a reclaim) may move
        // the job out of `cancelled` afterwards (DESIGN §2.3).
        let cancelled_with_200 = case.ops.iter().any(|&i| {
            let op = &self.history.ops[i];
            op.acknowledged() && matches!(op.kind, OpKind::Cancel { job_id } if job_id == job.id)
        });
        if cancelled_with_200 && job.state != "cancelled" {
            problems.push(format!("{}, after a cancel answered 200", job.state));
        }
        if job.state != "in_flight" && case.attempts.iter().any(|a| a.outcome == "in_progress") {
            problems.push(format!("an attempt in_progress on a {} job", job.state));
        }
        if !problems.is_empty() {
            self.job_violation("unexplained", case, problems.join("; "));
        }
    }

    /// `starved`: a job of a fast receiver (always 2xx at once: no backlog, no circuit
    /// of its own making) dead at its deadline without a single attempt, though nothing
    /// held it (no pause or open circuit recorded at its death), it was due for longer
    /// than a claim takes, and no fault (nor its aftermath, `quiet_after_fault_ms`)
    /// touched its time between `deliver_at` and the deadline: a job the workers
    /// passed over.
    fn starved(&mut self, case: &Case<'_>) {
        let job = case.job;
        let settings = self.settings;
        let starved = job.state == "dead"
            && job.dead_reason.as_deref() == Some("deadline_exceeded")
            && job.attempts == 0
            && job.dead_detail.is_none()
            && (settings.kind_of)(&job.subscriber_id) == Some(ReceiverKind::Fast)
            && job.deadline_ms - job.deliver_at_ms
                > settings.claim_slack_ms + settings.tolerance_ms
            && job.deadline_ms <= settings.workers_stopped_ms
            && !self.history.faults.iter().any(|fault| {
                fault.kind != FaultKind::Skewed
                    && fault.start_ms <= job.deadline_ms
                    && job.deliver_at_ms <= fault.end_ms + settings.quiet_after_fault_ms
            });
        if starved {
            self.job_violation(
                "starved",
                case,
                format!(
                    "dead at its deadline without an attempt after {} ms due, with no fault \
                     and nothing holding it",
                    job.deadline_ms - job.deliver_at_ms
                ),
            );
        }
    }

    /// `not_received`, `after_cancel`, `after_deadline`, `early`.
    fn timing(&mut self, case: &Case<'_>) {
        let job = case.job;
        let history = self.history;
        let tolerance = self.settings.tolerance_ms;
        if job.state == "delivered"
            && !case
                .requests
                .iter()
                .any(|&i| history.requests[i].accepted())
        {
            self.job_violation(
                "not_received",
                case,
                "delivered, but no request was answered 2xx".into(),
            );
        }
        let cancelled_at = case
            .ops
            .iter()
            .map(|&i| &history.ops[i])
            .filter(|op| op.acknowledged() && matches!(op.kind, OpKind::Cancel { .. }))
            .map(|op| op.answered_ms)
            .min();
        // From the first reschedule or replay that could move it on, its deliver_at may
        // change: `early` judges the requests before.
        let moved_at = case
            .ops
            .iter()
            .map(|&i| &history.ops[i])
            .filter(|op| match &op.kind {
                OpKind::Reschedule { .. } => true,
                OpKind::Replay { subscribers, .. } => subscribers.contains(&job.subscriber_id),
                _ => false,
            })
            .map(|op| op.sent_ms)
            .min();
        // The earliest deliver_at any create of its key asked for (absent: when sent).
        let not_before = case
            .ops
            .iter()
            .filter_map(|&i| {
                let op = &history.ops[i];
                match op.kind {
                    OpKind::Create { deliver_at_ms, .. } | OpKind::FanOut { deliver_at_ms, .. } => {
                        Some(deliver_at_ms.unwrap_or(op.sent_ms))
                    }
                    _ => None,
                }
            })
            .min();
        // The deadline a create asked for holds until the first reschedule or replay
        // (which only move it later here); from then on, the stored one.
        let created_deadline = case
            .ops
            .iter()
            .filter_map(|&i| match history.ops[i].kind {
                OpKind::Create { deadline_ms, .. } | OpKind::FanOut { deadline_ms, .. } => {
                    Some(deadline_ms)
                }
                _ => None,
            })
            .max();
        let mut found = Vec::new();
        for &i in &case.requests {
            let start = history.requests[i].started_ms;
            let deadline = match created_deadline {
                Some(asked) if moved_at.is_none_or(|moved| start < moved) => asked,
                _ => job.deadline_ms,
            };
            if let Some(at) = cancelled_at
                && start > at + tolerance
                && !self.excuse(case, i, start, start)
            {
                found.push((
                    "after_cancel",
                    format!(
                        "a request started {} ms after the cancel's answer",
                        start - at
                    ),
                ));
            }
            if start > deadline + tolerance && !self.excuse(case, i, start, start) {
                let late = start - deadline;
                found.push((
                    "after_deadline",
                    format!("a request started {late} ms after the deadline"),
                ));
            }
            if let Some(at) = not_before
                && moved_at.is_none_or(|moved| start < moved)
                && start < at - tolerance
            {
                found.push((
                    "early",
                    format!("a request started {} ms before deliver_at", at - start),
                ));
            }
        }
        self.per_check(case, found);
    }

    /// One violation per check of `found` (its first detail, and how many requests).
    fn per_check(&mut self, case: &Case<'_>, found: Vec<(&'static str, String)>) {
        let mut grouped: Vec<(&'static str, String, usize)> = Vec::new();
        for (check, detail) in found {
            match grouped.iter_mut().find(|(c, _, _)| *c == check) {
                Some((_, _, n)) => *n += 1,
                None => grouped.push((check, detail, 1)),
            }
        }
        for (check, detail, n) in grouped {
            let detail = if n > 1 {
                format!("{detail} (and {} more)", n - 1)
            } else {
                detail
            };
            self.job_violation(check, case, detail);
        }
    }

    /// `overlap`: a request starting (beyond the tolerance) before an earlier one of
    /// its job ended is excused when either of them meets a SIGSTOP window of the
    /// job's process (the earlier open during it, or the later starting within it or
    /// `after_stop_ms` after it).
    fn overlap(&mut self, case: &Case<'_>) {
        let read_at = self.store.read_at_ms;
        let tolerance = self.settings.overlap_ms;
        let mut found = Vec::new();
        // Each request against the one still open the longest before it (not only its
        // neighbour: a long request may outlast several short ones).
        let mut longest: Option<usize> = None;
        for &next_i in &case.requests {
            let next = &self.history.requests[next_i];
            if let Some(first_i) = longest {
                let first = &self.history.requests[first_i];
                let first_end = first.ended_ms(read_at);
                if next.started_ms + tolerance < first_end
                    && !self.excuse(case, first_i, first.started_ms, first_end)
                    && !self.excuse(case, next_i, next.started_ms, next.started_ms)
                {
                    let ms = first_end - next.started_ms;
                    found.push(("overlap", format!("two requests open at once for {ms} ms")));
                }
            }
            let ends_later = longest.is_none_or(|first_i| {
                next.ended_ms(read_at) > self.history.requests[first_i].ended_ms(read_at)
            });
            if ends_later {
                longest = Some(next_i);
            }
        }
        self.per_check(case, found);
    }

    /// `duplicates` and `unrecorded`; returns the job's duplicates.
    fn counted(&mut self, case: &Case<'_>) -> usize {
        let accepted: Vec<usize> = case
            .requests
            .iter()
            .copied()
            .filter(|&i| self.history.requests[i].accepted())
            .collect();
        let duplicates = accepted.len().saturating_sub(1);
        let resent = |a: &StoredAttempt| a.reason.as_deref().is_some_and(|r| r.contains(RESENT));
        // An attempt whose outcome was unknown: recorded `unknown`, or followed by an
        // attempt marked a possible duplicate that its own resend does not explain (a
        // late result fills in the row of an attempt whose lease was lost, DESIGN §2.2,
        // but the next attempt keeps the mark).
        let unknown = case
            .attempts
            .iter()
            .enumerate()
            .filter(|&(n, a)| {
                a.outcome == "unknown"
                    || (!resent(a)
                        && case
                            .attempts
                            .get(n + 1)
                            .is_some_and(|next| next.possible_duplicate))
            })
            .count();
        let resends = case.attempts.iter().filter(|a| resent(a)).count();
        if duplicates > unknown + resends {
            // An answer a stopped (SIGSTOP) process never read: its attempt ended later
            // by its timeout, so the receiver had it and the store says it failed.
            let read_at = self.store.read_at_ms;
            let stopped = accepted[..duplicates]
                .iter()
                .filter(|&&i| {
                    let request = &self.history.requests[i];
                    self.excuse(case, i, request.started_ms, request.ended_ms(read_at))
                })
                .count();
            if duplicates > unknown + resends + stopped {
                self.job_violation(
                    "duplicates",
                    case,
                    format!(
                        "{duplicates} duplicate(s), but {unknown} unknown attempt(s), \
                         {resends} resend(s) and {stopped} answer(s) sent to a stopped process"
                    ),
                );
            }
        }
        if case.requests.len() > case.attempts.len() + resends {
            self.job_violation(
                "unrecorded",
                case,
                format!(
                    "{} request(s) for {} attempt row(s) and {resends} resend(s)",
                    case.requests.len(),
                    case.attempts.len()
                ),
            );
        }
        duplicates
    }

    /// `gauges`: each instance's `deferhook_jobs` equal the listing's counts by state,
    /// and its `deferhook_dead_jobs` add up to the dead count.
    pub(super) fn gauges(&mut self) {
        let mut listed: BTreeMap<String, u64> = BTreeMap::new();
        for job in &self.store.jobs {
            *listed.entry(job.state.clone()).or_default() += 1;
        }
        for gauges in &self.store.gauges {
            let states: HashSet<&String> = listed.keys().chain(gauges.jobs.keys()).collect();
            let mut wrong: Vec<String> = states
                .into_iter()
                .filter_map(|state| {
                    let (seen, want) = (
                        gauges.jobs.get(state).copied().unwrap_or(0),
                        listed.get(state).copied().unwrap_or(0),
                    );
                    (seen != want).then(|| format!("{state} {seen} (listed {want})"))
                })
                .collect();
            wrong.sort();
            let dead: u64 = gauges.dead_jobs.values().sum();
            let want_dead = listed.get("dead").copied().unwrap_or(0);
            if dead != want_dead {
                wrong.push(format!("dead_jobs add up to {dead} (listed {want_dead})"));
            }
            if !wrong.is_empty() {
                self.other_violation(
                    "gauges",
                    None,
                    format!("instance {}: {}", gauges.instance, wrong.join(", ")),
                    Vec::new(),
                );
            }
        }
    }
}
