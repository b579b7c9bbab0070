//! Read-only figures in PostgreSQL: the worker's next wake-up and the metrics gauges.

use sqlx::PgPool;

use crate::domain::waiting::SubscriberLoad;
use crate::domain::{JobState, Timestamp};
use crate::store::StoreError;
use crate::store::records::StoreGauges;
use crate::store::rows::{self, Columns};

/// The soonest moment a worker has something to do; the same rules as the SQLite
/// store (see there).
pub async fn next_wake_at(pool: &PgPool, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
    let row = sqlx::query(
        "SELECT LEAST( \
           (SELECT MIN(CASE \
              WHEN s.max_in_flight <= (SELECT COUNT(*) FROM jobs o \
                WHERE o.subscriber_id = s.id AND o.state = 'in_flight' AND o.due_at > $1) \
                THEN NULL \
              WHEN s.rate_limit_per_second IS NULL THEN $1 \
              ELSE (SELECT CASE \
                WHEN MAX(a.started_at) > $1 - 1000 * GREATEST(1, s.rate_limit_per_second / 10) \
                                  / s.rate_limit_per_second \
                  THEN MAX(a.started_at) + 1000 * GREATEST(1, s.rate_limit_per_second / 10) \
                                  / s.rate_limit_per_second \
                WHEN COUNT(*) >= s.rate_limit_per_second THEN MIN(a.started_at) + 1000 \
                ELSE $1 END \
                FROM attempts a \
                WHERE a.subscriber_id = s.id AND a.started_at > $1 - 1000) END) \
            FROM subscribers s WHERE s.enabled AND EXISTS ( \
              SELECT 1 FROM jobs d WHERE d.subscriber_id = s.id \
                AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= $1 \
                AND d.deadline > $1 \
                AND NOT (d.state = 'in_flight' AND d.max_attempts IS NOT NULL \
                         AND d.attempts >= d.max_attempts))), \
           (SELECT j.due_at FROM jobs j \
            WHERE j.state IN ('scheduled', 'retrying', 'in_flight') \
              AND j.state IN ('scheduled', 'retrying') AND j.due_at > $1 \
              AND EXISTS (SELECT 1 FROM subscribers s WHERE s.id = j.subscriber_id AND s.enabled) \
            ORDER BY j.due_at LIMIT 1), \
           (SELECT MIN(due_at) FROM jobs WHERE state = 'in_flight'), \
           (SELECT MIN(deadline) FROM jobs WHERE state IN ('scheduled', 'retrying')) \
         ) AS next",
    )
    .bind(now.as_millis())
    .fetch_one(pool)
    .await?;
    Ok(row.opt_int("next")?.map(Timestamp::from_millis))
}

pub async fn gauges(pool: &PgPool, now: Timestamp, slo_ms: u64) -> Result<StoreGauges, StoreError> {
    let mut gauges = StoreGauges::default();
    for row in sqlx::query("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
        .fetch_all(pool)
        .await?
    {
        let state = row
            .text("state")?
            .parse::<JobState>()
            .map_err(|e| StoreError::Internal(format!("column state: {e}")))?;
        gauges
            .jobs_by_state
            .push((state, row.int("n")?.max(0) as u64));
    }
    let slo_cutoff = now
        .as_millis()
        .saturating_sub(i64::try_from(slo_ms).unwrap_or(i64::MAX));
    let row = sqlx::query(
        "SELECT \
           (SELECT MIN(j.due_at) FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
             WHERE j.state IN ('scheduled', 'retrying') AND j.due_at <= $1 \
             AND s.enabled) AS oldest_eligible, \
           (SELECT MIN(deliver_at) FROM jobs WHERE state = 'retrying') AS oldest_retrying, \
           (SELECT COUNT(*) FROM jobs WHERE state IN ('scheduled', 'retrying', 'in_flight') \
             AND deliver_at <= $2) AS past_slo, \
           (SELECT COUNT(*) FROM jobs WHERE state IN ('scheduled', 'retrying', 'in_flight') \
             AND (deadline - $1) * 10 <= (deadline - deliver_at)) AS near_deadline",
    )
    .bind(now.as_millis())
    .bind(slo_cutoff)
    .fetch_one(pool)
    .await?;
    gauges.oldest_eligible_since = row.opt_int("oldest_eligible")?.map(Timestamp::from_millis);
    gauges.oldest_retrying_since = row.opt_int("oldest_retrying")?.map(Timestamp::from_millis);
    gauges.past_slo = row.int("past_slo")?.max(0) as u64;
    gauges.near_deadline = row.int("near_deadline")?.max(0) as u64;
    Ok(gauges)
}

pub async fn subscriber_load(
    pool: &PgPool,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberLoad>, StoreError> {
    let row = sqlx::query(
        "SELECT s.max_in_flight, s.rate_limit_per_second, \
         (SELECT COUNT(*) FROM jobs o WHERE o.subscriber_id = s.id \
          AND o.state = 'in_flight' AND o.due_at > $2) AS open_attempts, \
         CASE WHEN s.rate_limit_per_second IS NULL THEN 0 ELSE \
         (SELECT COUNT(*) FROM attempts a WHERE a.subscriber_id = s.id \
          AND a.started_at > $2 - 1000) END AS started_last_second, \
         CASE WHEN s.rate_limit_per_second IS NULL THEN NULL ELSE \
         (SELECT MAX(a.started_at) FROM attempts a WHERE a.subscriber_id = s.id \
          AND a.started_at > $2 - 1000) END AS last_started_at \
         FROM subscribers s WHERE s.id = $1",
    )
    .bind(id)
    .bind(now.as_millis())
    .fetch_optional(pool)
    .await?;
    row.map(|row| rows::subscriber_load(&row)).transpose()
}
