//! `/console/dead-letters`: the dead letters by cause first (dead reason, last error
//! class and status: every cause, with its jobs and subscribers), then by cause and
//! subscriber, [`GROUPS_PER_PAGE`] groups a page (`?page=`), never silently capped;
//! select a slice (a cause, a group, or subscriber, reason and error class), see how
//! many dead jobs it matches (a dry run, which changes nothing), choose a rate and
//! start the replay (`POST /console/replays`).

use askama::Template;
use axum::Extension;
use axum::extract::{Query, State};

use super::access::Session;
use super::chrome::{Chrome, Section, When, query_value, segment};
use super::gate::FormFields;
use super::{ConsoleError, ConsoleState, PageResult, render};
use crate::domain::DeadReason;
use crate::domain::policy::ErrorClass;
use crate::domain::replay_plan::{ReplayFields, ReplayLimits, ReplayPlan};

/// Groups listed on one page.
pub const GROUPS_PER_PAGE: u32 = 100;
/// The rate the form suggests, in jobs per second (at most the server's limit).
const SUGGESTED_RATE: u32 = 50;

/// The slice an operator selected, as its form's fields say it (text kept as typed,
/// so the page shows it back).
#[derive(Clone, Debug, Default)]
pub struct Slice {
    /// `subscriber_id`.
    pub subscriber_id: String,
    /// `dead_reason`.
    pub dead_reason: String,
    /// `error_class`.
    pub error_class: String,
    /// `max_jobs`.
    pub max_jobs: String,
    /// `rate_per_second`.
    pub rate_per_second: String,
}

impl Slice {
    /// The slice `fields` give.
    pub fn from_fields(fields: &FormFields) -> Self {
        let text = |name| fields.text(name).unwrap_or_default().to_owned();
        Slice {
            subscriber_id: text("subscriber_id"),
            dead_reason: text("dead_reason"),
            error_class: text("error_class"),
            max_jobs: text("max_jobs"),
            rate_per_second: text("rate_per_second"),
        }
    }

    /// True when no filter is given.
    pub fn is_empty(&self) -> bool {
        self.subscriber_id.is_empty() && self.dead_reason.is_empty() && self.error_class.is_empty()
    }

    /// The replay the slice asks for, checked as `POST /v1/replays` checks it (the
    /// errors name the field).
    pub fn plan(&self, limits: ReplayLimits) -> Result<ReplayPlan, ConsoleError> {
        let opt = |text: &str| (!text.is_empty()).then(|| text.to_owned());
        let dead_reason = match self.dead_reason.as_str() {
            "" => None,
            text => Some(text.parse::<DeadReason>().map_err(|_| {
                ConsoleError::invalid("dead_reason", format!("`{text}` is not a dead reason"))
            })?),
        };
        let number = |field: &str, text: &str, default: u32, max: u32| {
            if text.is_empty() {
                return Ok(default);
            }
            text.parse::<u32>().map_err(|_| {
                ConsoleError::invalid(field, format!("must be a whole number from 1 to {max}"))
            })
        };
        let fields = ReplayFields {
            selects: None,
            subscriber_id: opt(&self.subscriber_id),
            subscriber_ids: None,
            error_class: opt(&self.error_class),
            last_status: None,
            event_id: None,
            dead_reason,
            dead_after: None,
            dead_before: None,
            all: self.is_empty().then_some(true),
            max_jobs: number("max_jobs", &self.max_jobs, limits.max_jobs, limits.max_jobs)?,
            rate_per_second: number(
                "rate_per_second",
                &self.rate_per_second,
                SUGGESTED_RATE.min(limits.max_rate_per_second),
                limits.max_rate_per_second,
            )?,
            ttl_ms: None,
        };
        ReplayPlan::check(fields, limits).map_err(|errors| {
            let detail = errors
                .iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect::<Vec<_>>()
                .join("; ");
            ConsoleError::new(axum::http::StatusCode::UNPROCESSABLE_ENTITY, detail)
        })
    }
}

struct CauseRow {
    dead_reason: String,
    error: String,
    jobs: u64,
    subscribers: u64,
    select_href: String,
}

struct GroupRow {
    dead_reason: String,
    error: String,
    subscriber_id: String,
    subscriber_href: String,
    select_href: String,
    jobs: u64,
    first: When,
    last: When,
}

