//! The figures of `--scenario on-call`: each question with the one call that answered
//! it, its latency and what it answered, checked against what the run set up; the
//! replay's measured rate. One text for people, the same figures as JSON.

use comfy_table::Table;
use serde::Serialize;
use serde_json::{Value, json};

use super::args::Args;
use super::on_call::{EVENTS, Groups};
use super::report::{compact, settings};
use super::server::Usage;

/// One question, asked with one call.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The question.
    pub question: &'static str,
    /// The call: method and path.
    pub call: String,
    /// How long it took, in milliseconds.
    pub latency_ms: f64,
    /// Its JSON answer.
    pub answer: Value,
}

/// How the replay went.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ReplayFigures {
    /// Dead letters it matched.
    pub matched: usize,
    /// Of those, how many arrived.
    pub delivered: usize,
    /// Arrivals per second from the first to the last: (n − 1) / span.
    pub rate_per_second: f64,
}

impl ReplayFigures {
    /// From the replayed requests' arrival times (Unix ms, in arrival order).
    pub fn of(matched: usize, arrivals_ms: &[i64]) -> Self {
        let span_ms = match (arrivals_ms.first(), arrivals_ms.last()) {
            (Some(first), Some(last)) if last > first => (last - first) as f64,
            _ => 0.0,
        };
        let rate_per_second = if span_ms > 0.0 {
            (arrivals_ms.len() - 1) as f64 * 1_000.0 / span_ms
        } else {
            0.0
        };
        ReplayFigures {
            matched,
            delivered: arrivals_ms.len(),
            rate_per_second,
        }
    }
}

/// One row of the report: a question, its call, and whether the answer held.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The question.
    pub question: &'static str,
    /// The call.
    pub call: String,
    /// Calls it took (always 1: each question is one request).
    pub calls: u32,
    /// Latency, in milliseconds.
    pub latency_ms: f64,
    /// What it answered, in short.
    pub answered: String,
    /// What the run set up, in short.
    pub expected: String,
    /// Whether the two agree.
    pub ok: bool,
}

/// The run's report.
pub struct OnCallReport {
    settings: Value,
    rows: Vec<Row>,
    replay: ReplayFigures,
    replay_rate: u64,
    usage: Vec<Usage>,
}

impl OnCallReport {
    /// Checks each answer against `groups`.
    pub fn new(
        args: &Args,
        groups: &Groups,
        asked: Vec<Asked>,
        replay: ReplayFigures,
        usage: Vec<Usage>,
    ) -> Self {
        let rows = asked
            .into_iter()
            .map(|asked| {
                let (answered, expected) = check(&asked, groups);
                Row {
                    question: asked.question,
                    call: asked.call,
                    calls: 1,
                    latency_ms: asked.latency_ms,
                    ok: answered == expected,
                    answered,
                    expected,
                }
            })
            .collect();
        OnCallReport {
            settings: settings(args),
            rows,
            replay,
            replay_rate: args.replay_rate,
            usage,
        }
    }

