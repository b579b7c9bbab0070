//! Claims in SQLite.
//!
//! Every statement here runs on the single writer connection inside one transaction,
//! so a claim's select-then-update cannot interleave with another writer. Each write
//! out of `in_flight` still names the lease's fencing token, exactly as the PostgreSQL
//! store must.

use std::collections::HashMap;

use super::destinations::DUE;
use super::{Pools, Tx};
use crate::domain::circuit::Probe;
use crate::domain::destination_state::DestinationPolicy;
use crate::domain::{JobState, Timestamp};
use crate::store::claims::{self, ClaimContext, MarkedRow, Target, TargetRow};
use crate::store::destinations::{self, Admissions, LoadedRow};
use crate::store::dialect::Query;
use crate::store::records::{ClaimRequest, ClaimedJob};
use crate::store::sweep;
use crate::store::transactions::Transactions;
use crate::store::{Sealer, StoreError};

/// The start of a `candidates` branch of [`CLAIM_CANDIDATES`]: each allowance row with
/// its destination's bound, and its subscriber's due jobs (those of it a claim may take:
/// before the deadline, attempts left) in due order, to which the branch adds its
/// `LIMIT` and `OFFSET`.
macro_rules! candidates_of_allowance {
    () => {
        "SELECT j.id, j.state, j.due_at, j.subscriber_id, al.destination, al.room, \
           al.long_room, al.long_running, al.health, al.open, al.allowed, b.level AS bound \
         FROM allowance al LEFT JOIN bound b ON b.destination = al.destination \
         CROSS JOIN jobs j ON j.id IN ( \
           SELECT d.id FROM jobs d INDEXED BY jobs_subscriber_due \
           WHERE d.subscriber_id = al.subscriber_id \
             AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= ?1 \
             AND d.deadline > ?1 \
             AND NOT (d.state = 'in_flight' AND d.max_attempts IS NOT NULL \
                      AND d.attempts >= d.max_attempts) \
           ORDER BY d.due_at, d.id "
    };
}

