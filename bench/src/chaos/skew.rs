//! Checks that the skewed instance's clock really is skewed: libfaketime preloaded into
//! a binary it cannot hook (a static build, a wrong path) would leave the fault silently
//! out of the run.
//!
//! An instance on PostgreSQL measures its offset to the database's clock before it
//! serves and publishes it as `deferhook_clock_offset_seconds` (the database's clock
//! minus the instance's: −s for an instance s seconds ahead; docs/DESIGN.md §12).

use std::time::{Duration, Instant};

use crate::server::TOKEN;

/// How far the measured offset may be from the configured skew, in seconds: the two
/// clocks' own difference and the measurement's round trip are far smaller.
const SLACK_SECONDS: f64 = 5.0;
/// How long the gauge may take to show the skew after the instance logs its address.
const WITHIN: Duration = Duration::from_secs(10);

/// Waits (at most [`WITHIN`]) until the instance at `base` reports a clock offset
/// within [`SLACK_SECONDS`] of −`seconds`; an error naming the last reading otherwise.
pub async fn verify(base: &str, seconds: i64) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let expected = -(seconds as f64);
    let started = Instant::now();
    let mut last = String::from("no reading");
    while started.elapsed() < WITHIN {
        let answer = client
            .get(format!("{base}/metrics"))
            .bearer_auth(TOKEN)
            .send()
            .await;
        match answer {
            Ok(answer) => {
                let text = answer.text().await.unwrap_or_default();
                match clock_offset(&text) {
                    Some(offset) if (offset - expected).abs() <= SLACK_SECONDS => return Ok(()),
                    Some(offset) => last = format!("{offset} s"),
                    None => last = "no deferhook_clock_offset_seconds".to_owned(),
                }
            }
            Err(error) => last = error.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!(
        "the instance started with FAKETIME={seconds:+}s should report a clock offset of \
         about {expected} s, but reports {last}: libfaketime did not take effect"
    )
}

/// `deferhook_clock_offset_seconds` in a Prometheus exposition.
fn clock_offset(exposition: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix("deferhook_clock_offset_seconds")?;
        let value = rest.strip_prefix(' ')?.split_whitespace().next()?;
        value.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_read_from_the_exposition() {
        let text = "# TYPE deferhook_clock_offset_seconds gauge\n\
            deferhook_clock_offset_seconds -57.012\n\
            deferhook_clock_offset_seconds_total 3\n";
        assert_eq!(clock_offset(text), Some(-57.012));
        assert_eq!(clock_offset("deferhook_jobs{state=\"dead\"} 3\n"), None);
    }
}
