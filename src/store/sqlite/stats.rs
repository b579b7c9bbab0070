//! Read-only figures in SQLite: the worker's next wake-up and the metrics gauges.

use sqlx::{Row, SqlitePool};

use crate::domain::waiting::SubscriberLoad;
use crate::domain::{JobState, Timestamp};
use crate::store::StoreError;
use crate::store::records::StoreGauges;
use crate::store::rows::{self, Columns};

/// The soonest of: the next scheduled or retrying job coming due (enabled
/// subscribers); for each enabled subscriber with due work, the moment its limits next
/// let a claim take some (now when they already do; none while it is at
/// `max_in_flight`: a finished attempt frees it, and this instance's worker wakes on
/// its own attempts, the poll on other instances'); the next lease to expire; the next
/// deadline of a waiting job. Range scans on the `jobs_due` and `jobs_deadline`
/// indexes, so far-future jobs cost nothing.
pub async fn next_wake_at(
    readers: &SqlitePool,
    now: Timestamp,
) -> Result<Option<Timestamp>, StoreError> {
    let row = sqlx::query(
        "SELECT \
           (SELECT MIN(CASE \
              WHEN s.max_in_flight <= (SELECT COUNT(*) FROM jobs o \
                INDEXED BY jobs_in_flight_subscriber WHERE o.subscriber_id = s.id \
                AND o.state = 'in_flight' AND o.due_at > ?1) THEN NULL \
              WHEN s.rate_limit_per_second IS NULL THEN ?1 \
              ELSE (SELECT CASE \
                WHEN MAX(a.started_at) > ?1 - 1000 * MAX(1, s.rate_limit_per_second / 10) \
                                  / s.rate_limit_per_second \
                  THEN MAX(a.started_at) + 1000 * MAX(1, s.rate_limit_per_second / 10) \
                                  / s.rate_limit_per_second \
                WHEN COUNT(*) >= s.rate_limit_per_second THEN MIN(a.started_at) + 1000 \
                ELSE ?1 END \
                FROM attempts a INDEXED BY attempts_subscriber_started \
                WHERE a.subscriber_id = s.id AND a.started_at > ?1 - 1000) END) \
            FROM subscribers s WHERE s.enabled = 1 AND EXISTS ( \
              SELECT 1 FROM jobs d INDEXED BY jobs_subscriber_due \
              WHERE d.subscriber_id = s.id \
                AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= ?1 \
                AND d.deadline > ?1 \
                AND NOT (d.state = 'in_flight' AND d.max_attempts IS NOT NULL \
                         AND d.attempts >= d.max_attempts))) AS held, \
           (SELECT j.due_at FROM jobs j INDEXED BY jobs_due \
            JOIN subscribers s ON s.id = j.subscriber_id \
            WHERE j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at > ?1 \
              AND j.state <> 'in_flight' AND s.enabled = 1 \
            ORDER BY j.due_at LIMIT 1) AS coming, \
           (SELECT MIN(due_at) FROM jobs INDEXED BY jobs_in_flight_subscriber \
            WHERE state = 'in_flight') AS lease, \
           (SELECT deadline FROM jobs INDEXED BY jobs_deadline \
            WHERE state IN ('scheduled', 'retrying', 'in_flight') AND state <> 'in_flight' \
            ORDER BY deadline LIMIT 1) AS deadline",
    )
    .bind(now.as_millis())
    .fetch_one(readers)
    .await?;
    let mut earliest: Option<i64> = None;
    for column in ["held", "coming", "lease", "deadline"] {
        if let Some(at) = row.opt_int(column)? {
            earliest = Some(earliest.map_or(at, |e| e.min(at)));
        }
    }
    Ok(earliest.map(Timestamp::from_millis))
}

pub async fn gauges(
    readers: &SqlitePool,
    now: Timestamp,
    slo_ms: u64,
) -> Result<StoreGauges, StoreError> {
    let mut gauges = StoreGauges::default();
    for row in sqlx::query("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
        .fetch_all(readers)
        .await?
    {
        let state: String = row.try_get("state")?;
        let state = state
            .parse::<JobState>()
            .map_err(|e| StoreError::Internal(format!("column state: {e}")))?;
        let n: i64 = row.try_get("n")?;
        gauges.jobs_by_state.push((state, n.max(0) as u64));
    }
    let slo_cutoff = now
        .as_millis()
        .saturating_sub(i64::try_from(slo_ms).unwrap_or(i64::MAX));
    let row = sqlx::query(
        "SELECT \
           (SELECT MIN(j.due_at) FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
             WHERE j.state IN ('scheduled', 'retrying') AND j.due_at <= ?1 \
             AND s.enabled = 1) AS oldest_eligible, \
           (SELECT MIN(deliver_at) FROM jobs WHERE state = 'retrying') AS oldest_retrying, \
           (SELECT COUNT(*) FROM jobs WHERE state IN ('scheduled', 'retrying', 'in_flight') \
             AND deliver_at <= ?2) AS past_slo, \
           (SELECT COUNT(*) FROM jobs WHERE state IN ('scheduled', 'retrying', 'in_flight') \
             AND (deadline - ?1) * 10 <= (deadline - deliver_at)) AS near_deadline",
    )
    .bind(now.as_millis())
    .bind(slo_cutoff)
    .fetch_one(readers)
    .await?;
    gauges.oldest_eligible_since = row
        .try_get::<Option<i64>, _>("oldest_eligible")?
        .map(Timestamp::from_millis);
    gauges.oldest_retrying_since = row
        .try_get::<Option<i64>, _>("oldest_retrying")?
        .map(Timestamp::from_millis);
    gauges.past_slo = row.try_get::<i64, _>("past_slo")?.max(0) as u64;
    gauges.near_deadline = row.try_get::<i64, _>("near_deadline")?.max(0) as u64;
    Ok(gauges)
}

pub async fn subscriber_load(
    pool: &SqlitePool,
    id: &str,
    now: Timestamp,
) -> Result<Option<SubscriberLoad>, StoreError> {
    let row = sqlx::query(
        "SELECT s.max_in_flight, s.rate_limit_per_second, \
         (SELECT COUNT(*) FROM jobs o WHERE o.subscriber_id = s.id \
          AND o.state = 'in_flight' AND o.due_at > ?2) AS open_attempts, \
         CASE WHEN s.rate_limit_per_second IS NULL THEN 0 ELSE \
         (SELECT COUNT(*) FROM attempts a WHERE a.subscriber_id = s.id \
          AND a.started_at > ?2 - 1000) END AS started_last_second, \
         CASE WHEN s.rate_limit_per_second IS NULL THEN NULL ELSE \
         (SELECT MAX(a.started_at) FROM attempts a WHERE a.subscriber_id = s.id \
          AND a.started_at > ?2 - 1000) END AS last_started_at \
         FROM subscribers s WHERE s.id = ?1",
    )
    .bind(id)
    .bind(now.as_millis())
    .fetch_optional(pool)
    .await?;
    row.map(|row| rows::subscriber_load(&row)).transpose()
}
