//! What a database must provide for [`SqlStore`](super::sql_store::SqlStore): its
//! transactions and statements (the shared algorithms' statement traits, one per
//! subject, each implemented in `sqlite/` and `postgres/` by the file of the same
//! name), and the few calls that really differ between SQLite and PostgreSQL.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::attempts::AttemptStatements;
use super::audit::AuditStatements;
use super::creates::CreateStatements;
use super::dead_letters::DeadLetterStatements;
use super::deletions::DeletionStatements;
use super::destinations::DestinationStatements;
use super::endpoints::EndpointStatements;
use super::event_types::EventTypeStatements;
use super::events::EventStatements;
use super::figures::FigureStatements;
use super::health::HealthStatements;
use super::instances::InstanceStatements;
use super::jobs::JobStatements;
use super::maintenance::PurgeStatements;
use super::outcomes::OutcomeStatements;
use super::records::{
    ClaimRequest, ClaimedJob, ExpiredJobs, LeaseRef, PutSubscriberOutcome, SubscriberPut,
};
use super::replays::ReplayStatements;
use super::schedules::ScheduleStatements;
use super::secrets::SecretStatements;
use super::server_keys::ServerKeyStatements;
use super::sessions::SessionStatements;
use super::subscribers::SubscriberStatements;
use super::sweep::SweepStatements;
use super::throughput::ThroughputStatements;
use super::{Sealer, StoreError};
use crate::domain::Timestamp;
use crate::domain::destination_state::DestinationPolicy;

/// A database the store runs on: SQLite's connections (`sqlite::Pools`) or
/// PostgreSQL's pool. Every statement trait of the shared algorithms, plus:
pub(crate) trait Backend:
    AttemptStatements
    + AuditStatements
    + CreateStatements
    + DeadLetterStatements
    + DeletionStatements
    + DestinationStatements
    + EndpointStatements
    + EventStatements
    + EventTypeStatements
    + FigureStatements
    + HealthStatements
    + InstanceStatements
    + JobStatements
    + OutcomeStatements
    + PurgeStatements
    + ReplayStatements
    + ScheduleStatements
    + SecretStatements
    + ServerKeyStatements
    + SessionStatements
    + SubscriberStatements
    + SweepStatements
    + ThroughputStatements
    + std::fmt::Debug
{
    /// Group commits of creates that may run at once (SQLite has one writer: 1).
    const CREATE_GROUPS: usize;

    /// Succeeds when the database answers a trivial query (readiness); see
    /// [`Store::ping`](super::Store::ping).
    fn ping(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The database's clock (PostgreSQL's `clock_timestamp()`), `None` on a database
    /// that is this machine (SQLite); see [`Store::database_clock`](super::Store::database_clock).
    fn database_clock(&self) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// Wakes `wake` whenever another instance creates a job, until `stop`; returns at
    /// once where no other instance can (SQLite), the default.
    fn listen_for_jobs(
        &self,
        wake: Arc<Notify>,
        stop: CancellationToken,
    ) -> impl Future<Output = ()> + Send {
        let _ = (wake, stop);
        async {}
    }

    /// Creates or replaces a subscriber in one statement sequence of the backend's
    /// own (an upsert that reports whether it created); see
    /// [`Store::put_subscriber`](super::Store::put_subscriber).
    fn put_subscriber(
        &self,
        sealer: &Sealer,
        put: SubscriberPut,
        now: Timestamp,
    ) -> impl Future<Output = Result<PutSubscriberOutcome, StoreError>> + Send;

    /// Claims due jobs under leases; see [`WorkerStore::claim`](super::WorkerStore::claim).
    fn claim(
        &self,
        sealer: &Sealer,
        policy: &DestinationPolicy,
        request: ClaimRequest,
    ) -> impl Future<Output = Result<Vec<ClaimedJob>, StoreError>> + Send;

    /// Extends leases still held; see [`WorkerStore::renew_leases`](super::WorkerStore::renew_leases).
    fn renew_leases(
        &self,
        leases: &[LeaseRef],
        until: Timestamp,
        now: Timestamp,
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send;

    /// Moves jobs past their deadline to dead; see
    /// [`WorkerStore::expire_deadlines`](super::WorkerStore::expire_deadlines).
    fn expire_deadlines(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> impl Future<Output = Result<ExpiredJobs, StoreError>> + Send;
}
