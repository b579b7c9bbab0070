//! Claims, lease renewal, fenced outcomes and the sweep in PostgreSQL.
//!
//! The claim is one statement: it locks the due rows with `FOR UPDATE SKIP LOCKED`
//! (concurrent claims take disjoint sets without waiting), marks them `in_flight` under
//! a new fencing token, records the unknown outcome of an expired lease, inserts the
//! new attempt rows and returns the batch with each subscriber's target.

use std::collections::HashSet;

use sqlx::PgPool;

use crate::domain::{DeadReason, JobSnapshot, JobState, Timestamp};
use crate::store::outcome_batch;
use crate::store::records::{
    ClaimRequest, ClaimedJob, ExpiredJobs, Fenced, LeaseRef, OutcomeRecord,
};
use crate::store::rows::{self, Columns};
use crate::store::{Sealer, StoreError};

const LEASE_EXPIRED_REASON: &str = "the lease expired before a result was recorded";

/// Picks and locks (`FOR NO KEY UPDATE SKIP LOCKED`) the enabled subscribers with due
/// work and room under their limits, oldest due work first. Holding these locks, a
/// claim's count of a subscriber's open attempts cannot race another instance's claim:
/// a subscriber locked elsewhere is skipped this time. Each subscriber costs a few
/// index probes (its oldest due job from `jobs_subscriber_due`, its open leases, and
/// its last second of attempts only when it has a rate limit), whatever the backlog.
const LOCK_SUBSCRIBERS: &str = "\
    SELECT s.id FROM subscribers s \
    CROSS JOIN LATERAL ( \
      SELECT j.due_at AS oldest FROM jobs j \
      WHERE j.subscriber_id = s.id AND j.state IN ('scheduled', 'retrying', 'in_flight') \
        AND j.due_at <= $1 AND j.deadline > $1 \
        AND NOT (j.state = 'in_flight' AND j.max_attempts IS NOT NULL \
                 AND j.attempts >= j.max_attempts) \
      ORDER BY j.due_at LIMIT 1 \
    ) d \
    WHERE s.enabled \
      AND s.max_in_flight > (SELECT COUNT(*) FROM jobs o WHERE o.subscriber_id = s.id \
                             AND o.state = 'in_flight' AND o.due_at > $1) \
      AND CASE WHEN s.rate_limit_per_second IS NULL THEN true ELSE ( \
        SELECT s.rate_limit_per_second > COUNT(*) \
          AND (MAX(a.started_at) IS NULL OR MAX(a.started_at) <= $1 - 1000 \
               * GREATEST(1, s.rate_limit_per_second / 10) / s.rate_limit_per_second) \
        FROM attempts a WHERE a.subscriber_id = s.id AND a.started_at > $1 - 1000) END \
    ORDER BY d.oldest, s.id LIMIT $2 \
    FOR NO KEY UPDATE OF s SKIP LOCKED";

