//! `/console/`: the incident on one screen. Jobs by state, accepted / delivered / dead
//! per minute over the last hour, the oldest eligible and retrying ages, jobs past the
//! SLO and near their deadline, the failing subscribers, the affected events, open
//! circuits and the live instances with their worker slots in use. Every figure comes
//! from the store, so every instance shows the same picture; the live part refreshes
//! itself every 5 seconds (htmx).

use askama::Template;
use axum::Extension;
use axum::extract::State;

use super::access::Session;
use super::chart::{self, Chart};
use super::chrome::{Chrome, Section, When, age, segment};
use super::subscribers::{Row, health_table};
use super::{ConsoleState, PageResult, render};
use crate::domain::health::HealthStatus;
use crate::domain::{JobState, Timestamp};
use crate::heartbeat::LIVE_WITHIN_MS;
use crate::store::{AffectedEvent, DestinationView, PageRequest, StoreGauges};

/// The chart's span, in minutes.
pub const CHART_MINUTES: u64 = 60;
/// Most failing subscribers, affected events and open circuits listed.
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

/// An affected event as listed.
struct EventRow {
    event_id: String,
    href: String,
    affected: u64,
    total: u64,
    created: When,
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
    paused_total: usize,
    events: Vec<EventRow>,
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

fn event_row(event: AffectedEvent, now: Timestamp) -> EventRow {
    let j = event.jobs;
    EventRow {
        href: segment(&event.event_id),
        event_id: event.event_id,
        affected: event.affected,
        total: j.scheduled + j.in_flight + j.retrying + j.delivered + j.dead + j.cancelled,
        created: When::of(event.created_at, now),
    }
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
) -> Result<Vec<DestinationView>, super::ConsoleError> {
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

/// `GET /console/`.
pub async fn page(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
) -> PageResult {
    let app = &state.app;
    let now = app.clock.now();
    let store = &app.store;
    let gauges = store.gauges(now, app.delivery_slo_ms).await?;
    let minutes = store
        .jobs_per_minute(now.minus_ms((CHART_MINUTES - 1) * 60_000), now)
        .await?;
    let instances = store.live_instances(now.minus_ms(LIVE_WITHIN_MS)).await?;
    let events = store
        .list_affected_events(
            now.minus_ms(3_600_000),
            PageRequest {
                after: None,
                limit: TOP as u32,
            },
            now,
        )
        .await?;
    let circuits = open_circuits(&state, now).await?;
    let table = health_table(app, now).await?;
    let failing_total = table
        .iter()
        .filter(|r| r.view.health.status == HealthStatus::Failing)
        .count();
    let paused_total = table
        .iter()
        .filter(|r| r.view.health.status == HealthStatus::Paused)
        .count();
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
        paused_total,
        events: events.into_iter().map(|e| event_row(e, now)).collect(),
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
