//! The jobs the producer knows the servers acknowledged, for its cancels and
//! reschedules: the delayed ones still waiting for their time, and the recent ones of
//! the subscribers that fail (likely `retrying`).

use std::collections::{HashMap, VecDeque};

use rand::Rng;
use rand::rngs::StdRng;
use uuid::Uuid;

use super::history::{Ms, Op, OpKind, ReceiverKind};

/// A waiting job is picked only while its time is at least this far off, in ms, so the
/// request reaches the server before the job is due.
const MARGIN_MS: Ms = 250;
/// How many recent jobs of failing subscribers are kept.
const RECENT: usize = 256;

/// Whether `kind`'s jobs are likely to be `retrying` for a while.
fn troubled(kind: ReceiverKind) -> bool {
    matches!(
        kind,
        ReceiverKind::Flaky | ReceiverKind::Closing | ReceiverKind::Hanging
    )
}

/// The acknowledged jobs worth a cancel or a reschedule; bounded (waiting jobs leave
/// once due, at most [`RECENT`] recent ones).
#[derive(Debug, Default)]
pub struct Known {
    kinds: HashMap<String, ReceiverKind>,
    /// `(job, deliver_at in Unix ms)` of delayed jobs, as last acknowledged.
    waiting: Vec<(Uuid, Ms)>,
    /// Recent jobs of troubled subscribers, oldest first.
    recent: VecDeque<Uuid>,
}

impl Known {
    /// Nothing known yet, for `subscribers` `(id, kind)`.
    pub fn new(subscribers: &[(String, ReceiverKind)]) -> Known {
        Known {
            kinds: subscribers.iter().cloned().collect(),
            ..Known::default()
        }
    }

    /// Learns from an answered op: acknowledged creates add jobs, reschedules move
    /// them, cancels remove them.
    pub fn learn(&mut self, op: &Op) {
        if !op.acknowledged() {
            return;
        }
        match &op.kind {
            OpKind::Create {
                subscriber,
                deliver_at_ms,
                job_id: Some(job),
                ..
            } => self.add(subscriber, *job, *deliver_at_ms),
            OpKind::FanOut {
                subscribers,
                deliver_at_ms,
                job_ids,
                ..
            } => {
                for (subscriber, job) in subscribers.iter().zip(job_ids) {
                    self.add(subscriber, *job, *deliver_at_ms);
                }
            }
            OpKind::Reschedule {
                job_id,
                deliver_at_ms,
                ..
            } => {
                self.waiting.retain(|(job, _)| job != job_id);
                self.waiting.push((*job_id, *deliver_at_ms));
            }
            OpKind::Cancel { job_id } => {
                self.waiting.retain(|(job, _)| job != job_id);
                self.recent.retain(|job| job != job_id);
            }
            _ => {}
        }
    }

    fn add(&mut self, subscriber: &str, job: Uuid, deliver_at_ms: Option<Ms>) {
        if let Some(at) = deliver_at_ms {
            self.waiting.push((job, at));
        }
        if self
            .kinds
            .get(subscriber)
            .is_some_and(|&kind| troubled(kind))
        {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back(job);
        }
    }

    /// A random delayed job not due before `now_ms` + [`MARGIN_MS`]; forgets those
    /// due sooner.
    pub fn waiting(&mut self, rng: &mut StdRng, now_ms: Ms) -> Option<Uuid> {
        self.waiting.retain(|&(_, at)| at > now_ms + MARGIN_MS);
        (!self.waiting.is_empty()).then(|| self.waiting[rng.random_range(0..self.waiting.len())].0)
    }

    /// A random recent job of a `Flaky`, `Closing` or `Hanging` subscriber.
    pub fn recent_troubled(&self, rng: &mut StdRng) -> Option<Uuid> {
        (!self.recent.is_empty()).then(|| self.recent[rng.random_range(0..self.recent.len())])
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::super::history::OpOutcome;
    use super::*;

    fn op(kind: OpKind, status: u16) -> Op {
        Op {
            kind,
            instance: 0,
            sent_ms: 0,
            answered_ms: 0,
            outcome: OpOutcome::Status {
                status,
                retry_after: false,
            },
        }
    }

    fn create(subscriber: &str, at: Option<Ms>, job: Uuid) -> OpKind {
        OpKind::Create {
            subscriber: subscriber.into(),
            event_id: "e".into(),
            deliver_at_ms: at,
            deadline_ms: 0,
            max_attempts: None,
            job_id: Some(job),
        }
    }

    #[test]
    fn only_acknowledged_waiting_jobs_are_picked() {
        let subscribers = vec![
            ("fast-0".to_owned(), ReceiverKind::Fast),
            ("flaky-0".to_owned(), ReceiverKind::Flaky),
        ];
        let mut known = Known::new(&subscribers);
        let mut rng = StdRng::seed_from_u64(0);
        let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        known.learn(&op(create("fast-0", Some(10_000), a), 201));
        known.learn(&op(create("fast-0", Some(10_000), b), 503));
        known.learn(&op(create("flaky-0", None, c), 201));
        assert_eq!(known.waiting(&mut rng, 0), Some(a));
        assert_eq!(known.recent_troubled(&mut rng), Some(c));
        assert_eq!(known.waiting(&mut rng, 9_800), None, "due too soon");

        known.learn(&op(create("fast-0", Some(10_000), a), 201));
        let moved = OpKind::Reschedule {
            job_id: a,
            deliver_at_ms: 20_000,
            deadline_ms: 50_000,
        };
        known.learn(&op(moved, 200));
        assert_eq!(known.waiting(&mut rng, 15_000), Some(a));
        known.learn(&op(OpKind::Cancel { job_id: a }, 200));
        known.learn(&op(OpKind::Cancel { job_id: c }, 200));
        assert_eq!(known.waiting(&mut rng, 0), None);
        assert_eq!(known.recent_troubled(&mut rng), None);
    }
}