#[derive(Template)]
#[template(path = "console/dead_letters.html")]
struct DeadLettersPage {
    chrome: Chrome,
    causes: Vec<CauseRow>,
    groups: Vec<GroupRow>,
    /// The groups of this page: `first`–`last` of `total` (1-based).
    first: u64,
    last: u64,
    total: u64,
    previous_href: Option<String>,
    next_href: Option<String>,
    slice: Slice,
    reasons: Vec<&'static str>,
    classes: Vec<&'static str>,
    /// The dry run's count, when one was asked for.
    matched: Option<u64>,
    max_jobs: u32,
    rate: u32,
    max_rate: u32,
}

/// `GET /console/dead-letters`: the groups and the slice form; with `dry_run=1`, how
/// many dead jobs the slice matches and the form that starts its replay.
pub async fn page(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> PageResult {
    let fields = FormFields(pairs);
    let slice = Slice::from_fields(&fields);
    let app = &state.app;
    let now = app.clock.now();
    let limits = app.replay_limits;
    let matched = if fields.get("dry_run").is_some() {
        let plan = slice.plan(limits)?;
        Some(
            app.store
                .count_replay_matches(&plan.filter, plan.max_jobs)
                .await?,
        )
    } else {
        None
    };
    let page_number: u32 = match fields.get("page") {
        None | Some("") => 1,
        Some(text) => text
            .parse()
            .ok()
            .filter(|n| (1..=1_000_000).contains(n))
            .ok_or_else(|| ConsoleError::invalid("page", "must be a page number from 1"))?,
    };
    let offset = (page_number - 1).saturating_mul(GROUPS_PER_PAGE);
    let dead = app.store.dead_letters(offset, GROUPS_PER_PAGE).await?;
    let error = |class: Option<ErrorClass>, status: Option<u16>| match (class, status) {
        (Some(class), Some(status)) => format!("{class} {status}"),
        (Some(class), None) => class.to_string(),
        (None, _) => "—".to_owned(),
    };
    let shown = dead.groups.len() as u64;
    let first = if shown == 0 { 0 } else { u64::from(offset) + 1 };
    let last = u64::from(offset) + shown;
    let page_href = |n: u32| format!("/console/dead-letters?page={n}");
    let rate = match slice.rate_per_second.parse() {
        Ok(rate) => rate,
        Err(_) => SUGGESTED_RATE.min(limits.max_rate_per_second),
    };
    let page = DeadLettersPage {
        chrome: Chrome::new("Dead letters", Section::DeadLetters, &session),
        causes: dead
            .causes
            .into_iter()
            .map(|c| CauseRow {
                select_href: format!(
                    "/console/dead-letters?dead_reason={}&error_class={}&dry_run=1",
                    c.dead_reason,
                    c.error_class.map_or("", |class| class.as_str())
                ),
                dead_reason: c.dead_reason.to_string(),
                error: error(c.error_class, c.status),
                jobs: c.jobs,
                subscribers: c.subscribers,
            })
            .collect(),
        first,
        last,
        total: dead.total_groups,
        previous_href: (page_number > 1).then(|| page_href(page_number - 1)),
        next_href: (last < dead.total_groups).then(|| page_href(page_number + 1)),
        groups: dead
            .groups
            .into_iter()
            .map(|g| GroupRow {
                error: error(g.error_class, g.status),
                select_href: format!(
                    "/console/dead-letters?subscriber_id={}&dead_reason={}&dry_run=1",
                    query_value(&g.subscriber_id),
                    g.dead_reason
                ),
                subscriber_href: segment(&g.subscriber_id),
                dead_reason: g.dead_reason.to_string(),
                subscriber_id: g.subscriber_id,
                jobs: g.jobs,
                first: When::of(g.first_dead_at, now),
                last: When::of(g.last_dead_at, now),
            })
            .collect(),
        reasons: DeadReason::ALL.iter().map(|r| r.as_str()).collect(),
        classes: ErrorClass::ALL.iter().map(|c| c.as_str()).collect(),
        matched,
        max_jobs: slice.max_jobs.parse().unwrap_or(limits.max_jobs),
        rate,
        max_rate: limits.max_rate_per_second,
        slice,
    };
    Ok(render(&page))
}