    /// What went wrong, if anything: an answer unlike the set-up, a replayed job that
    /// did not arrive, a rate more than 1/s off.
    pub fn failure(&self) -> Option<String> {
        let mut problems: Vec<String> = self
            .rows
            .iter()
            .filter(|row| !row.ok)
            .map(|row| {
                format!(
                    "{}: answered {}, expected {}",
                    row.question, row.answered, row.expected
                )
            })
            .collect();
        if self.replay.delivered != self.replay.matched {
            problems.push(format!(
                "{} of {} replayed jobs arrived",
                self.replay.delivered, self.replay.matched
            ));
        }
        if (self.replay.rate_per_second - self.replay_rate as f64).abs() > 1.0 {
            problems.push(format!(
                "replayed at {:.2}/s, asked {}/s",
                self.replay.rate_per_second, self.replay_rate
            ));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    /// The report for people.
    pub fn text(&self) -> String {
        let mut table = Table::new();
        table.set_header(["question", "call", "calls", "ms", "answered", "expected"]);
        for row in &self.rows {
            table.add_row([
                row.question.to_owned(),
                row.call.clone(),
                row.calls.to_string(),
                format!("{:.1}", row.latency_ms),
                row.answered.clone(),
                row.expected.clone(),
            ]);
        }
        let cpu: Vec<String> = self
            .usage
            .iter()
            .map(|u| format!("{:.1} s", u.cpu_seconds))
            .collect();
        format!(
            "on-call ({})\n{table}\nreplay: {} of {} arrived at {:.2}/s (asked {}/s); \
             server CPU {}",
            compact(&self.settings),
            self.replay.delivered,
            self.replay.matched,
            self.replay.rate_per_second,
            self.replay_rate,
            cpu.join(", ")
        )
    }

    /// The same figures as JSON.
    pub fn json(&self) -> Value {
        json!({
            "settings": self.settings,
            "questions": self.rows,
            "replay": self.replay,
            "server_cpu_seconds": self.usage.iter().map(|u| u.cpu_seconds).collect::<Vec<_>>(),
            "failure": self.failure(),
        })
    }
}

/// What `asked` answered, and what the run set up, in the same short words.
fn check(asked: &Asked, groups: &Groups) -> (String, String) {
    let answer = &asked.answer;
    let (slow, failing, gone) = (groups.slow.len(), groups.failing.len(), groups.gone.len());
    let items = answer["items"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let number = |value: &Value| value.as_u64().unwrap_or(0);
    match asked.call.split(['?', ' ']).nth(1).unwrap_or_default() {
        "/v1/events" => {
            // A slow job whose attempt is open (its endpoint's probe) is not affected.
            let affected: Vec<u64> = items
                .iter()
                .map(|e| number(&e["affected"]) + number(&e["jobs"]["in_flight"]))
                .collect();
            (
                format!(
                    "{} events, affected (+ in flight) {affected:?}",
                    items.len()
                ),
                format!(
                    "{EVENTS} events, affected (+ in flight) {:?}",
                    vec![slow + failing + gone; EVENTS]
                ),
            )
        }
        "/v1/subscribers" => {
            let failing_now = items
                .iter()
                .filter(|s| s["health"]["status"] == "failing")
                .count();
            // The subscribers paused by their 410 are listed with the failing ones.
            (
                format!("{} listed, {failing_now} failing", items.len()),
                format!(
                    "{} listed, {} failing",
                    slow + failing + gone,
                    slow + failing
                ),
            )
        }
        "/v1/replays" => (
            format!("matched {}", number(&answer["matched"])),
            format!("matched {}", failing * EVENTS),
        ),
        "/v1/subscribers/resume" => (
            format!("resumed {}", number(&answer["resumed"])),
            format!("resumed {gone}"),
        ),
        _ => {
            // An event's summary: the advice on its jobs. The failing ones are dead
            // after transient failures (`replay`). The gone ones are dead on their 410
            // (`no`) or wait on their paused subscriber (`after_resume`); the slow ones
            // are timed out every time (`no`, issue #33), or before that wait on their
            // endpoint circuit (`not_before`) or for their next attempt (`yes`).
            let advice = &answer["retry_advice"];
            let others = number(&advice["no"])
                + number(&advice["after_resume"])
                + number(&advice["not_before"])
                + number(&advice["yes"])
                + number(&answer["jobs"]["in_flight"]);
            (
                format!(
                    "replay {}, no, after_resume, not_before or yes (+ in flight) {others}",
                    number(&advice["replay"]),
                ),
                format!(
                    "replay {failing}, no, after_resume, not_before or yes (+ in flight) {}",
                    gone + slow
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_rate_is_arrivals_over_their_span() {
        let figures = ReplayFigures::of(5, &[1_000, 1_250, 1_500, 1_750, 2_000]);
        assert_eq!(figures.delivered, 5);
        assert!((figures.rate_per_second - 4.0).abs() < 1e-9);
        assert_eq!(ReplayFigures::of(1, &[5]).rate_per_second, 0.0);
        assert_eq!(ReplayFigures::of(3, &[]).delivered, 0);
    }
}
