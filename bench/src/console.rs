//! `--scenario console` (issue #19): every console page timed against a store holding
//! the on-call incident at size: `--events` events fanned out to `--jobs` subscribers
//! (100 × 1,000 = 100,000 jobs by default), `--slow`, `--failing` and `--gone` of them
//! slow, failing and gone as in `on-call`. Once the incident has developed, the run
//! logs in to the console as a browser does (the login form's nonce, then the session
//! cookie) and GETs each page `SAMPLES` times in a row after one warm-up, on one
//! connection; it reports each page's median, p99 and largest latency and its size.
//! The target: every page under 100 ms.

use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::header::{COOKIE, HeaderMap, SET_COOKIE};
use serde_json::json;

use super::args::Args;
use super::load::Api;
use super::on_call::{self, Groups};
use super::scenario::with_servers;
use super::server::TOKEN;
use super::stats::Spread;

/// Timed GETs of each page.
const SAMPLES: usize = 21;
/// The target of issue #19, in milliseconds.
const TARGET_MS: f64 = 100.0;

/// One page's figures.
#[derive(Debug, serde::Serialize)]
struct Timed {
    page: String,
    latency_ms: Spread,
    bytes: usize,
}

/// Runs the incident, then times the pages; prints the table and writes `--json`.
pub async fn run(args: &Args) -> anyhow::Result<()> {
    let groups = Groups::of(args);
    let events = args.events as usize;
    let (timed, _usage) = with_servers(args, async |api: &Api| {
        let started = Instant::now();
        let _receivers = on_call::start_incident(args, api, &groups, events).await?;
        on_call::develop(args, api, &groups, events).await?;
        let developed_s = started.elapsed().as_secs_f64();
        let pages = pages(api, &groups).await?;
        let timed = time_pages(api.base(), &pages).await?;
        Ok((timed, developed_s))
    })
    .await?;
    let (timed, developed_s) = timed;
    let jobs = groups_len(&groups) * events;
    let mut text = format!(
        "console pages, {jobs} jobs ({events} events x {} subscribers; incident developed in \
         {developed_s:.0} s), {:?} backend, {SAMPLES} GETs each\n\n{:<64} {:>8} {:>8} {:>8} {:>9}\n",
        groups_len(&groups),
        args.backend,
        "page",
        "p50 ms",
        "p99 ms",
        "max ms",
        "bytes"
    );
    let mut missed = Vec::new();
    for t in &timed {
        text.push_str(&format!(
            "{:<64} {:>8.1} {:>8.1} {:>8.1} {:>9}\n",
            t.page, t.latency_ms.p50, t.latency_ms.p99, t.latency_ms.max, t.bytes
        ));
        if t.latency_ms.p50 >= TARGET_MS {
            missed.push(t.page.clone());
        }
    }
    text.push_str(&if missed.is_empty() {
        format!("\nevery page's median under {TARGET_MS} ms: met")
    } else {
        format!("\nmedian at or over {TARGET_MS} ms: {}", missed.join(", "))
    });
    let json = json!({
        "scenario": "console", "backend": format!("{:?}", args.backend).to_lowercase(),
        "jobs": jobs, "events": events, "subscribers": groups_len(&groups),
        "samples": SAMPLES, "target_ms": TARGET_MS, "pages": timed,
    });
    super::report::publish(args, text, json, None)
}

fn groups_len(groups: &Groups) -> usize {
    groups.healthy.len() + groups.slow.len() + groups.failing.len() + groups.gone.len()
}

/// The pages to time, with ids from the incident.
async fn pages(api: &Api, groups: &Groups) -> anyhow::Result<Vec<String>> {
    let failing = groups
        .failing
        .first()
        .or(groups.healthy.first())
        .context("no subscriber")?;
    let (jobs, _) = api
        .call(
            0,
            reqwest::Method::GET,
            &format!("/v1/jobs?subscriber_id={failing}&limit=1"),
            None,
        )
        .await?;
    let job = jobs["items"][0]["id"]
        .as_str()
        .context("a job of the failing subscriber")?;
    let event = on_call::event_id(0);
    Ok(vec![
        "/console/".to_owned(),
        "/console/subscribers".to_owned(),
        "/console/subscribers?health=failing".to_owned(),
        format!("/console/subscribers/{failing}"),
        "/console/destinations".to_owned(),
        "/console/events".to_owned(),
        format!("/console/events/{event}"),
        format!("/console/jobs/{job}"),
        "/console/dead-letters".to_owned(),
        format!("/console/dead-letters?subscriber_id={failing}&dry_run=1"),
        "/console/dead-letters?dead_reason=max_attempts&dry_run=1".to_owned(),
        "/console/replays".to_owned(),
    ])
}

/// The value of `name` among `headers`' `Set-Cookie`s.
fn set_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get_all(SET_COOKIE).iter().find_map(|value| {
        let text = value.to_str().ok()?;
        let pair = text.split(';').next()?;
        let (n, v) = pair.split_once('=')?;
        (n == name).then(|| v.to_owned())
    })
}

/// Logs in through the login form; returns the session cookie (`name=value`).
async fn login(client: &reqwest::Client, base: &str) -> anyhow::Result<String> {
    let form = client.get(format!("{base}/console/login")).send().await?;
    let nonce = set_cookie(form.headers(), "deferhook_login").context("the login nonce")?;
    let answer = client
        .post(format!("{base}/console/login"))
        .header(COOKIE, format!("deferhook_login={nonce}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("nonce={nonce}&next=%2Fconsole%2F&token={TOKEN}"))
        .send()
        .await?;
    let session = set_cookie(answer.headers(), "deferhook_session")
        .with_context(|| format!("no session: {}", answer.status()))?;
    Ok(format!("deferhook_session={session}"))
}

/// Times `SAMPLES` GETs of each page, after one warm-up.
async fn time_pages(base: &str, pages: &[String]) -> anyhow::Result<Vec<Timed>> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()?;
    let cookie = login(&client, base).await?;
    let mut timed = Vec::new();
    for page in pages {
        let mut samples = Vec::with_capacity(SAMPLES);
        let mut bytes = 0;
        for n in 0..=SAMPLES {
            let started = Instant::now();
            let response = client
                .get(format!("{base}{page}"))
                .header(COOKIE, &cookie)
                .send()
                .await?;
            let status = response.status();
            let body = response.bytes().await?;
            let ms = started.elapsed().as_secs_f64() * 1_000.0;
            anyhow::ensure!(status.is_success(), "{page}: {status}");
            if n > 0 {
                samples.push(ms);
            }
            bytes = body.len();
        }
        timed.push(Timed {
            page: page.clone(),
            latency_ms: Spread::of(samples),
            bytes,
        });
    }
    Ok(timed)
}
