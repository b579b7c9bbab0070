//! `/console/`: the incident on one screen. Jobs by state, accepted / delivered / dead
//! per minute over the last hour, the oldest eligible and retrying ages, jobs past the
//! SLO and near their deadline, the failing subscribers, open circuits and the live
//! instances with their worker slots in use. The affected events are one click away
//! (`/console/events`): their read costs as much as the rest of the page together at
//! 100,000 jobs (BENCHMARKS.md). Every figure comes
//! from the store, so every instance shows the same picture; the live part refreshes
//! itself every 5 seconds (htmx).

use askama::Template;
use axum::Extension;
use axum::extract::State;

use super::access::Session;
use super::chart::{self, Chart};
use super::chrome::{Chrome, Section, When, age};
use super::subscribers::{Row, health_table};
use super::{ConsoleError, ConsoleState, PageResult, render};
use crate::domain::health::HealthStatus;
use crate::domain::{JobState, Timestamp};
use crate::heartbeat::LIVE_WITHIN_MS;
use crate::store::{DestinationView, PageRequest, StoreGauges};

/// The chart's span, in minutes.
pub const CHART_MINUTES: u64 = 60;
/// Most failing subscribers and open circuits listed.
const TOP: usize = 10;

/// A figure card.
struct Card {
    label: &'static str,
    value: String,
    tone: &'static str,
    href: Option<&'static str>,
}

/// An instance as the overview lists it.
struct InstanceRow {
    id: String,
    version: String,
    started: When,
    seen: When,
    slots: String,
}

/// A hold and the jobs waiting behind it.
struct HeldRow {
    reason: &'static str,
    /// The destination or the subscriber.
    place: String,
    /// A link to it.
    href: String,
    subscribers: u64,
    /// Of those, how many are healthy (held back by their destination, not by
    /// failures of their own).
    healthy: u64,
    jobs: u64,
}

