//! Claims in SQLite.
//!
//! Every statement here runs on the single writer connection inside one transaction,
//! so a claim's select-then-update cannot interleave with another writer. Each write
//! out of `in_flight` still names the lease's fencing token, exactly as the PostgreSQL
//! store must.

use std::collections::HashMap;

use super::{Pools, Tx};
use crate::domain::{JobState, Timestamp};
use crate::store::claims::{self, ClaimContext, MarkedRow, Target, TargetRow};
use crate::store::records::{ClaimRequest, ClaimedJob};
use crate::store::sweep;
use crate::store::{Sealer, StoreError};

/// The jobs a claim at `?1` takes, at most `?2`: due (`scheduled`/`retrying` whose time
/// has come, `in_flight` whose lease expired, unless that was its last allowed
/// attempt), before the deadline, of enabled subscribers, and within each subscriber's
/// allowance (docs/DESIGN.md §3):
/// - `max_in_flight` minus its live leases;
/// - for `rate_limit_per_second` r: attempts start in bursts of b = max(1, r/10), at
///   most one burst per b/r seconds and never more than r in the last second, so a
///   receiver sees an even pace (5/s is one every 200 ms) rather than r at once.
///
/// Jobs are taken round-robin across subscribers (each one's oldest first), so a large
/// backlog cannot starve the others. The work is bounded by the subscribers with due
/// work, not by the backlog: each one's oldest `?2` due jobs at most are read, from
/// `jobs_subscriber_due` (a whole-backlog ranking cost 28 ms per claim at 10,000 due
/// jobs; this reads them in under 1 ms).
pub(super) const CLAIM_CANDIDATES: &str = "\
    WITH active AS ( \
      SELECT s.id, s.max_in_flight, s.rate_limit_per_second AS rate FROM subscribers s \
      WHERE s.enabled = 1 AND EXISTS ( \
        SELECT 1 FROM jobs d INDEXED BY jobs_subscriber_due \
        WHERE d.subscriber_id = s.id AND d.state IN ('scheduled', 'retrying', 'in_flight') \
          AND d.due_at <= ?1) \
    ), allowance AS ( \
      SELECT a.id AS subscriber_id, MIN( \
        a.max_in_flight - (SELECT COUNT(*) FROM jobs o INDEXED BY jobs_in_flight_subscriber \
          WHERE o.subscriber_id = a.id AND o.state = 'in_flight' AND o.due_at > ?1), \
        CASE WHEN a.rate IS NULL THEN 2147483647 ELSE ( \
          SELECT CASE WHEN MAX(r.started_at) > ?1 - 1000 * MAX(1, a.rate / 10) / a.rate THEN 0 \
                      ELSE MIN(MAX(1, a.rate / 10), a.rate - COUNT(*)) END \
          FROM attempts r INDEXED BY attempts_subscriber_started \
          WHERE r.subscriber_id = a.id AND r.started_at > ?1 - 1000) END \
      ) AS allowed \
      FROM active a \
    ), candidates AS ( \
      SELECT j.id, j.state, j.due_at, j.subscriber_id, al.allowed \
      FROM allowance al CROSS JOIN jobs j ON j.id IN ( \
        SELECT d.id FROM jobs d INDEXED BY jobs_subscriber_due \
        WHERE d.subscriber_id = al.subscriber_id \
          AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= ?1 \
          AND d.deadline > ?1 \
          AND NOT (d.state = 'in_flight' AND d.max_attempts IS NOT NULL \
                   AND d.attempts >= d.max_attempts) \
        ORDER BY d.due_at, d.id LIMIT ?2) \
      WHERE al.allowed > 0 \
    ), ranked AS ( \
      SELECT id, state, due_at, allowed, \
        ROW_NUMBER() OVER (PARTITION BY subscriber_id ORDER BY due_at, id) AS rn \
      FROM candidates \
    ) \
    SELECT id, state, due_at FROM ranked WHERE rn <= allowed \
    ORDER BY rn, due_at, id LIMIT ?2";

