//! Writing the audit trail (docs/DESIGN.md §5.11), for the API's operator actions and
//! the console's alike: an entry is written **before** its action runs
//! ([`Trail::begin`]) and settled with the action's answer ([`Begun::answered`],
//! [`Begun::refused`]).
//!
//! So no action can commit without its entry, whatever stops the server: the entry is
//! durable before the action starts, and an action whose entry cannot be written is
//! not taken (its caller answers 503). A crash between the action's commit and the
//! settlement leaves the entry with no status, which the trail shows as an action
//! whose outcome was never recorded (it may have taken effect) rather than losing it
//! (issue #34: a deletion committed, then the process stopped, left no entry).
//!
//! How an entry ends, from its answer:
//! - a success: settled with its status (and the target the answer names, if any);
//! - a 5xx: settled with its status too: the server failed after the action began,
//!   so it may have taken effect;
//! - a refusal (a 4xx: refused before it changed anything, which the API guarantees;
//!   a replay's dry run): withdrawn, since it was not an action.
//!
//! A settlement is written by a task the request does not own and waited for at most
//! [`Trail::wait`]; its failure is logged and counted
//! (`deferhook_audit_write_failures_total`), never shown, and leaves the entry begun.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use uuid::Uuid;

use crate::domain::Clock;
use crate::domain::ids::new_id;
use crate::metrics;
use crate::store::{AuditSettlement, NewAuditEntry, SharedStore, StoreError};

/// The longest an answer waits for its entry's settlement, whatever the request
/// timeout; the write goes on after it.
pub const MAX_AUDIT_WAIT: Duration = Duration::from_secs(2);

/// How long an answer waits for its entry's settlement: [`MAX_AUDIT_WAIT`], or half
/// the request timeout when that is shorter, so the wait never turns the answer into
/// a 408.
pub fn audit_wait(request_timeout: Duration) -> Duration {
    MAX_AUDIT_WAIT.min(request_timeout / 2)
}

/// Where entries go, and how they are stamped.
#[derive(Clone, Debug)]
pub struct Trail {
    /// The store the entries are written to.
    pub store: SharedStore,
    /// The source of `at` and of the ids.
    pub clock: Arc<dyn Clock>,
    /// How long an answer waits for a settlement ([`audit_wait`]).
    pub wait: Duration,
}

/// What an entry says, apart from its id, time and status.
#[derive(Clone, Debug, Default)]
pub struct Intent {
    /// The action's name (`job.cancel`).
    pub action: &'static str,
    /// What it acts on, as far as is known before it runs.
    pub target: Option<String>,
    /// The request's parameters as JSON text, secrets removed.
    pub parameters: Option<String>,
    /// The token fingerprint of who acts; `None` without tokens.
    pub actor: Option<String>,
    /// The request's `x-request-id`.
    pub request_id: Option<String>,
    /// The server's own id of the request.
    pub server_request_id: Option<Uuid>,
}

impl Trail {
    /// Writes `intent` as a begun entry and returns it, to be settled once the action
    /// is answered. Waits for the write at most [`Trail::wait`]: a write still going
    /// then (the table locked by a backup, say) is withdrawn once it lands, and the
    /// action is refused, so a slow trail makes a prompt 503, never a late 408 for an
    /// action taken after it.
    ///
    /// # Errors
    /// The store's, or [`StoreError::Unavailable`] when the write took too long: the
    /// action must then not be taken.
    pub async fn begin(&self, intent: Intent) -> Result<Begun, StoreError> {
        let entry = self.entry(&intent, None);
        let id = entry.id;
        let action = intent.action;
        let store = self.store.clone();
        let mut writing = tokio::spawn(async move { store.record_audit(entry).await });
        let written = match tokio::time::timeout(self.wait, &mut writing).await {
            Ok(Ok(written)) => written,
            Ok(Err(join)) => Err(StoreError::Unavailable(join.to_string())),
            Err(_) => {
                let store = self.store.clone();
                tokio::spawn(async move {
                    if let Ok(Ok(())) = writing.await {
                        let _ = store.settle_audit(id, AuditSettlement::Withdrawn).await;
                    }
                });
                Err(StoreError::Unavailable(format!(
                    "the audit entry was not written within {} ms",
                    self.wait.as_millis()
                )))
            }
        };
        if let Err(error) = written {
            metrics::audit_write_failed();
            tracing::error!(action, %error,
                "the action's audit entry could not be written; the action is not taken");
            return Err(error);
        }
        Ok(Begun {
            trail: self.clone(),
            id,
            action,
        })
    }

    /// Records `intent` whole, answered `status`: for what is recorded but is no
    /// action (a refused console login). Waits at most [`Trail::wait`]; a failure is
    /// logged and counted.
    pub async fn record(&self, intent: Intent, status: StatusCode) {
        let entry = self.entry(&intent, Some(status.as_u16()));
        let store = self.store.clone();
        let action = intent.action;
        self.waiting(action, async move { store.record_audit(entry).await })
            .await;
    }

    fn entry(&self, intent: &Intent, status: Option<u16>) -> NewAuditEntry {
        let at = self.clock.now();
        NewAuditEntry {
            id: new_id(at),
            at,
            action: intent.action.to_owned(),
            target: intent.target.clone(),
            parameters: intent.parameters.clone(),
            actor: intent.actor.clone(),
            status,
            request_id: intent.request_id.clone(),
            server_request_id: intent.server_request_id,
        }
    }

    /// Runs `write` in a task of its own, waiting for it at most [`Trail::wait`]; a
    /// failure is logged and counted, never returned.
    async fn waiting(
        &self,
        action: &'static str,
        write: impl Future<Output = Result<(), StoreError>> + Send + 'static,
    ) {
        let writing = tokio::spawn(async move {
            if let Err(error) = write.await {
                metrics::audit_write_failed();
                tracing::error!(action, %error,
                    "the audit entry could not be written after the answer (a settlement, \
                     or a refused login's record)");
            }
        });
        if tokio::time::timeout(self.wait, writing).await.is_err() {
            tracing::warn!(
                action,
                "the audit entry is still being written; answering without waiting for it"
            );
        }
    }
}

/// An entry written before its action, waiting for the answer.
#[derive(Debug)]
#[must_use = "a begun entry is settled with its action's answer"]
pub struct Begun {
    trail: Trail,
    id: Uuid,
    action: &'static str,
}

impl Begun {
    /// Settles the entry: the action was answered `status` (a success, or a server
    /// error after it began). Its target stays the one it was begun with. Waits at
    /// most [`Trail::wait`].
    pub async fn answered(self, status: StatusCode) {
        let settlement = AuditSettlement::Answered {
            status: status.as_u16(),
            target: None,
            at: self.trail.clock.now(),
        };
        self.settle(settlement).await;
    }

    /// Withdraws the entry: the request was refused before it changed anything (a
    /// 4xx), or turned out not to be an action (a replay's dry run).
    pub async fn refused(self) {
        self.settle(AuditSettlement::Withdrawn).await;
    }

    async fn settle(self, settlement: AuditSettlement) {
        let store = self.trail.store.clone();
        let id = self.id;
        self.trail
            .waiting(self.action, async move {
                store.settle_audit(id, settlement).await
            })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_for_an_entry_stays_within_the_request_timeout() {
        assert_eq!(audit_wait(Duration::from_secs(30)), MAX_AUDIT_WAIT);
        assert_eq!(
            audit_wait(Duration::from_secs(1)),
            Duration::from_millis(500)
        );
        assert!(audit_wait(Duration::from_millis(10)) < Duration::from_millis(10));
    }
}
