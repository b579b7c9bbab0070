//! Triage of failing subscribers (docs/DESIGN.md §5.3, issue #33): during an incident
//! the first question is "what is failing, and which cause holds the most work", so the
//! failing subscribers are grouped by cause — their latest error's class and HTTP
//! status, and for a subscriber paused by its receiver's `410 Gone`, that pause — and
//! the causes are ordered by the jobs they hold, each with its subscribers ordered the
//! same way. Pure: the caller reads the subscribers and their figures.

use std::collections::BTreeMap;

use super::policy::ErrorClass;

/// What one failing (or 410-paused) subscriber contributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    /// Its id.
    pub id: String,
    /// Its cause.
    pub cause: Cause,
    /// The jobs it holds: `retrying` plus dead in the last hour (`failing_jobs`).
    pub jobs: u64,
}

/// A cause: the class and HTTP status of the latest failed attempt, and whether the
/// subscriber is paused for it (`gone`, after a 410).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cause {
    /// The error class; `None` when its failure is not recorded (purged, or an expired
    /// lease only).
    pub class: Option<ErrorClass>,
    /// The HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// Paused by its receiver's `410 Gone`.
    pub gone: bool,
}

/// One cause with what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CauseGroup {
    /// The cause.
    pub cause: Cause,
    /// How many subscribers have it.
    pub subscribers: u64,
    /// The jobs they hold together.
    pub jobs: u64,
    /// Its subscribers holding the most jobs, most first then by id, at most `top`
    /// of them: `(id, jobs)`.
    pub top: Vec<(String, u64)>,
}

/// Groups `failing` by cause: the causes holding the most jobs first (then the most
/// subscribers, then the cause), each listing up to `top` of its subscribers, most
/// jobs first then by id.
pub fn group(failing: &[Failing], top: usize) -> Vec<CauseGroup> {
    let mut by_cause: BTreeMap<Cause, Vec<&Failing>> = BTreeMap::new();
    for entry in failing {
        by_cause.entry(entry.cause).or_default().push(entry);
    }
    let mut groups: Vec<CauseGroup> = by_cause
        .into_iter()
        .map(|(cause, mut members)| {
            members.sort_by(|a, b| b.jobs.cmp(&a.jobs).then_with(|| a.id.cmp(&b.id)));
            CauseGroup {
                cause,
                subscribers: members.len() as u64,
                jobs: members.iter().map(|m| m.jobs).sum(),
                top: members
                    .iter()
                    .take(top)
                    .map(|m| (m.id.clone(), m.jobs))
                    .collect(),
            }
        })
        .collect();
    groups.sort_by(|a, b| {
        b.jobs
            .cmp(&a.jobs)
            .then_with(|| b.subscribers.cmp(&a.subscribers))
            .then_with(|| a.cause.cmp(&b.cause))
    });
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(id: &str, class: ErrorClass, status: Option<u16>, jobs: u64) -> Failing {
        Failing {
            id: id.into(),
            cause: Cause {
                class: Some(class),
                status,
                gone: status == Some(410),
            },
            jobs,
        }
    }

    #[test]
    fn the_cause_holding_most_jobs_comes_first() {
        // The shared-host incident: 100 subscribers answering 500 each hold 2 jobs, 300
        // timing out hold 3 each, 50 paused by a 410 hold 1 each.
        let mut all = Vec::new();
        for n in 0..100 {
            all.push(failing(
                &format!("fail{n:03}"),
                ErrorClass::Http5xx,
                Some(500),
                2,
            ));
        }
        for n in 0..300 {
            let jobs = if n == 7 { 9 } else { 3 };
            all.push(failing(
                &format!("slow{n:03}"),
                ErrorClass::Timeout,
                None,
                jobs,
            ));
        }
        for n in 0..50 {
            all.push(failing(
                &format!("gone{n:02}"),
                ErrorClass::Http4xx,
                Some(410),
                1,
            ));
        }
        let groups = group(&all, 3);
        type Row = (Option<ErrorClass>, Option<u16>, bool, u64, u64);
        let summary: Vec<Row> = groups
            .iter()
            .map(|g| {
                (
                    g.cause.class,
                    g.cause.status,
                    g.cause.gone,
                    g.subscribers,
                    g.jobs,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (Some(ErrorClass::Timeout), None, false, 300, 906),
                (Some(ErrorClass::Http5xx), Some(500), false, 100, 200),
                (Some(ErrorClass::Http4xx), Some(410), true, 50, 50),
            ]
        );
        assert_eq!(
            groups[0].top,
            [
                ("slow007".to_owned(), 9),
                ("slow000".to_owned(), 3),
                ("slow001".to_owned(), 3)
            ]
        );
        assert_eq!(groups[2].top.len(), 3);
    }

    #[test]
    fn equal_jobs_go_to_the_cause_with_more_subscribers() {
        let all = [
            failing("a", ErrorClass::Http5xx, Some(503), 4),
            failing("b", ErrorClass::Connect, None, 2),
            failing("c", ErrorClass::Connect, None, 2),
        ];
        let groups = group(&all, 10);
        assert_eq!(groups[0].cause.class, Some(ErrorClass::Connect));
        assert_eq!(groups[1].subscribers, 1);
        assert!(group(&[], 10).is_empty());
    }
}