/// Claims, among the locked subscribers `$6`, the due jobs within each one's allowance
/// (`max_in_flight` minus its live leases; for `rate_limit_per_second` r, bursts of
/// max(1, r/10) at most every max(1, r/10)/r s and never more than r in the last
/// second, as the SQLite store), round-robin across subscribers, at most `$2`; marks
/// them in flight, records an expired lease's attempt as unknown, starts the new
/// attempts, and returns the batch with each subscriber's target.
const CLAIM: &str = "\
    WITH load AS ( \
      SELECT s.id, s.max_in_flight, s.rate_limit_per_second AS rate, \
        (SELECT COUNT(*) FROM jobs o WHERE o.subscriber_id = s.id \
         AND o.state = 'in_flight' AND o.due_at > $1) AS open, \
        CASE WHEN s.rate_limit_per_second IS NULL THEN 0 ELSE \
        (SELECT COUNT(*) FROM attempts a WHERE a.subscriber_id = s.id \
         AND a.started_at > $1 - 1000) END AS recent, \
        CASE WHEN s.rate_limit_per_second IS NULL THEN NULL ELSE \
        (SELECT MAX(a.started_at) FROM attempts a WHERE a.subscriber_id = s.id \
         AND a.started_at > $1 - 1000) END AS last \
      FROM subscribers s WHERE s.id = ANY($6) \
    ), allowance AS ( \
      SELECT id AS subscriber_id, GREATEST(0, LEAST(max_in_flight - open, \
        CASE WHEN rate IS NULL THEN 2147483647 \
             WHEN last > $1 - 1000 * GREATEST(1, rate / 10) / rate THEN 0 \
             ELSE LEAST(GREATEST(1, rate / 10), rate - recent) END)) AS allowed \
      FROM load \
    ), ranked AS ( \
      SELECT j.id, j.old_state, j.due_since, al.allowed, \
        ROW_NUMBER() OVER (PARTITION BY al.subscriber_id ORDER BY j.due_since, j.id) AS rn \
      FROM allowance al CROSS JOIN LATERAL ( \
        SELECT d.id, d.state AS old_state, d.due_at AS due_since FROM jobs d \
        WHERE d.subscriber_id = al.subscriber_id \
          AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= $1 \
          AND d.deadline > $1 \
          AND NOT (d.state = 'in_flight' AND d.max_attempts IS NOT NULL \
                   AND d.attempts >= d.max_attempts) \
        ORDER BY d.due_at, d.id LIMIT LEAST(al.allowed, $2) \
      ) j \
    ), candidates AS ( \
      SELECT j.id, r.old_state, r.due_since, r.rn FROM ranked r JOIN jobs j ON j.id = r.id \
      WHERE r.rn <= r.allowed \
      ORDER BY r.rn, r.due_since, r.id LIMIT $2 \
      FOR UPDATE OF j SKIP LOCKED \
    ), claimed AS ( \
      UPDATE jobs j SET state = 'in_flight', attempts = j.attempts + 1, \
        lease_token = j.lease_token + 1, lease_owner = $3, lease_expires_at = $4, \
        due_at = $4, updated_at = $1, \
        possible_duplicate = j.possible_duplicate OR c.old_state = 'in_flight' \
      FROM candidates c WHERE j.id = c.id \
      RETURNING j.id, j.subscriber_id, j.event_id, j.payload, j.attempts, \
        j.max_attempts, j.deadline, j.lease_token, j.possible_duplicate, \
        c.old_state, c.due_since, c.rn \
    ), unknown AS ( \
      UPDATE attempts a SET outcome = 'unknown', finished_at = $1, reason = $5 \
      FROM claimed c \
      WHERE a.job_id = c.id AND c.old_state = 'in_flight' AND a.outcome = 'in_progress' \
    ), started AS ( \
      INSERT INTO attempts (job_id, number, lease_token, lease_owner, started_at, \
        outcome, possible_duplicate, subscriber_id) \
      SELECT id, attempts, lease_token, $3, $1, 'in_progress', possible_duplicate, \
        subscriber_id \
      FROM claimed \
    ) \
    SELECT c.*, s.url, s.secret, s.previous_secret, s.previous_secret_expires_at \
    FROM claimed c \
    JOIN subscribers s ON s.id = c.subscriber_id ORDER BY c.rn, c.due_since, c.id";