/// The jobs a claim at `?1` takes, at most `?2`: due (`scheduled`/`retrying` whose time
/// has come, `in_flight` whose lease expired, unless that was its last allowed
/// attempt), before the deadline, of enabled subscribers whose destination lets work go
/// (`?3`, a JSON object of destination key → `[room, long_room]`: how many it may take
/// now, and how many of those may go to long-running endpoints), and within each
/// subscriber's allowance (docs/DESIGN.md §3):
/// - `max_in_flight` minus its live leases;
/// - for `rate_limit_per_second` r: attempts start in bursts of b = max(1, r/10), at
///   most one burst per b/r seconds and never more than r in the last second, so a
///   receiver sees an even pace (5/s is one every 200 ms) rather than r at once;
/// - its endpoint circuit (§15.1): nothing while it is open or the receiver's
///   `Retry-After` holds it; once half-open, one probe when none of its attempts is
///   open;
///
/// and within each destination's allowance (docs/DESIGN.md §15).
///
/// Within a destination, places go by the time-fair share of §15.2: each candidate job
/// gets the level `open + n` (its subscriber's open requests plus its rank among the
/// subscriber's due jobs), and the lowest levels go first, so a subscriber that holds
/// more places (a slow one, whose attempts hold them longer) gets its next one only
/// after the others there have caught up; at equal levels, quick endpoints before
/// long-running ones, healthy before failing, then the oldest due. Long-running
/// endpoints take at most `long_room`; with none left, their subscribers are not read
/// at all (a capped slow group's backlog costs the quick ones' claims nothing). Across destinations, jobs are taken
/// round-robin (the first of each destination's order, then the second, …); in each
/// round the destination with more room goes first, so when a claim has few places
/// (the instance's slots nearly all taken) the least busy destination gets them. The
/// work is bounded by the subscribers with due work, not by the backlog: each one's
/// oldest `?2` due jobs at most are read, from `jobs_subscriber_due` (a whole-backlog
/// ranking cost 28 ms per claim at 10,000 due jobs; this reads them in under 1 ms).
///
/// Nor does it read jobs that cannot be placed (`bound`): when a destination has at
/// least `room` quick subscribers that may take a job, the `room`-th lowest level of
/// their next jobs bounds the levels it can take (those `room` jobs all come first),
/// so a subscriber's jobs above it are not read. In a fan-out (every subscriber with
/// nothing open, several events due) that is each subscriber's first due job only:
/// 2,000 candidates to rank instead of 6,000, a claim in 30 ms instead of 85 (issue
/// #33's shared host, three fan-outs due on one destination; the same jobs taken).
pub(super) const CLAIM_CANDIDATES: &str = concat!(
    "\
    WITH admitted AS ( \
      SELECT key AS destination, json_extract(value, '$[0]') AS room, \
        json_extract(value, '$[1]') AS long_room FROM json_each(?3) \
    ), active AS ( \
      SELECT s.id, s.max_in_flight, s.rate_limit_per_second AS rate, a.destination, a.room, \
        a.long_room, COALESCE(e.long_running, 0) AS long_running, \
        CASE WHEN e.circuit = 'open' THEN 2 \
             WHEN e.failures + e.previous_failures > 0 THEN 1 ELSE 0 END AS health, \
        COALESCE(e.circuit = 'open', 0) AS probing, \
        (SELECT COUNT(*) FROM jobs o INDEXED BY jobs_in_flight_subscriber \
          WHERE o.subscriber_id = s.id AND o.state = 'in_flight' AND o.due_at > ?1) AS open \
      FROM admitted a JOIN subscribers s INDEXED BY subscribers_destination \
        ON s.destination = a.destination \
      LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
      WHERE s.enabled = 1 AND (e.hold_until IS NULL OR e.hold_until <= ?1) \
        AND (e.circuit IS NULL OR e.circuit = 'closed' OR e.retry_at <= ?1) \
        AND (COALESCE(e.long_running, 0) = 0 OR a.long_room > 0) AND EXISTS ( \
        SELECT 1 FROM jobs d INDEXED BY jobs_subscriber_due \
        WHERE d.subscriber_id = s.id AND d.state IN ('scheduled', 'retrying', 'in_flight') \
          AND d.due_at <= ?1 AND d.deadline > ?1 \
          AND NOT (d.state = 'in_flight' AND d.max_attempts IS NOT NULL \
                   AND d.attempts >= d.max_attempts)) \
    ), allowance AS ( \
      SELECT a.id AS subscriber_id, a.destination, a.room, a.long_room, a.long_running, \
        a.health, a.open, MIN( \
        a.max_in_flight - a.open, \
        CASE WHEN a.probing THEN 1 - a.open ELSE 2147483647 END, \
        CASE WHEN a.rate IS NULL THEN 2147483647 ELSE ( \
          SELECT CASE WHEN MAX(r.started_at) > ?1 - 1000 * MAX(1, a.rate / 10) / a.rate THEN 0 \
                      ELSE MIN(MAX(1, a.rate / 10), a.rate - COUNT(*)) END \
          FROM attempts r INDEXED BY attempts_subscriber_started \
          WHERE r.subscriber_id = a.id AND r.started_at > ?1 - 1000) END \
      ) AS allowed \
      FROM active a \
    ), bound AS ( \
      SELECT destination, MAX(level) AS level FROM ( \
        SELECT destination, room, open + 1 AS level, \
          ROW_NUMBER() OVER (PARTITION BY destination ORDER BY open) AS k \
        FROM allowance WHERE allowed > 0 AND long_running = 0 \
      ) WHERE k <= room GROUP BY destination HAVING COUNT(*) >= MAX(room) \
    ), candidates AS ( \
",
    candidates_of_allowance!(),
    "LIMIT 1) \
      WHERE al.allowed > 0 AND (b.level IS NULL OR al.open + 1 <= b.level) \
      UNION ALL \
",
    candidates_of_allowance!(),
    "LIMIT CAST(?2 AS INTEGER) OFFSET 1) \
      WHERE al.allowed > 1 AND (b.level IS NULL OR al.open + 2 <= b.level) \
    ), ranked AS ( \
      SELECT *, ROW_NUMBER() OVER (PARTITION BY subscriber_id ORDER BY due_at, id) AS rn \
      FROM candidates \
    ), capped AS ( \
      SELECT *, open + rn AS level, ROW_NUMBER() OVER (PARTITION BY destination, long_running \
        ORDER BY open + rn, health, due_at, id) AS ln \
      FROM ranked WHERE rn <= allowed AND (bound IS NULL OR open + rn <= bound) \
    ), spread AS ( \
      SELECT id, state, due_at, destination, room, ROW_NUMBER() OVER ( \
        PARTITION BY destination ORDER BY level, long_running, health, due_at, id) AS dn \
      FROM capped WHERE long_running = 0 OR ln <= long_room \
    ) \
    SELECT id, state, due_at, destination FROM spread WHERE dn <= room \
    ORDER BY dn, room DESC, due_at, id LIMIT CAST(?2 AS INTEGER)"
);

