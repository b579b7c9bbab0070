//! The requests a receiver got, matched to the jobs the API created: each job's first
//! arrival with its lateness; a repeat of a job (a duplicate) and a request for no job
//! (unexpected) only counted.

use std::collections::{HashMap, HashSet};

use super::load::Created;
use super::receiver::Arrival;

/// Arrivals matched to their jobs.
pub struct Matched<'a> {
    /// Each job's first arrival and its lateness (arrival − due), in ms, in arrival
    /// order.
    pub first: Vec<(&'a Arrival, f64)>,
    /// Arrivals of a job that had arrived already.
    pub duplicates: usize,
    /// Arrivals for no created job.
    pub unexpected: usize,
}

/// Matches `arrivals` to `jobs` by (subscriber, webhook id = event id).
pub fn match_to_jobs<'a>(jobs: &[Created], arrivals: &'a [Arrival]) -> Matched<'a> {
    let due: HashMap<(&str, &str), i64> = jobs
        .iter()
        .map(|job| ((job.subscriber.as_str(), job.event_id.as_str()), job.due_ms))
        .collect();
    let mut seen = HashSet::new();
    let mut matched = Matched {
        first: Vec::new(),
        duplicates: 0,
        unexpected: 0,
    };
    for arrival in arrivals {
        let key = (arrival.subscriber.as_str(), arrival.webhook_id.as_str());
        let Some(due_ms) = due.get(&key) else {
            matched.unexpected += 1;
            continue;
        };
        if !seen.insert(key) {
            matched.duplicates += 1;
            continue;
        }
        matched
            .first
            .push((arrival, (arrival.at_ms - due_ms) as f64));
    }
    matched
}