/// The holds of `table`'s subscribers by reason and place, most jobs waiting first
/// (then by reason and place).
fn holds(table: &[Row]) -> Vec<HeldRow> {
    let mut by_hold: std::collections::BTreeMap<(&'static str, String), HeldRow> =
        std::collections::BTreeMap::new();
    for row in table {
        let Some(held) = &row.held else { continue };
        let reason = held.reason.as_str();
        let on_destination = reason.starts_with("destination_");
        let entry = by_hold
            .entry((reason, held.place.clone()))
            .or_insert_with(|| HeldRow {
                reason,
                href: if on_destination {
                    "/console/destinations".to_owned()
                } else {
                    format!("/console/subscribers/{}", row.href)
                },
                place: held.place.clone(),
                subscribers: 0,
                healthy: 0,
                jobs: 0,
            });
        entry.subscribers += 1;
        entry.healthy += u64::from(row.view.health.status == HealthStatus::Healthy);
        entry.jobs += held.jobs;
    }
    let mut rows: Vec<HeldRow> = by_hold.into_values().collect();
    rows.sort_by(|a, b| {
        b.jobs
            .cmp(&a.jobs)
            .then(a.reason.cmp(b.reason))
            .then(a.place.cmp(&b.place))
    });
    rows
}

/// A destination whose circuit is not closed.
struct CircuitRow {
    destination: String,
    state: String,
    retry_at: Option<When>,
    last_error: Option<String>,
}

#[derive(Template)]
#[template(path = "console/overview.html")]
struct OverviewPage {
    chrome: Chrome,
    now: String,
    states: Vec<(JobState, u64)>,
    cards: Vec<Card>,
    chart: Chart,
    width: u32,
    height: u32,
    failing: Vec<Row>,
    failing_total: usize,
    held: Vec<HeldRow>,
    held_total: usize,
    paused_total: usize,
    circuits: Vec<CircuitRow>,
    instances: Vec<InstanceRow>,
}

fn age_since(since: Option<Timestamp>, now: Timestamp) -> String {
    since.map_or_else(|| "—".to_owned(), |at| age(now.millis_since(at)))
}

fn cards(gauges: &StoreGauges, now: Timestamp, slo_ms: u64) -> Vec<Card> {
    let tone = |bad: bool| if bad { "bad" } else { "" };
    let dead = gauges
        .jobs_by_state
        .iter()
        .find(|(s, _)| *s == JobState::Dead)
        .map_or(0, |(_, n)| *n);
    vec![
        Card {
            label: "Oldest eligible",
            value: age_since(gauges.oldest_eligible_since, now),
            tone: tone(
                gauges
                    .oldest_eligible_since
                    .is_some_and(|at| now.millis_since(at) > slo_ms as i64),
            ),
            href: None,
        },
        Card {
            label: "Oldest retrying",
            value: age_since(gauges.oldest_retrying_since, now),
            tone: if gauges.oldest_retrying_since.is_some() {
                "warn"
            } else {
                ""
            },
            href: Some("/console/subscribers?health=failing"),
        },
        Card {
            label: "Past the SLO",
            value: gauges.past_slo.to_string(),
            tone: tone(gauges.past_slo > 0),
            href: None,
        },
        Card {
            label: "Near deadline",
            value: gauges.near_deadline.to_string(),
            tone: tone(gauges.near_deadline > 0),
            href: None,
        },
        Card {
            label: "Dead letters",
            value: dead.to_string(),
            tone: if dead > 0 { "warn" } else { "" },
            href: Some("/console/dead-letters"),
        },
        Card {
            label: "Circuits open",
            value: (gauges.circuits_open + gauges.circuits_half_open).to_string(),
            tone: tone(gauges.circuits_open > 0),
            href: Some("/console/destinations"),
        },
        Card {
            label: "Destinations at limit",
            value: gauges.destinations_at_limit.to_string(),
            tone: if gauges.destinations_at_limit > 0 {
                "warn"
            } else {
                ""
            },
            href: Some("/console/destinations"),
        },
    ]
}

fn circuit_row(d: DestinationView, now: Timestamp) -> CircuitRow {
    CircuitRow {
        destination: d.key,
        state: d.circuit.state.to_string(),
        retry_at: When::of_opt(d.circuit.retry_at, now),
        last_error: d.last_error.map(|e| match e.status {
            Some(status) => format!("{} {status}", e.class),
            None => e.class.to_string(),
        }),
    }
}

/// The destinations whose circuit is not closed (reads every destination, by pages).
async fn open_circuits(
    state: &ConsoleState,
    now: Timestamp,
) -> Result<Vec<DestinationView>, ConsoleError> {
    let mut open = Vec::new();
    let mut after = None;
    loop {
        let page = state
            .app
            .store
            .list_destinations(
                PageRequest {
                    after: after.clone(),
                    limit: 1_000,
                },
                now,
            )
            .await?;
        let done = page.len() < 1_000;
        after = page.last().map(|d| d.key.clone());
        open.extend(
            page.into_iter()
                .filter(|d| d.circuit.state != crate::domain::circuit::CircuitState::Closed),
        );
        if done {
            return Ok(open);
        }
    }
}

/// `read`, its time logged at debug level (`RUST_LOG=deferhook::console=debug`).
async fn timed<T>(
    what: &'static str,
    read: impl std::future::Future<Output = Result<T, ConsoleError>>,
) -> Result<T, ConsoleError> {
    let started = std::time::Instant::now();
    let result = read.await;
    tracing::debug!(
        read = what,
        ms = started.elapsed().as_secs_f64() * 1e3,
        "overview read"
    );
    result
}

/// `GET /console/`.
pub async fn page(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
) -> PageResult {
    let app = &state.app;
    let now = app.clock.now();
    let store = &app.store;
    // The reads are independent: they run at once (each in its own snapshot; on
    // SQLite on the readers' pool), so the page waits for the slowest, not the sum.
    let since = now.minus_ms((CHART_MINUTES - 1) * 60_000);
    let (gauges, minutes, instances, circuits, table) = tokio::try_join!(
        timed("gauges", async {
            Ok::<_, ConsoleError>(store.gauges(now, app.delivery_slo_ms).await?)
        }),
        timed("jobs per minute", async {
            Ok(store.jobs_per_minute(since, now).await?)
        }),
        timed("live instances", async {
            Ok(store.live_instances(now.minus_ms(LIVE_WITHIN_MS)).await?)
        }),
        timed("open circuits", open_circuits(&state, now)),
        timed("health table", health_table(app, now)),
    )?;
    let failing_total = table
        .iter()
        .filter(|r| r.view.health.status == HealthStatus::Failing)
        .count();
    let paused_total = table
        .iter()
        .filter(|r| r.view.health.status == HealthStatus::Paused)
        .count();
    let held = holds(&table);
    let held_total = held.len();
    let failing = table
        .into_iter()
        .filter(|r| r.view.health.status == HealthStatus::Failing)
        .take(TOP)
        .collect();
    let page = OverviewPage {
        chrome: Chrome::new("Overview", Section::Overview, &session),
        now: now.to_rfc3339(),
        cards: cards(&gauges, now, app.delivery_slo_ms),
        states: JobState::ALL
            .iter()
            .map(|s| {
                let n = gauges
                    .jobs_by_state
                    .iter()
                    .find(|(t, _)| t == s)
                    .map_or(0, |(_, n)| *n);
                (*s, n)
            })
            .collect(),
        chart: chart::draw(&minutes),
        width: chart::WIDTH,
        height: chart::HEIGHT,
        failing,
        failing_total,
        held: held.into_iter().take(TOP).collect(),
        held_total,
        paused_total,
        circuits: circuits
            .into_iter()
            .take(TOP)
            .map(|d| circuit_row(d, now))
            .collect(),
        instances: instances
            .into_iter()
            .map(|i| InstanceRow {
                slots: if i.heartbeat.worker_slots == 0 {
                    "no worker".to_owned()
                } else {
                    format!(
                        "{} of {}",
                        i.heartbeat.slots_in_use, i.heartbeat.worker_slots
                    )
                },
                started: When::of(i.heartbeat.started_at, now),
                seen: When::of(i.seen_at, now),
                id: i.heartbeat.id,
                version: i.heartbeat.version,
            })
            .collect(),
    };
    Ok(render(&page))
}