/// Marks the claimed jobs (`?1`, a JSON array of ids) in flight under a new lease, at
/// their subscriber's destination of this moment, and returns what an attempt needs.
pub(super) const MARK_IN_FLIGHT: &str = "\
    UPDATE jobs SET state = 'in_flight', attempts = attempts + 1, \
      lease_token = lease_token + 1, lease_owner = ?2, lease_expires_at = ?3, \
      due_at = ?3, updated_at = ?4, \
      destination = (SELECT s.destination FROM subscribers s WHERE s.id = jobs.subscriber_id), \
      possible_duplicate = CASE WHEN state = 'in_flight' THEN 1 ELSE possible_duplicate END \
    WHERE id IN (SELECT value FROM json_each(?1)) \
    RETURNING id, subscriber_id, event_id, CASE WHEN payload_id IS NULL THEN payload END \
      AS payload, payload_id, attempts, max_attempts, deadline, lease_token, \
      possible_duplicate, event_type";

/// The shared payloads `?1` (a JSON array of ids) with their texts.
const SHARED_PAYLOADS: &str = "SELECT id, body FROM payloads \
    WHERE id IN (SELECT value FROM json_each(?1))";

/// Persists the `in_progress` attempt of each job just marked (`?1`, a JSON array of
/// ids), before any request leaves.
pub(super) const START_ATTEMPTS: &str = "\
    INSERT INTO attempts (job_id, number, lease_token, lease_owner, started_at, outcome, \
      possible_duplicate, subscriber_id) \
    SELECT id, attempts, lease_token, lease_owner, ?2, 'in_progress', possible_duplicate, \
      subscriber_id \
    FROM jobs WHERE id IN (SELECT value FROM json_each(?1))";

crate::store::lite_rows::row! {
    /// A due job a claim takes.
    struct CandidateRow {
        id: String,
        state: String,
        due_at: i64,
        destination: String,
    }
}

/// Subscriber `?1`'s URL and secrets.
const TARGET: &str = "SELECT url, secret, previous_secret, previous_secret_expires_at, \
    attempt_timeout_ms FROM subscribers WHERE id = ?1";

/// Claims in one write transaction of the batch writer (see [`WorkerStore::claim`]).
///
/// [`WorkerStore::claim`]: crate::store::WorkerStore::claim
pub async fn claim(
    db: &Pools,
    sealer: &Sealer,
    policy: &DestinationPolicy,
    request: ClaimRequest,
) -> Result<Vec<ClaimedJob>, StoreError> {
    let (sealer, policy) = (sealer.clone(), *policy);
    db.transaction(move |tx| Box::pin(claim_in(tx, sealer, policy, request)))
        .await
}

