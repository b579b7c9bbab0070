//! The end of the load: the running replays cancelled (an operator's action; a replay
//! paced at a failing receiver would otherwise go on releasing jobs long after the
//! load), then a wait until every job is terminal.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;

use super::super::clock::now_ms;
use super::super::server::TOKEN;
use super::fleet::Fleet;
use super::plan;
use super::store_view;

/// Longest wait after the load for every job to settle: the longest deadline a job
/// can have (a delay, a long TTL, a reschedule, a replay) and the sweep.
const DRAIN: Duration = Duration::from_secs(
    (2 * plan::MAX_DELAY_MS + plan::LONG_TTL_MS.1 + plan::REPLAY_TTL_MS) / 1_000 + 20,
);
/// How often the drain counts the jobs not yet terminal.
const DRAIN_POLL: Duration = Duration::from_secs(2);

/// `POST /v1/replays/{id}/cancel` for every running replay (`GET
/// /v1/replays?state=running`); an error when an answer is not a 2xx.
pub async fn cancel_replays(fleet: &Fleet) -> anyhow::Result<usize> {
    let base = first(fleet)?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let listed = client
        .get(format!("{base}/v1/replays?state=running&limit=1000"))
        .bearer_auth(TOKEN)
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    let listed: Value = serde_json::from_slice(&listed)?;
    let ids: Vec<&str> = listed["items"]
        .as_array()
        .context("no items in the replay listing")?
        .iter()
        .filter_map(|replay| replay["id"].as_str())
        .collect();
    for id in &ids {
        client
            .post(format!("{base}/v1/replays/{id}/cancel"))
            .bearer_auth(TOKEN)
            .send()
            .await?
            .error_for_status()
            .with_context(|| format!("cancelling replay {id}"))?;
    }
    println!("chaos: cancelled {} running replay(s)", ids.len());
    Ok(ids.len())
}

/// The first live instance's base.
fn first(fleet: &Fleet) -> anyhow::Result<String> {
    fleet
        .live()
        .into_iter()
        .next()
        .map(|(_, base)| base)
        .context("no instance is running after the heal")
}

/// Waits until no job is left unsettled (true), or [`DRAIN`] has passed (false).
pub async fn drain(fleet: &Fleet) -> anyhow::Result<bool> {
    let started = Instant::now();
    loop {
        let base = first(fleet)?;
        let left = store_view::unsettled(&base).await?;
        if left.is_empty() {
            println!(
                "chaos: every job settled {:.0} s after the load",
                started.elapsed().as_secs_f64()
            );
            return Ok(true);
        }
        if started.elapsed() > DRAIN {
            println!(
                "chaos: {} job(s) still unsettled after {DRAIN:?}; auditing anyway",
                left.len()
            );
            let now = now_ms();
            for job in left.iter().take(5) {
                println!(
                    "  {} {} {} waiting {:?}, next attempt in {:?} ms, deadline in {} ms",
                    job.id,
                    job.subscriber_id,
                    job.state,
                    job.waiting_reason,
                    job.next_attempt_at_ms.map(|at| at - now),
                    job.deadline_ms - now
                );
            }
            return Ok(false);
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
}