/// Marks the claimed jobs (`?1`, a JSON array of ids) in flight under a new lease and
/// returns what an attempt needs.
pub(super) const MARK_IN_FLIGHT: &str = "\
    UPDATE jobs SET state = 'in_flight', attempts = attempts + 1, \
      lease_token = lease_token + 1, lease_owner = ?2, lease_expires_at = ?3, \
      due_at = ?3, updated_at = ?4, \
      possible_duplicate = CASE WHEN state = 'in_flight' THEN 1 ELSE possible_duplicate END \
    WHERE id IN (SELECT value FROM json_each(?1)) \
    RETURNING id, subscriber_id, event_id, payload, attempts, max_attempts, deadline, \
      lease_token, possible_duplicate";

/// Persists the `in_progress` attempt of each job just marked (`?1`, a JSON array of
/// ids), before any request leaves.
pub(super) const START_ATTEMPTS: &str = "\
    INSERT INTO attempts (job_id, number, lease_token, lease_owner, started_at, outcome, \
      possible_duplicate, subscriber_id) \
    SELECT id, attempts, lease_token, lease_owner, ?2, 'in_progress', possible_duplicate, \
      subscriber_id \
    FROM jobs WHERE id IN (SELECT value FROM json_each(?1))";

/// A due job a claim takes.
#[derive(sqlx::FromRow)]
struct CandidateRow {
    id: String,
    state: String,
    due_at: i64,
}

/// Subscriber `?1`'s URL and secrets.
const TARGET: &str = "SELECT url, secret, previous_secret, previous_secret_expires_at \
    FROM subscribers WHERE id = ?1";

pub async fn claim(
    db: &Pools,
    sealer: &Sealer,
    request: ClaimRequest,
) -> Result<Vec<ClaimedJob>, StoreError> {
    let now = request.now;
    let lease_until = now.plus_ms(request.lease_ms);
    let mut tx = db.writer.begin_with("BEGIN IMMEDIATE").await?;
    let candidates: Vec<CandidateRow> = sqlx::query_as(CLAIM_CANDIDATES)
        .bind(now.as_millis())
        .bind(i64::from(request.limit))
        .fetch_all(&mut *tx)
        .await?;
    if candidates.is_empty() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    // Candidate order is the claim's order (round-robin); the updates come back in any.
    let mut order = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let reclaimed = candidate.state == JobState::InFlight.as_str();
        if reclaimed {
            sweep::mark_attempt_unknown::<Pools>(&mut tx, &candidate.id, now).await?;
        }
        let due_since = Timestamp::from_millis(candidate.due_at);
        order.push((candidate.id, reclaimed, due_since));
    }
    let ids = serde_json::to_string(&order.iter().map(|(id, ..)| id).collect::<Vec<_>>())
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    let marked: Vec<MarkedRow> = sqlx::query_as(MARK_IN_FLIGHT)
        .bind(&ids)
        .bind(&request.owner)
        .bind(lease_until.as_millis())
        .bind(now.as_millis())
        .fetch_all(&mut *tx)
        .await?;
    sqlx::query(START_ATTEMPTS)
        .bind(&ids)
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?;
    let mut rows: HashMap<String, MarkedRow> = marked
        .into_iter()
        .map(|row| (row.id().to_owned(), row))
        .collect();

    let mut targets: HashMap<String, Target> = HashMap::new();
    let mut claimed = Vec::with_capacity(order.len());
    for (id, reclaimed, due_since) in order {
        let row = rows
            .remove(&id)
            .ok_or_else(|| StoreError::Internal(format!("claimed job {id} was not marked")))?;
        let subscriber_id = row.subscriber_id().to_owned();
        if !targets.contains_key(&subscriber_id) {
            let target = read_target(&mut tx, &subscriber_id).await?;
            targets.insert(
                subscriber_id.clone(),
                target.open(sealer, &subscriber_id, now),
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
        )?);
    }
    tx.commit().await?;
    Ok(claimed)
}

async fn read_target(tx: &mut Tx, subscriber_id: &str) -> Result<TargetRow, StoreError> {
    Ok(sqlx::query_as(TARGET)
        .bind(subscriber_id)
        .fetch_one(&mut **tx)
        .await?)
}
