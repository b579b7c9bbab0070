//! Claims, lease renewal, fenced outcomes and the deadline sweep in SQLite.
//!
//! Every statement here runs on the single writer connection inside one transaction,
//! so a claim's select-then-update cannot interleave with another writer. Each write
//! out of `in_flight` still names the lease's fencing token, exactly as the PostgreSQL
//! store must.

use std::collections::{HashMap, HashSet};

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqlitePool};

use crate::domain::secret::SigningSecrets;
use crate::domain::{DeadReason, JobSnapshot, JobState, Timestamp};
use crate::store::records::{
    ClaimRequest, ClaimedJob, ExpiredJobs, Fenced, LeaseRef, OutcomeRecord,
};
use crate::store::{Sealer, StoreError, UnreadableSecret};
use crate::store::{outcome_batch, rows};

const LEASE_EXPIRED_REASON: &str = "the lease expired before a result was recorded";

/// The jobs a claim at `?1` takes, at most `?2`: due (`scheduled`/`retrying` whose time
/// has come, `in_flight` whose lease expired, unless that was its last allowed
/// attempt), before the deadline, of enabled subscribers, and within each subscriber's
/// allowance (DESIGN §3):
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

/// A subscriber's URL and signing secrets, read once per claim.
type Target = (String, Result<SigningSecrets, UnreadableSecret>);

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

pub async fn claim(
    writer: &SqlitePool,
    sealer: &Sealer,
    request: ClaimRequest,
) -> Result<Vec<ClaimedJob>, StoreError> {
    let now = request.now;
    let lease_until = now.plus_ms(request.lease_ms);
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let candidates = sqlx::query(CLAIM_CANDIDATES)
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
    for candidate in &candidates {
        let id: String = candidate.try_get("id")?;
        let reclaimed = candidate.try_get::<String, _>("state")? == JobState::InFlight.as_str();
        if reclaimed {
            mark_in_progress_unknown(&mut tx, &id, now).await?;
        }
        let due_since = Timestamp::from_millis(candidate.try_get("due_at")?);
        order.push((id, reclaimed, due_since));
    }
    let ids = serde_json::to_string(&order.iter().map(|(id, ..)| id).collect::<Vec<_>>())
        .map_err(|e| StoreError::Internal(e.to_string()))?;
    let marked = sqlx::query(MARK_IN_FLIGHT)
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
    let mut rows: HashMap<String, SqliteRow> = HashMap::with_capacity(marked.len());
    for row in marked {
        rows.insert(row.try_get("id")?, row);
    }

    let mut targets: HashMap<String, Target> = HashMap::new();
    let mut claimed = Vec::with_capacity(order.len());
    for (id, reclaimed, due_since) in order {
        let row = rows
            .remove(&id)
            .ok_or_else(|| StoreError::Internal(format!("claimed job {id} was not marked")))?;
        let subscriber_id: String = row.try_get("subscriber_id")?;
        if !targets.contains_key(&subscriber_id) {
            let target = sqlx::query(
                "SELECT url, secret, previous_secret, previous_secret_expires_at \
                 FROM subscribers WHERE id = ?1",
            )
            .bind(&subscriber_id)
            .fetch_one(&mut *tx)
            .await?;
            let secrets = sealer.open_secrets(
                &subscriber_id,
                &target.try_get::<String, _>("secret")?,
                target
                    .try_get::<Option<String>, _>("previous_secret")?
                    .as_deref(),
                target
                    .try_get::<Option<i64>, _>("previous_secret_expires_at")?
                    .map(Timestamp::from_millis),
                now,
            );
            targets.insert(subscriber_id.clone(), (target.try_get("url")?, secrets));
        }
        let (url, secrets) = targets[&subscriber_id].clone();
        let attempts: i64 = row.try_get("attempts")?;
        let attempt = u32::try_from(attempts)
            .map_err(|_| StoreError::Internal(format!("attempts {attempts}")))?;
        let lease_token: i64 = row.try_get("lease_token")?;
        let possible_duplicate: bool = row.try_get("possible_duplicate")?;
        let max_attempts: Option<i64> = row.try_get("max_attempts")?;
        claimed.push(ClaimedJob {
            job_id: rows::uuid(&id)?,
            subscriber_id,
            event_id: row.try_get("event_id")?,
            payload: row.try_get("payload")?,
            url,
            secrets,
            lease_token,
            lease_expires_at: lease_until,
            attempt,
            possible_duplicate,
            reclaimed_expired_lease: reclaimed,
            due_since,
            snapshot: JobSnapshot {
                state: JobState::InFlight,
                attempts: attempt,
                max_attempts: max_attempts.and_then(|n| u32::try_from(n).ok()),
                due_at: Some(lease_until),
                deadline: Timestamp::from_millis(row.try_get("deadline")?),
            },
        });
    }
    tx.commit().await?;
    Ok(claimed)
}

