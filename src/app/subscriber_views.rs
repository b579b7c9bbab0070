//! The reads that attach a subscriber's `health` (docs/DESIGN.md §5.3; its view is
//! [`HealthView`]) to the subscribers an action or a page answers with.

use super::AppState;
use super::error::AppError;
use super::views::{HealthView, SubscriberView};
use crate::domain::Timestamp;
use crate::store::{Subscriber, SubscriberHealth};

/// The view of `entry`, with its health.
pub fn view(entry: SubscriberHealth) -> SubscriberView {
    let health = HealthView::from(&entry);
    SubscriberView::new(entry.subscriber, health)
}

/// The views of `subscribers` with their health read at `now`, in the same order.
pub async fn views(
    state: &AppState,
    subscribers: Vec<Subscriber>,
    now: Timestamp,
) -> Result<Vec<SubscriberView>, AppError> {
    let ids: Vec<String> = subscribers.iter().map(|s| s.id.clone()).collect();
    let mut figures = state.store.subscriber_health(&ids, now).await?;
    Ok(subscribers
        .into_iter()
        .map(|subscriber| {
            // A subscriber deleted between the two reads shows no jobs and no attempts.
            let figures = figures.remove(&subscriber.id).unwrap_or_default();
            view(SubscriberHealth {
                subscriber,
                figures,
            })
        })
        .collect())
}

/// The view of `subscriber`, just written (created, replaced, changed): when its health
/// cannot be read (the store unavailable a moment after the write), the view with no
/// figures, a warning logged. The write has been committed, so the answer must not be a
/// 503, which says that nothing was (CASES C-19; issue #34's second probe found a
/// created subscriber whose generated secret was lost that way).
pub async fn written_view(state: &AppState, subscriber: Subscriber) -> SubscriberView {
    match view_now(state, subscriber.clone()).await {
        Ok(view) => view,
        Err(error) => {
            tracing::warn!(subscriber_id = %subscriber.id, %error,
                "the subscriber is stored; its health could not be read for its view");
            view(SubscriberHealth {
                subscriber,
                figures: Default::default(),
            })
        }
    }
}

/// The view of `subscriber` with its health read now.
pub async fn view_now(
    state: &AppState,
    subscriber: Subscriber,
) -> Result<SubscriberView, AppError> {
    let now = state.clock.now();
    let mut views = views(state, vec![subscriber], now).await?;
    views
        .pop()
        .ok_or_else(|| AppError::Internal("a subscriber view went missing".into()))
}
