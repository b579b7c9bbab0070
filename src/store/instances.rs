//! The instances' heartbeats, for both backends (docs/DESIGN.md §5.12): each instance
//! upserts its row every few seconds and deletes it when it stops; the console lists
//! the rows seen recently.

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::Query;
use crate::store::records::{Heartbeat, InstanceSeen};
use crate::store::transactions::Transactions;

/// How long a row may go without a heartbeat before the next heartbeat of any instance
/// deletes it, in milliseconds: a crashed instance's row goes within the hour.
pub const FORGET_AFTER_MS: u64 = 3_600_000;

/// The statements of the heartbeats, in the backend's dialect.
pub(crate) trait InstanceStatements: Transactions {
    /// Inserts or replaces instance `$1`'s row: version `$2`, started `$3`, seen `$4`,
    /// worker slots `$5`, slots in use `$6`.
    const UPSERT: &'static str;
    /// Deletes the rows last seen before `$1`.
    const FORGET: &'static str;
    /// Deletes instance `$1`'s row.
    const DELETE: &'static str;
    /// The rows ([`InstanceRow`]) seen at or after `$1`, in id order.
    const LIVE: &'static str;
}

crate::store::lite_rows::row! {
    /// A row of `instances`.
    pub struct InstanceRow {
        id: String,
        version: String,
        started_at: i64,
        seen_at: i64,
        worker_slots: i64,
        slots_in_use: i64,
    }
}

impl TryFrom<InstanceRow> for InstanceSeen {
    type Error = StoreError;

    fn try_from(row: InstanceRow) -> Result<Self, StoreError> {
        Ok(InstanceSeen {
            heartbeat: Heartbeat {
                id: row.id,
                version: row.version,
                started_at: Timestamp::from_millis(row.started_at),
                worker_slots: decode::num("worker_slots", row.worker_slots)?,
                slots_in_use: decode::num("slots_in_use", row.slots_in_use)?,
            },
            seen_at: Timestamp::from_millis(row.seen_at),
        })
    }
}

/// Records `beat` as seen at `now`, and forgets the rows not seen for
/// [`FORGET_AFTER_MS`], in one write.
pub(crate) async fn record<S: InstanceStatements>(
    db: &S,
    beat: Heartbeat,
    now: Timestamp,
) -> Result<(), StoreError> {
    let upsert = Query::new(S::UPSERT)
        .text(beat.id)
        .text(beat.version)
        .int(beat.started_at.as_millis())
        .int(now.as_millis())
        .int(i64::from(beat.worker_slots))
        .int(i64::from(beat.slots_in_use));
    let forget = Query::new(S::FORGET).int(now.minus_ms(FORGET_AFTER_MS).as_millis());
    db.transaction(move |tx| {
        Box::pin(async move {
            S::execute(tx, upsert).await?;
            S::execute(tx, forget).await?;
            Ok(())
        })
    })
    .await
}

/// Deletes instance `id`'s row (it is stopping).
pub(crate) async fn forget<S: InstanceStatements>(db: &S, id: &str) -> Result<(), StoreError> {
    db.write_alone(Query::new(S::DELETE).text(id.to_owned()))
        .await?;
    Ok(())
}

/// The instances seen at or after `since`, in id order.
pub(crate) async fn live<S: InstanceStatements>(
    db: &S,
    since: Timestamp,
) -> Result<Vec<InstanceSeen>, StoreError> {
    let rows: Vec<InstanceRow> = db
        .read_all(Query::new(S::LIVE).int(since.as_millis()))
        .await?;
    rows.into_iter().map(InstanceSeen::try_from).collect()
}
