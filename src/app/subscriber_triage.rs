//! `GET /v1/subscribers?health=`: the subscribers of one health, most failing jobs
//! first, and, for `failing`, triage in the same answer (docs/DESIGN.md §5.3, issue
//! #33): the causes first — the latest error's class and status, and the pause after a
//! `410 Gone` — ordered by the jobs they hold, each with its subscribers holding the
//! most; the subscribers paused by a 410 are listed with the failing ones, with their
//! reason.

use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::AppError;
use super::pagination::Listing;
use super::subscriber_views;
use super::views::SubscriberView;
use crate::domain::Timestamp;
use crate::domain::health::HealthStatus;
use crate::domain::policy::ErrorClass;
use crate::domain::triage::{self, Cause, CauseGroup, Failing};
use crate::domain::validate;
use crate::store::{HealthCursor, PageRequest, PausedReason, SubscriberHealth};

/// How many subscribers each cause lists.
pub const CAUSE_TOP: usize = 10;

/// A page of subscribers, and with `health=failing` the causes of all of them.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriberListing {
    /// With `health=failing`: every failing subscriber's cause (and the pauses after a
    /// 410), the cause holding the most jobs first; the same on every page. Absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub causes: Option<Vec<CauseView>>,
    /// The subscribers of this page.
    pub items: Vec<SubscriberView>,
    /// Pass as `cursor` to get the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// One cause of failing subscribers.
#[derive(Debug, Serialize, ToSchema)]
pub struct CauseView {
    /// The latest failed attempt's class (`timeout`, `connect`, `http_5xx`, …); `null`
    /// when not recorded.
    pub error_class: Option<ErrorClass>,
    /// Its HTTP status, when the receiver answered.
    pub status: Option<u16>,
    /// `gone` for the subscribers paused after their receiver answered 410; `null`
    /// otherwise.
    #[schema(value_type = Option<String>, example = "gone")]
    pub paused_reason: Option<&'static str>,
    /// How many subscribers have this cause.
    pub subscribers: u64,
    /// The jobs they hold: `retrying` plus dead in the last hour.
    pub failing_jobs: u64,
    /// Up to 10 of them, most `failing_jobs` first, then by id.
    pub top: Vec<CauseSubscriber>,
}

/// A subscriber of a cause.
#[derive(Debug, Serialize, ToSchema)]
pub struct CauseSubscriber {
    /// Its id.
    pub id: String,
    /// The jobs it holds.
    pub failing_jobs: u64,
}

impl From<CauseGroup> for CauseView {
    fn from(group: CauseGroup) -> Self {
        CauseView {
            error_class: group.cause.class,
            status: group.cause.status,
            paused_reason: group.cause.gone.then_some(PausedReason::Gone.as_str()),
            subscribers: group.subscribers,
            failing_jobs: group.jobs,
            top: group
                .top
                .into_iter()
                .map(|(id, failing_jobs)| CauseSubscriber { id, failing_jobs })
                .collect(),
        }
    }
}

/// Every subscriber with health `status` at `now`, most `failing_jobs` first then by
/// id; for `failing`, the subscribers paused after a 410 too.
pub async fn all_of(
    state: &AppState,
    status: HealthStatus,
    now: Timestamp,
) -> Result<Vec<SubscriberHealth>, AppError> {
    let everything = PageRequest {
        after: None,
        limit: u32::MAX,
    };
    let mut entries = state
        .store
        .list_subscribers_by_health(status, everything.clone(), now)
        .await?;
    if status == HealthStatus::Failing {
        let paused = state
            .store
            .list_subscribers_by_health(HealthStatus::Paused, everything, now)
            .await?;
        entries.extend(
            paused
                .into_iter()
                .filter(|entry| entry.subscriber.paused_reason == Some(PausedReason::Gone)),
        );
        entries.sort_by(|a, b| {
            b.figures
                .failing_jobs()
                .cmp(&a.figures.failing_jobs())
                .then_with(|| a.subscriber.id.cmp(&b.subscriber.id))
        });
    }
    Ok(entries)
}

/// The cause of `entry`: its latest failure, and its pause after a 410.
pub fn cause_of(entry: &SubscriberHealth) -> Cause {
    let failure = entry.figures.last_failure.as_ref();
    Cause {
        class: failure.and_then(|f| f.class),
        status: failure.and_then(|f| f.status),
        gone: entry.subscriber.paused_reason == Some(PausedReason::Gone),
    }
}

/// A page of the subscribers of health `status` (see
/// [`super::subscribers::list_subscribers`]). The cursor is `h:<failing_jobs>:<id>`.
pub async fn list_by_health(
    state: &AppState,
    status: HealthStatus,
    cursor: Option<&str>,
    limit: u32,
) -> Result<SubscriberListing, AppError> {
    let after = state
        .cursors
        .decode(Listing::SubscribersByHealth, cursor, |key| {
            let (count, id) = key.strip_prefix("h:")?.split_once(':')?;
            validate::subscriber_id(id).ok()?;
            Some(HealthCursor {
                failing_jobs: count.parse().ok()?,
                id: id.to_owned(),
            })
        })?;
    let entries = all_of(state, status, state.clock.now()).await?;
    let causes = (status == HealthStatus::Failing).then(|| {
        let failing: Vec<Failing> = entries
            .iter()
            .map(|entry| Failing {
                id: entry.subscriber.id.clone(),
                cause: cause_of(entry),
                jobs: entry.figures.failing_jobs(),
            })
            .collect();
        triage::group(&failing, CAUSE_TOP)
            .into_iter()
            .map(CauseView::from)
            .collect()
    });
    let fetched: Vec<SubscriberHealth> = entries
        .into_iter()
        .filter(|entry| {
            after.as_ref().is_none_or(|after| {
                after.precedes(entry.figures.failing_jobs(), &entry.subscriber.id)
            })
        })
        .take(limit as usize + 1)
        .collect();
    let page = state.cursors.page(
        Listing::SubscribersByHealth,
        fetched,
        limit,
        |entry| format!("h:{}:{}", entry.figures.failing_jobs(), entry.subscriber.id),
        subscriber_views::view,
    );
    Ok(SubscriberListing {
        causes,
        items: page.items,
        next_cursor: page.next_cursor,
    })
}
