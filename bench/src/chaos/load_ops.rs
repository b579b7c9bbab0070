//! The producer's requests as data: each operation's timing drawn from the seeded rng
//! and its JSON body, pure functions of their inputs (the driver, `load.rs`, sends
//! them; `load_send.rs` records the answers).

use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use uuid::Uuid;

use super::super::clock::format_ms;
use super::history::{Ms, OpKind};
use super::plan::{LONG_TTL_MS, MAX_DELAY_MS, REPLAY_TTL_MS, SHORT_TTL_MS};

/// The fewest and most subscribers of a fan-out (fewer when there are fewer).
pub const FAN_OUT_SIZE: (usize, usize) = (3, 14);
/// A replay's `max_jobs` and `rate_per_second`.
const REPLAY_MAX_JOBS: u32 = 100;
const REPLAY_RATE: u32 = 20;

/// When a new job is due and how long it may try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `deliver_at` to send, in Unix ms; `None`: due now.
    pub deliver_at_ms: Option<Ms>,
    /// `deadline` to send (always absolute), in Unix ms.
    pub deadline_ms: Ms,
    /// `max_attempts` to send, 1–5, or `None`.
    pub max_attempts: Option<u32>,
}

impl Timing {
    /// A seeded draw at `now_ms`: half due now, the others due in 1..=`MAX_DELAY_MS`
    /// ms; the deadline that time plus a TTL (30% short, else long); 30% carry
    /// `max_attempts`.
    pub fn draw(rng: &mut StdRng, now_ms: Ms) -> Timing {
        let deliver_at_ms = rng
            .random_bool(0.5)
            .then(|| now_ms + rng.random_range(1..=MAX_DELAY_MS) as Ms);
        let deadline_ms = deliver_at_ms.unwrap_or(now_ms) + ttl(rng) as Ms;
        let max_attempts = rng.random_bool(0.3).then(|| rng.random_range(1..=5));
        Timing {
            deliver_at_ms,
            deadline_ms,
            max_attempts,
        }
    }

    /// Adds the timing's fields to a job or fan-out body.
    fn write(&self, body: &mut Value) -> anyhow::Result<()> {
        if let Some(at) = self.deliver_at_ms {
            body["deliver_at"] = Value::String(format_ms(at)?);
        }
        body["deadline"] = Value::String(format_ms(self.deadline_ms)?);
        if let Some(attempts) = self.max_attempts {
            body["max_attempts"] = json!(attempts);
        }
        Ok(())
    }
}

/// A TTL in ms: 30% from `SHORT_TTL_MS`, else from `LONG_TTL_MS`.
fn ttl(rng: &mut StdRng) -> u64 {
    let (low, high) = if rng.random_bool(0.3) {
        SHORT_TTL_MS
    } else {
        LONG_TTL_MS
    };
    rng.random_range(low..=high)
}

/// A reschedule drawn at `now_ms`: `(deliver_at, deadline)` in Unix ms, due in
/// 1..=`MAX_DELAY_MS` ms with a long TTL.
pub fn draw_reschedule(rng: &mut StdRng, now_ms: Ms) -> (Ms, Ms) {
    let deliver_at = now_ms + rng.random_range(1..=MAX_DELAY_MS) as Ms;
    let deadline = deliver_at + rng.random_range(LONG_TTL_MS.0..=LONG_TTL_MS.1) as Ms;
    (deliver_at, deadline)
}

/// `FAN_OUT_SIZE` distinct subscribers of `all`, in a random order.
pub fn pick_fan_out(rng: &mut StdRng, all: &[String]) -> Vec<String> {
    let most = FAN_OUT_SIZE.1.min(all.len());
    let fewest = FAN_OUT_SIZE.0.min(most);
    let count = rng.random_range(fewest..=most);
    rand::seq::index::sample(rng, all.len(), count)
        .into_iter()
        .map(|i| all[i].clone())
        .collect()
}

/// One request to send: the route, the body and what the op will record (its ids
/// still empty; the answer fills them).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub method: reqwest::Method,
    /// The path, from `/v1`.
    pub path: String,
    /// The JSON body; `None`: none (cancel).
    pub body: Option<Value>,
    pub kind: OpKind,
}