async fn mark_in_progress_unknown(
    tx: &mut sqlx::SqliteConnection,
    job_id: &str,
    now: Timestamp,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE attempts SET outcome = 'unknown', finished_at = ?2, reason = ?3 \
         WHERE job_id = ?1 AND outcome = 'in_progress'",
    )
    .bind(job_id)
    .bind(now.as_millis())
    .bind(LEASE_EXPIRED_REASON)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

pub async fn renew(
    writer: &SqlitePool,
    leases: &[LeaseRef],
    until: Timestamp,
    now: Timestamp,
) -> Result<Vec<bool>, StoreError> {
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let mut held = Vec::with_capacity(leases.len());
    for lease in leases {
        let updated = sqlx::query(
            "UPDATE jobs SET lease_expires_at = ?3, due_at = ?3, updated_at = ?4 \
             WHERE id = ?1 AND lease_token = ?2 AND state = 'in_flight'",
        )
        .bind(lease.job_id.to_string())
        .bind(lease.token)
        .bind(until.as_millis())
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        held.push(updated == 1);
    }
    tx.commit().await?;
    Ok(held)
}

pub async fn record_outcomes(
    writer: &SqlitePool,
    records: &[OutcomeRecord],
    now: Timestamp,
) -> Result<Vec<Fenced>, StoreError> {
    outcome_batch::check(records)?;
    let batch = outcome_batch::to_json(records, now);
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query(FINISH_ATTEMPTS)
        .bind(&batch)
        .execute(&mut *tx)
        .await?;
    let applied: HashSet<(String, i64)> = sqlx::query_as(APPLY_TRANSITIONS)
        .bind(&batch)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
    for record in records.iter().filter(|r| r.pause_subscriber) {
        sqlx::query(
            "UPDATE subscribers SET enabled = 0, updated_at = ?2 \
             WHERE id = (SELECT subscriber_id FROM jobs WHERE id = ?1)",
        )
        .bind(record.lease.job_id.to_string())
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(outcome_batch::fenced_in_order(records, applied))
}

/// The outcomes of a batch (`?1`, a JSON array of
/// [`crate::store::outcome_batch::to_json`]) as rows.
macro_rules! outcome_rows {
    () => {
        "(SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token, \
           json_extract(value, '$.number') AS number, \
           json_extract(value, '$.finished_at') AS finished_at, \
           json_extract(value, '$.outcome') AS outcome, json_extract(value, '$.status') AS status, \
           json_extract(value, '$.error_class') AS error_class, \
           json_extract(value, '$.reason') AS reason, \
           json_extract(value, '$.body_excerpt') AS body_excerpt, \
           json_extract(value, '$.state') AS state, json_extract(value, '$.due_at') AS due_at, \
           json_extract(value, '$.attempts') AS attempts, \
           json_extract(value, '$.dead_reason') AS dead_reason, \
           json_extract(value, '$.deadline') AS deadline, \
           json_extract(value, '$.possible_duplicate') AS possible_duplicate, \
           json_extract(value, '$.now') AS now \
         FROM json_each(?1)) AS v"
    };
}

/// Finishes each attempt of the batch: its row is named by its lease token, so a late
/// result still lands on its own attempt.
pub(super) const FINISH_ATTEMPTS: &str = concat!(
    "UPDATE attempts SET finished_at = v.finished_at, outcome = v.outcome, \
     status = v.status, error_class = v.error_class, reason = v.reason, \
     body_excerpt = v.body_excerpt FROM ",
    outcome_rows!(),
    " WHERE attempts.job_id = v.id AND attempts.number = v.number \
     AND attempts.lease_token = v.token"
);

/// Applies each transition only while its lease holds (fencing token, `in_flight`);
/// returns the (id, token) of those applied. `+jobs.state` keeps the planner on the
/// primary key, driven by the batch: with an index on the state it would walk every
/// job in flight and re-read the whole batch for each (see the plan test).
pub(super) const APPLY_TRANSITIONS: &str = concat!(
    "UPDATE jobs SET state = v.state, due_at = v.due_at, attempts = v.attempts, \
     dead_reason = v.dead_reason, deadline = v.deadline, \
     possible_duplicate = v.possible_duplicate, updated_at = v.now, \
     lease_owner = NULL, lease_expires_at = NULL, \
     delivered_at = CASE WHEN v.state = 'delivered' THEN v.finished_at ELSE delivered_at END, \
     dead_at = CASE WHEN v.state = 'dead' THEN v.now ELSE dead_at END, \
     last_error_class = CASE WHEN v.error_class IS NULL THEN last_error_class ELSE v.error_class END, \
     last_error_status = CASE WHEN v.error_class IS NULL THEN last_error_status ELSE v.status END, \
     last_error_reason = CASE WHEN v.error_class IS NULL THEN last_error_reason ELSE v.reason END, \
     last_error_body = CASE WHEN v.error_class IS NULL THEN last_error_body ELSE v.body_excerpt END \
     FROM ",
    outcome_rows!(),
    " WHERE jobs.id = v.id AND jobs.lease_token = v.token AND +jobs.state = 'in_flight' \
     RETURNING jobs.id, jobs.lease_token"
);

/// The jobs a sweep at `?1` moves, at most `?2`, deadline first: two range scans
/// (deadlines passed; expired leases), so far-future jobs cost nothing.
const OVERDUE: &str = "SELECT j.id, j.state, j.deadline, j.deadline <= ?1 AS past_deadline, \
         j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts AS used_up \
         FROM jobs j INDEXED BY jobs_deadline JOIN subscribers s ON s.id = j.subscriber_id \
         WHERE j.state IN ('scheduled', 'retrying', 'in_flight') AND j.deadline <= ?1 \
           AND (j.state <> 'in_flight' OR j.due_at <= ?1) \
         UNION ALL \
         SELECT j.id, j.state, j.deadline, 0 AS past_deadline, \
         j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts AS used_up \
         FROM jobs j INDEXED BY jobs_due JOIN subscribers s ON s.id = j.subscriber_id \
         WHERE j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at <= ?1 \
           AND j.state = 'in_flight' AND j.deadline > ?1 \
           AND (s.enabled = 0 OR (j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts)) \
         ORDER BY deadline LIMIT ?2";

pub async fn expire_deadlines(
    writer: &SqlitePool,
    readers: &SqlitePool,
    now: Timestamp,
    limit: u32,
) -> Result<ExpiredJobs, StoreError> {
    // A read first, so a sweep with nothing to do costs no write transaction (the
    // writer is shared with creates, claims and outcomes).
    let anything = sqlx::query(OVERDUE)
        .bind(now.as_millis())
        .bind(1_i64)
        .fetch_optional(readers)
        .await?;
    if anything.is_none() {
        return Ok(ExpiredJobs::default());
    }
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let overdue = sqlx::query(OVERDUE)
        .bind(now.as_millis())
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
    let mut expired = ExpiredJobs::default();
    for job in overdue {
        let id: String = job.try_get("id")?;
        let in_flight = job.try_get::<String, _>("state")? == JobState::InFlight.as_str();
        if in_flight {
            mark_in_progress_unknown(&mut tx, &id, now).await?;
            expired.lease_expired += 1;
        }
        let reason = if job.try_get::<bool, _>("past_deadline")? {
            expired.dead += 1;
            Some(DeadReason::DeadlineExceeded)
        } else if job.try_get::<bool, _>("used_up")? {
            expired.max_attempts += 1;
            Some(DeadReason::MaxAttempts)
        } else {
            // An expired lease of a paused subscriber: back to waiting, due now.
            expired.released += 1;
            None
        };
        sqlx::query(
            "UPDATE jobs SET state = CASE WHEN ?3 IS NULL THEN 'retrying' ELSE 'dead' END, \
             dead_reason = ?3, dead_at = CASE WHEN ?3 IS NULL THEN NULL ELSE ?2 END, \
             due_at = CASE WHEN ?3 IS NULL THEN ?2 ELSE NULL END, \
             lease_owner = NULL, lease_expires_at = NULL, updated_at = ?2, \
             possible_duplicate = CASE WHEN state = 'in_flight' THEN 1 ELSE possible_duplicate END \
             WHERE id = ?1",
        )
        .bind(&id)
        .bind(now.as_millis())
        .bind(reason.map(DeadReason::as_str))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(expired)
}