pub async fn claim(
    pool: &PgPool,
    sealer: &Sealer,
    request: ClaimRequest,
) -> Result<Vec<ClaimedJob>, StoreError> {
    let now = request.now;
    let lease_until = now.plus_ms(request.lease_ms);
    let mut tx = pool.begin().await?;
    let subscribers: Vec<String> = sqlx::query_scalar(LOCK_SUBSCRIBERS)
        .bind(now.as_millis())
        .bind(i64::from(request.limit))
        .fetch_all(&mut *tx)
        .await?;
    if subscribers.is_empty() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    // A second statement: its snapshot sees every claim committed before the locks.
    let rows = sqlx::query(CLAIM)
        .bind(now.as_millis())
        .bind(i64::from(request.limit))
        .bind(&request.owner)
        .bind(lease_until.as_millis())
        .bind(LEASE_EXPIRED_REASON)
        .bind(&subscribers)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter()
        .map(|row| {
            let attempts: i64 = row.int("attempts")?;
            let attempt = u32::try_from(attempts)
                .map_err(|_| StoreError::Internal(format!("attempts {attempts}")))?;
            let subscriber_id = row.text("subscriber_id")?;
            let secrets = sealer.open_secrets(
                &subscriber_id,
                &row.text("secret")?,
                row.opt_text("previous_secret")?.as_deref(),
                row.opt_int("previous_secret_expires_at")?
                    .map(Timestamp::from_millis),
                now,
            );
            Ok(ClaimedJob {
                job_id: rows::uuid(&row.text("id")?)?,
                subscriber_id,
                event_id: row.text("event_id")?,
                payload: row.text("payload")?,
                url: row.text("url")?,
                secrets,
                lease_token: row.int("lease_token")?,
                lease_expires_at: lease_until,
                attempt,
                possible_duplicate: row.flag("possible_duplicate")?,
                reclaimed_expired_lease: row.text("old_state")? == JobState::InFlight.as_str(),
                due_since: Timestamp::from_millis(row.int("due_since")?),
                snapshot: JobSnapshot {
                    state: JobState::InFlight,
                    attempts: attempt,
                    max_attempts: row
                        .opt_int("max_attempts")?
                        .and_then(|n| u32::try_from(n).ok()),
                    due_at: Some(lease_until),
                    deadline: Timestamp::from_millis(row.int("deadline")?),
                },
            })
        })
        .collect()
}

pub async fn renew(
    pool: &PgPool,
    leases: &[LeaseRef],
    until: Timestamp,
    now: Timestamp,
) -> Result<Vec<bool>, StoreError> {
    let ids: Vec<String> = leases.iter().map(|l| l.job_id.to_string()).collect();
    let tokens: Vec<i64> = leases.iter().map(|l| l.token).collect();
    let renewed: HashSet<(String, i64)> = sqlx::query(
        "UPDATE jobs j SET lease_expires_at = $3, due_at = $3, updated_at = $4 \
         FROM UNNEST($1::text[], $2::bigint[]) AS l(id, token) \
         WHERE j.id = l.id AND j.lease_token = l.token AND j.state = 'in_flight' \
         RETURNING j.id, j.lease_token",
    )
    .bind(&ids)
    .bind(&tokens)
    .bind(until.as_millis())
    .bind(now.as_millis())
    .fetch_all(pool)
    .await?
    .iter()
    .map(|row| Ok((row.text("id")?, row.int("lease_token")?)))
    .collect::<Result<_, StoreError>>()?;
    Ok(ids
        .into_iter()
        .zip(tokens)
        .map(|key| renewed.contains(&key))
        .collect())
}

/// The outcomes of a batch (`$1`, a JSON array of
/// [`crate::store::outcome_batch::to_json`]) as rows.
macro_rules! outcome_rows {
    () => {
        "json_to_recordset($1::json) AS v(id text, token bigint, number bigint, \
           finished_at bigint, outcome text, status bigint, error_class text, reason text, \
           body_excerpt text, state text, due_at bigint, attempts bigint, dead_reason text, \
           deadline bigint, possible_duplicate boolean, now bigint)"
    };
}

/// Finishes each attempt of the batch: its row is named by its lease token, so a late
/// result still lands on its own attempt.
const FINISH_ATTEMPTS: &str = concat!(
    "UPDATE attempts a SET finished_at = v.finished_at, outcome = v.outcome, \
     status = v.status, error_class = v.error_class, reason = v.reason, \
     body_excerpt = v.body_excerpt FROM ",
    outcome_rows!(),
    " WHERE a.job_id = v.id AND a.number = v.number AND a.lease_token = v.token"
);