/// `POST /v1/jobs` of `event_id` for `subscriber`.
pub fn create(subscriber: &str, event_id: &str, timing: Timing) -> anyhow::Result<Prepared> {
    let mut body = json!({
        "subscriber_id": subscriber,
        "event_id": event_id,
        "payload": { "chaos": event_id },
    });
    timing.write(&mut body)?;
    Ok(Prepared {
        method: reqwest::Method::POST,
        path: "/v1/jobs".to_owned(),
        body: Some(body),
        kind: OpKind::Create {
            subscriber: subscriber.to_owned(),
            event_id: event_id.to_owned(),
            deliver_at_ms: timing.deliver_at_ms,
            deadline_ms: timing.deadline_ms,
            max_attempts: timing.max_attempts,
            job_id: None,
        },
    })
}

/// `POST /v1/events` of `event_id` for `subscribers` (distinct).
pub fn fan_out(
    subscribers: Vec<String>,
    event_id: &str,
    timing: Timing,
) -> anyhow::Result<Prepared> {
    let mut body = json!({
        "subscriber_ids": subscribers,
        "event_id": event_id,
        "payload": { "chaos": event_id },
    });
    timing.write(&mut body)?;
    Ok(Prepared {
        method: reqwest::Method::POST,
        path: "/v1/events".to_owned(),
        body: Some(body),
        kind: OpKind::FanOut {
            event_id: event_id.to_owned(),
            subscribers,
            deliver_at_ms: timing.deliver_at_ms,
            deadline_ms: timing.deadline_ms,
            job_ids: Vec::new(),
        },
    })
}

/// `POST /v1/jobs/{job_id}/cancel`.
pub fn cancel(job_id: Uuid) -> Prepared {
    Prepared {
        method: reqwest::Method::POST,
        path: format!("/v1/jobs/{job_id}/cancel"),
        body: None,
        kind: OpKind::Cancel { job_id },
    }
}

/// `PATCH /v1/jobs/{job_id}` with `deliver_at` and `deadline` (Unix ms).
pub fn reschedule(job_id: Uuid, deliver_at_ms: Ms, deadline_ms: Ms) -> anyhow::Result<Prepared> {
    Ok(Prepared {
        method: reqwest::Method::PATCH,
        path: format!("/v1/jobs/{job_id}"),
        body: Some(json!({
            "deliver_at": format_ms(deliver_at_ms)?,
            "deadline": format_ms(deadline_ms)?,
        })),
        kind: OpKind::Reschedule {
            job_id,
            deliver_at_ms,
            deadline_ms,
        },
    })
}

/// `POST /v1/replays` of the dead jobs of `subscribers` (1–1,000 ids).
pub fn replay(subscribers: Vec<String>) -> Prepared {
    Prepared {
        method: reqwest::Method::POST,
        path: "/v1/replays".to_owned(),
        body: Some(json!({
            "subscriber_ids": subscribers,
            "max_jobs": REPLAY_MAX_JOBS,
            "rate_per_second": REPLAY_RATE,
            "ttl_ms": REPLAY_TTL_MS,
        })),
        kind: OpKind::Replay {
            subscribers,
            replay_id: None,
        },
    }
}