async fn claim_in(
    tx: &mut Tx,
    sealer: Sealer,
    policy: DestinationPolicy,
    request: ClaimRequest,
) -> Result<Vec<ClaimedJob>, StoreError> {
    let now = request.now;
    let lease_until = now.plus_ms(request.lease_ms);
    destinations::assign_missing::<Pools>(tx, now).await?;
    let since = now.minus_ms(policy.endpoint.window_ms);
    let query = Query::new(DUE).int(now.as_millis()).int(since.as_millis());
    let due: Vec<LoadedRow> = Pools::fetch_all(tx, query).await?;
    let admissions = Admissions::of(&due, now, &policy)?;
    if admissions.open.is_empty() {
        return Ok(Vec::new());
    }
    let query = Query::new(CLAIM_CANDIDATES)
        .int(now.as_millis())
        .int(i64::from(request.limit))
        .text(admissions.json_object()?);
    let candidates: Vec<CandidateRow> = Pools::fetch_all(tx, query).await?;
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let mut probes = admissions.probes(&due);
    // Candidate order is the claim's order (round-robin); the updates come back in any.
    let mut order = Vec::with_capacity(candidates.len());
    let mut sent_probes = Vec::new();
    for candidate in candidates {
        let reclaimed = candidate.state == JobState::InFlight.as_str();
        if reclaimed {
            sweep::mark_attempt_unknown::<Pools>(tx, &candidate.id, now).await?;
        }
        let due_since = Timestamp::from_millis(candidate.due_at);
        if let Some(row) = probes.remove(candidate.destination.as_str()) {
            sent_probes.push((candidate.id.clone(), row));
        }
        order.push((candidate.id, reclaimed, due_since));
    }
    let ids = serde_json::to_string(&order.iter().map(|(id, ..)| id).collect::<Vec<_>>())
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    let query = Query::new(MARK_IN_FLIGHT)
        .text(ids.clone())
        .text(request.owner.clone())
        .int(lease_until.as_millis())
        .int(now.as_millis());
    let marked: Vec<MarkedRow> = Pools::fetch_all(tx, query).await?;
    let query = Query::new(START_ATTEMPTS).text(ids).int(now.as_millis());
    Pools::execute(tx, query).await?;
    let mut payloads = claims::ClaimPayloads::default();
    let missing = payloads.missing(&marked);
    if !missing.is_empty() {
        let ids =
            serde_json::to_string(&missing).map_err(|e| StoreError::Internal(e.to_string()))?;
        let bodies: Vec<(String, String)> =
            Pools::fetch_all(tx, Query::new(SHARED_PAYLOADS).text(ids)).await?;
        for (id, body) in bodies {
            payloads.add(id, body);
        }
    }
    let mut rows: HashMap<String, MarkedRow> = marked
        .into_iter()
        .map(|row| (row.id().to_owned(), row))
        .collect();

    for (id, row) in sent_probes {
        let token = rows
            .get(&id)
            .map(MarkedRow::lease_token)
            .ok_or_else(|| StoreError::Internal(format!("probe {id} was not marked")))?;
        let probe = Probe { job_id: id, token };
        destinations::start_probe::<Pools>(tx, row, probe, lease_until, now).await?;
    }
    let mut targets: HashMap<String, Target> = HashMap::new();
    let mut claimed = Vec::with_capacity(order.len());
    for (id, reclaimed, due_since) in order {
        let row = rows
            .remove(&id)
            .ok_or_else(|| StoreError::Internal(format!("claimed job {id} was not marked")))?;
        let subscriber_id = row.subscriber_id().to_owned();
        if !targets.contains_key(&subscriber_id) {
            let query = Query::new(TARGET).text(subscriber_id.clone());
            let target: TargetRow = Pools::fetch_one(tx, query).await?;
            targets.insert(
                subscriber_id.clone(),
                target.open(&sealer, &subscriber_id, now),
            );
        }
        let context = ClaimContext {
            lease_until,
            reclaimed,
            due_since,
        };
        claimed.push(claims::claimed_job(
            row,
            targets[&subscriber_id].clone(),
            context,
            &payloads,
        )?);
    }
    Ok(claimed)
}