/// Applies each transition only while its lease holds (fencing token, `in_flight`);
/// returns the (id, token) of those applied.
const APPLY_TRANSITIONS: &str = concat!(
    "UPDATE jobs j SET state = v.state, due_at = v.due_at, attempts = v.attempts, \
     dead_reason = v.dead_reason, deadline = v.deadline, \
     possible_duplicate = v.possible_duplicate, updated_at = v.now, \
     lease_owner = NULL, lease_expires_at = NULL, \
     delivered_at = CASE WHEN v.state = 'delivered' THEN v.finished_at ELSE j.delivered_at END, \
     dead_at = CASE WHEN v.state = 'dead' THEN v.now ELSE j.dead_at END, \
     last_error_class = COALESCE(v.error_class, j.last_error_class), \
     last_error_status = CASE WHEN v.error_class IS NULL THEN j.last_error_status ELSE v.status END, \
     last_error_reason = CASE WHEN v.error_class IS NULL THEN j.last_error_reason ELSE v.reason END, \
     last_error_body = CASE WHEN v.error_class IS NULL THEN j.last_error_body ELSE v.body_excerpt END \
     FROM ",
    outcome_rows!(),
    " WHERE j.id = v.id AND j.lease_token = v.token AND j.state = 'in_flight' \
     RETURNING j.id, j.lease_token"
);

pub async fn record_outcomes(
    pool: &PgPool,
    records: &[OutcomeRecord],
    now: Timestamp,
) -> Result<Vec<Fenced>, StoreError> {
    outcome_batch::check(records)?;
    let batch = outcome_batch::to_json(records, now);
    let mut tx = pool.begin().await?;
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
            "UPDATE subscribers SET enabled = FALSE, updated_at = $2 \
             WHERE id = (SELECT subscriber_id FROM jobs WHERE id = $1)",
        )
        .bind(record.lease.job_id.to_string())
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(outcome_batch::fenced_in_order(records, applied))
}

pub async fn expire_deadlines(
    pool: &PgPool,
    now: Timestamp,
    limit: u32,
) -> Result<ExpiredJobs, StoreError> {
    let mut tx = pool.begin().await?;
    let overdue = sqlx::query(
        "SELECT j.id, j.state, j.deadline <= $1 AS past_deadline, \
         (j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts) AS used_up \
         FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
         WHERE (j.state IN ('scheduled', 'retrying') AND j.deadline <= $1) \
         OR (j.state = 'in_flight' AND j.due_at <= $1 AND (j.deadline <= $1 OR NOT s.enabled \
             OR (j.max_attempts IS NOT NULL AND j.attempts >= j.max_attempts))) \
         ORDER BY j.deadline LIMIT $2 FOR UPDATE OF j SKIP LOCKED",
    )
    .bind(now.as_millis())
    .bind(i64::from(limit))
    .fetch_all(&mut *tx)
    .await?;
    let mut expired = ExpiredJobs::default();
    for job in overdue {
        let id = job.text("id")?;
        if job.text("state")? == JobState::InFlight.as_str() {
            sqlx::query(
                "UPDATE attempts SET outcome = 'unknown', finished_at = $2, reason = $3 \
                 WHERE job_id = $1 AND outcome = 'in_progress'",
            )
            .bind(&id)
            .bind(now.as_millis())
            .bind(LEASE_EXPIRED_REASON)
            .execute(&mut *tx)
            .await?;
            expired.lease_expired += 1;
        }
        let reason = if job.flag("past_deadline")? {
            expired.dead += 1;
            Some(DeadReason::DeadlineExceeded)
        } else if job.flag("used_up")? {
            expired.max_attempts += 1;
            Some(DeadReason::MaxAttempts)
        } else {
            // An expired lease of a paused subscriber: back to waiting, due now.
            expired.released += 1;
            None
        };
        sqlx::query(
            "UPDATE jobs SET state = CASE WHEN $3::text IS NULL THEN 'retrying' ELSE 'dead' END, \
             dead_reason = $3, dead_at = CASE WHEN $3::text IS NULL THEN NULL ELSE $2 END, \
             due_at = CASE WHEN $3::text IS NULL THEN $2 ELSE NULL END, \
             lease_owner = NULL, lease_expires_at = NULL, updated_at = $2, \
             possible_duplicate = possible_duplicate OR state = 'in_flight' \
             WHERE id = $1",
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