/// `POST /v1/subscribers/resume` of `subscribers` (1–1,000 ids).
pub fn resume(subscribers: Vec<String>) -> Prepared {
    Prepared {
        method: reqwest::Method::POST,
        path: "/v1/subscribers/resume".to_owned(),
        body: Some(json!({ "subscriber_ids": subscribers })),
        kind: OpKind::Resume { subscribers },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use rand::SeedableRng;

    use super::super::super::clock::parse_ms;
    use super::*;

    const NOW: Ms = 1_800_000_000_000;

    fn body(op: &Prepared) -> &Value {
        op.body.as_ref().expect("a body")
    }

    fn ms(op: &Prepared, field: &str) -> Option<Ms> {
        body(op)
            .get(field)
            .map(|v| parse_ms(v.as_str().expect("a string")).expect("RFC 3339"))
    }

    #[test]
    fn timings_keep_their_ranges_and_mix() {
        let mut rng = StdRng::seed_from_u64(3);
        let draws: Vec<Timing> = (0..2_000).map(|_| Timing::draw(&mut rng, NOW)).collect();
        let (mut delayed, mut short, mut capped) = (0, 0, 0);
        for t in &draws {
            let due = t.deliver_at_ms.unwrap_or(NOW);
            assert!((NOW..=NOW + MAX_DELAY_MS as Ms).contains(&due), "{t:?}");
            let ttl = (t.deadline_ms - due) as u64;
            let is_short = (SHORT_TTL_MS.0..=SHORT_TTL_MS.1).contains(&ttl);
            assert!(is_short || (LONG_TTL_MS.0..=LONG_TTL_MS.1).contains(&ttl));
            assert!(t.max_attempts.is_none_or(|n| (1..=5).contains(&n)));
            delayed += usize::from(t.deliver_at_ms.is_some());
            short += usize::from(is_short);
            capped += usize::from(t.max_attempts.is_some());
        }
        assert!((850..=1_150).contains(&delayed), "{delayed}");
        assert!((450..=750).contains(&short), "{short}");
        assert!((450..=750).contains(&capped), "{capped}");
        let mut again = StdRng::seed_from_u64(3);
        assert_eq!(Timing::draw(&mut again, NOW), draws[0]);
    }

    #[test]
    fn a_create_body_says_what_the_op_records() {
        let timing = Timing {
            deliver_at_ms: Some(NOW + 1_250),
            deadline_ms: NOW + 20_000,
            max_attempts: Some(3),
        };
        let op = create("fast-0", "chaos-1-0", timing).expect("body");
        assert_eq!(op.path, "/v1/jobs");
        assert_eq!(body(&op)["subscriber_id"], "fast-0");
        assert_eq!(body(&op)["event_id"], "chaos-1-0");
        assert_eq!(ms(&op, "deliver_at"), Some(NOW + 1_250));
        assert_eq!(ms(&op, "deadline"), Some(NOW + 20_000));
        assert_eq!(body(&op)["max_attempts"], 3);
        assert!(body(&op)["deliver_at"].as_str().unwrap().ends_with('Z'));

        let now = Timing {
            deliver_at_ms: None,
            deadline_ms: NOW + 2_000,
            max_attempts: None,
        };
        let op = create("fast-0", "chaos-1-1", now).expect("body");
        assert!(body(&op).get("deliver_at").is_none());
        assert!(body(&op).get("max_attempts").is_none());
        assert_eq!(ms(&op, "deadline"), Some(NOW + 2_000));
        assert!(matches!(
            op.kind,
            OpKind::Create {
                deliver_at_ms: None,
                job_id: None,
                ..
            }
        ));
    }

    #[test]
    fn fan_outs_name_distinct_subscribers() {
        let all: Vec<String> = (0..14).map(|n| format!("s-{n}")).collect();
        let mut rng = StdRng::seed_from_u64(9);
        let mut sizes = HashSet::new();
        for _ in 0..500 {
            let picked = pick_fan_out(&mut rng, &all);
            let distinct: HashSet<&String> = picked.iter().collect();
            assert_eq!(distinct.len(), picked.len());
            assert!((3..=14).contains(&picked.len()));
            sizes.insert(picked.len());
        }
        assert_eq!(sizes.len(), 12, "every size from 3 to 14");
        assert_eq!(pick_fan_out(&mut rng, &all[..2]).len(), 2);

        let timing = Timing::draw(&mut rng, NOW);
        let op = fan_out(all[..4].to_vec(), "chaos-1-7", timing).expect("body");
        assert_eq!(
            body(&op)["subscriber_ids"],
            json!(["s-0", "s-1", "s-2", "s-3"])
        );
        assert_eq!(ms(&op, "deadline"), Some(timing.deadline_ms));
    }

    #[test]
    fn the_other_bodies() {
        let id = Uuid::now_v7();
        let mut rng = StdRng::seed_from_u64(1);
        let (at, deadline) = draw_reschedule(&mut rng, NOW);
        assert!(at > NOW && at <= NOW + MAX_DELAY_MS as Ms);
        assert!((LONG_TTL_MS.0..=LONG_TTL_MS.1).contains(&((deadline - at) as u64)));
        let op = reschedule(id, at, deadline).expect("body");
        assert_eq!(
            (op.method.as_str(), op.path.clone()),
            ("PATCH", format!("/v1/jobs/{id}"))
        );
        assert_eq!(ms(&op, "deliver_at"), Some(at));
        assert_eq!(ms(&op, "deadline"), Some(deadline));
        assert_eq!(cancel(id).path, format!("/v1/jobs/{id}/cancel"));
        assert!(cancel(id).body.is_none());
        let op = replay(vec!["flaky-0".into()]);
        assert_eq!(body(&op)["ttl_ms"], REPLAY_TTL_MS);
        assert_eq!(body(&op)["max_jobs"], 100);
        assert_eq!(body(&op)["rate_per_second"], 20);
        assert_eq!(
            resume(vec!["gone-0".into()]).body,
            Some(json!({"subscriber_ids": ["gone-0"]}))
        );
    }
}
