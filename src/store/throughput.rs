//! Jobs accepted, delivered and dead per minute, for both backends, read in one
//! snapshot from indexes alone, never maintained on the hot path: the jobs accepted in
//! a minute are counted on the primary key (job ids are UUIDv7 stamped at creation, so
//! a minute's jobs are one range of ids, as the listings' `created_after` reads them),
//! one count per minute; delivered and dead jobs are grouped from `jobs_finished
//! (state, updated_at)` (a delivered job is last updated when it is delivered) and
//! `jobs_dead_at`.

use std::collections::BTreeMap;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::Query;
use crate::store::figures::Count;
use crate::store::records::{MINUTE_MS, MinuteCounts, uuid_v7_floor};
use crate::store::transactions::Transactions;

/// The statements of the per-minute counts, in the backend's dialect. Each yields
/// [`MinuteRow`]s: the minute (epoch milliseconds / 60,000) and a count.
pub(crate) trait ThroughputStatements: Transactions {
    /// How many jobs (`n`, a [`Count`]) have an id in [`$1`, `$2`): the jobs created in
    /// that span, the bounds being [`uuid_v7_floor`]s.
    const ACCEPTED: &'static str;
    /// `delivered` jobs delivered at or after `$1`, per minute of `updated_at` (their
    /// delivery).
    const DELIVERED: &'static str;
    /// `dead` jobs dead at or after `$1`, per minute of `dead_at`.
    const DEAD: &'static str;
}

crate::store::lite_rows::row! {
    /// A count in one minute.
    pub struct MinuteRow {
        minute: i64,
        n: i64,
    }
}

/// The minutes from the one holding `since` to the one holding `now`, oldest first,
/// each with its counts (0 for a minute without any), read in one snapshot.
pub(crate) async fn per_minute<S: ThroughputStatements>(
    db: &S,
    since: Timestamp,
    now: Timestamp,
) -> Result<Vec<MinuteCounts>, StoreError> {
    let from = since.as_millis().div_euclid(MINUTE_MS) * MINUTE_MS;
    let to = now.as_millis().div_euclid(MINUTE_MS) * MINUTE_MS;
    let mut minutes: BTreeMap<i64, MinuteCounts> = BTreeMap::new();
    let mut at = from;
    while at <= to {
        let minute = Timestamp::from_millis(at);
        minutes.insert(at / MINUTE_MS, MinuteCounts::empty(minute));
        at += MINUTE_MS;
    }
    let mut tx = db.snapshot().await?;
    let mut accepted = Vec::with_capacity(minutes.len());
    for &minute in minutes.keys() {
        let start = Timestamp::from_millis(minute * MINUTE_MS);
        let end = start.plus_ms(MINUTE_MS as u64);
        let query = Query::new(S::ACCEPTED)
            .text(uuid_v7_floor(start).to_string())
            .text(uuid_v7_floor(end).to_string());
        let count: Count = S::fetch_one(&mut tx, query).await?;
        accepted.push(MinuteRow { minute, n: count.n });
    }
    let delivered: Vec<MinuteRow> =
        S::fetch_all(&mut tx, Query::new(S::DELIVERED).int(from)).await?;
    let dead: Vec<MinuteRow> = S::fetch_all(&mut tx, Query::new(S::DEAD).int(from)).await?;
    S::commit(tx).await?;
    let mut add = |rows: Vec<MinuteRow>, field: fn(&mut MinuteCounts) -> &mut u64| {
        for row in rows {
            // A minute after `now` (a job created by an instance whose clock is ahead)
            // is left out: the chart ends now.
            if let Some(counts) = minutes.get_mut(&row.minute) {
                *field(counts) += decode::count(row.n);
            }
        }
    };
    add(accepted, |c| &mut c.accepted);
    add(delivered, |c| &mut c.delivered);
    add(dead, |c| &mut c.dead);
    Ok(minutes.into_values().collect())
}
