//! Read-only figures in PostgreSQL: the worker's next wake-up, the metrics gauges, a
//! subscriber's load and statistics (see [`crate::store::figures`]).

use sqlx::PgPool;

use super::destinations::DUE;

use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::figures::FigureStatements;

/// The soonest moment a worker has something to do at `$1`; the same rules as the
/// SQLite store (see there), its candidates combined with `LEAST` (a running replay's
/// next burst among them: one statement, not a second read for the replays).
pub(super) const NEXT_WAKE: &str = "SELECT LEAST( \
           (SELECT MIN(CASE \
              WHEN s.max_in_flight <= (SELECT COUNT(*) FROM jobs o \
                WHERE o.subscriber_id = s.id AND o.state = 'in_flight' AND o.due_at > $1) \
                THEN NULL \
              WHEN GREATEST(e.hold_until, CASE WHEN e.circuit = 'open' THEN e.retry_at END) > $1 \
                THEN GREATEST(e.hold_until, CASE WHEN e.circuit = 'open' THEN e.retry_at END) \
              WHEN e.circuit = 'open' AND EXISTS (SELECT 1 FROM jobs o \
                WHERE o.subscriber_id = s.id AND o.state = 'in_flight' AND o.due_at > $1) \
                THEN NULL \
              WHEN e.long_running AND ($2::jsonb -> s.destination ->> 1)::bigint <= 0 \
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
            FROM subscribers s LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
            WHERE s.enabled \
              AND s.destination IN (SELECT jsonb_object_keys($2::jsonb)) AND EXISTS ( \
              SELECT 1 FROM jobs d WHERE d.subscriber_id = s.id \
                AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= $1 \
                AND d.deadline > $1 \
                AND NOT (d.state = 'in_flight' AND d.max_attempts IS NOT NULL \
                         AND d.attempts >= d.max_attempts) OFFSET 0)), \
           (SELECT j.due_at FROM jobs j \
            WHERE j.state IN ('scheduled', 'retrying', 'in_flight') \
              AND j.state IN ('scheduled', 'retrying') AND j.due_at > $1 \
              AND EXISTS (SELECT 1 FROM subscribers s WHERE s.id = j.subscriber_id AND s.enabled) \
            ORDER BY j.due_at LIMIT 1), \
           (SELECT MIN(due_at) FROM jobs WHERE state = 'in_flight' \
              AND subscriber_id IS NOT NULL AND due_at > $1), \
           (SELECT MIN(deadline) FROM jobs WHERE state IN ('scheduled', 'retrying')), \
           (SELECT MIN(next_at) FROM replays WHERE state = 'running') \
         ) AS next";

/// The columns of a subscriber's load ([`crate::store::figures::LoadRow`]), from
/// `subscribers s` and `endpoint_circuits e`, at `$2`.
macro_rules! load_columns {
    () => {
        "s.max_in_flight AS subscriber_max_in_flight, s.rate_limit_per_second, \
             (SELECT COUNT(*) FROM jobs o WHERE o.subscriber_id = s.id \
              AND o.state = 'in_flight' AND o.due_at > $2) AS open_attempts, \
             CASE WHEN s.rate_limit_per_second IS NULL THEN 0 ELSE \
             (SELECT COUNT(*) FROM attempts a WHERE a.subscriber_id = s.id \
              AND a.started_at > $2 - 1000) END AS started_last_second, \
             CASE WHEN s.rate_limit_per_second IS NULL THEN NULL ELSE \
             (SELECT MAX(a.started_at) FROM attempts a WHERE a.subscriber_id = s.id \
              AND a.started_at > $2 - 1000) END AS last_started_at, \
             e.circuit AS endpoint_circuit, e.retry_at AS endpoint_retry_at, \
             e.hold_until AS endpoint_hold_until, \
        e.consecutive_timeouts AS endpoint_timeouts, s.attempt_timeout_ms AS own_timeout_ms, \
        e.timeout_ms AS endpoint_timeout_ms"
    };
}
pub(super) use load_columns;

impl FigureStatements for PgPool {
    const DUE_DESTINATIONS: &'static str = DUE;
    const GAUGED_DESTINATIONS: &'static str = "SELECT d.*, \
        (SELECT COUNT(*) FROM jobs o WHERE o.destination = d.key AND o.state = 'in_flight' \
         AND o.due_at > $1) AS in_flight, \
        0::BIGINT AS subscribers FROM destinations d \
        WHERE d.paused OR d.circuit <> 'closed' OR d.forced_circuit IS NOT NULL \
          OR d.key IN (SELECT destination FROM jobs WHERE state = 'in_flight' \
            AND destination IS NOT NULL AND due_at > $1)";
    /// Jobs per state.
    const STATE_COUNTS_ALL: &'static str = "SELECT state, COUNT(*) AS n FROM jobs GROUP BY state";
    /// Dead jobs per reason (read from the partial index `jobs_dead_causes` alone).
    const DEAD_REASON_COUNTS_ALL: &'static str = "SELECT dead_reason AS reason, COUNT(*) AS n FROM jobs \
        WHERE state = 'dead' GROUP BY dead_reason";
    /// Jobs `in_flight` whose lease has expired at `$1` (read as `retrying`).
    const EXPIRED_LEASES_ALL: &'static str = "SELECT COUNT(*) AS n FROM jobs \
        WHERE state = 'in_flight' AND subscriber_id IS NOT NULL AND due_at <= $1";
    /// The gauges at `$1` other than the counts; `$2` is `$1` minus the objective.
    /// An `in_flight` job whose lease has expired is due (at its lease's expiry) and
    /// `retrying` (docs/DESIGN.md §2.2).
    const GAUGES: &'static str = "SELECT \
               (SELECT MIN(j.due_at) FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
                 WHERE j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at <= $1 \
                 AND s.enabled) AS oldest_eligible, \
               (SELECT MIN(deliver_at) FROM ( \
                 SELECT deliver_at FROM jobs WHERE state = 'retrying' \
                 UNION ALL SELECT deliver_at FROM jobs \
                 WHERE state = 'in_flight' AND subscriber_id IS NOT NULL AND due_at <= $1) AS r) \
                 AS oldest_retrying, \
               (SELECT COUNT(*) FROM jobs WHERE state IN ('scheduled', 'retrying', 'in_flight') \
                 AND deliver_at <= $2) AS past_slo, \
               (SELECT COUNT(*) FROM jobs WHERE state IN ('scheduled', 'retrying', 'in_flight') \
                 AND (deadline - $1) * 10 <= (deadline - deliver_at)) AS near_deadline";
    /// Subscriber `$1`'s limits and their use at `$2`.
    const LOAD: &'static str = concat!(
        "SELECT ",
        load_columns!(),
        " FROM subscribers s LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
          WHERE s.id = $1 AND s.deleted_at IS NULL"
    );
    /// [`Self::LOAD`] of each subscriber, with its id and destination (`jobs_in_flight_destination`
    /// for its open requests).
    const LOADS_AT_DESTINATIONS: &'static str = concat!(
        "SELECT s.id AS subscriber_id, ",
        load_columns!(),
        ", d.*, (SELECT COUNT(*) FROM jobs o WHERE o.destination = d.key \
           AND o.state = 'in_flight' AND o.due_at > $2) AS in_flight, \
          0::BIGINT AS subscribers \
          FROM subscribers s LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
          JOIN destinations d ON d.key = s.destination \
          WHERE s.id IN (SELECT json_array_elements_text($1::json)) AND s.deleted_at IS NULL"
    );
    /// Whether subscriber `$1` exists.
    const SUBSCRIBER_EXISTS: &'static str =
        "SELECT 1 FROM subscribers WHERE id = $1 AND deleted_at IS NULL";
    /// Jobs of subscriber `$1` per state (`jobs_subscriber_state`).
    const STATE_COUNTS: &'static str =
        "SELECT state, COUNT(*) AS n FROM jobs WHERE subscriber_id = $1 GROUP BY state";
    /// Jobs of subscriber `$1` `in_flight` whose lease has expired at `$2`.
    const EXPIRED_LEASES: &'static str = "SELECT COUNT(*) AS n FROM jobs \
        WHERE subscriber_id = $1 AND state = 'in_flight' AND due_at <= $2";
    /// The earliest due time of subscriber `$1`'s waiting jobs due at `$2` (an expired
    /// lease's included: its job is `retrying`, due at the expiry), and its latest
    /// delivered attempt (`attempts_subscriber_success`, newest first).
    const ELIGIBLE_AND_SUCCESS: &'static str = "SELECT \
        (SELECT MIN(due_at) FROM jobs \
         WHERE subscriber_id = $1 AND state IN ('scheduled', 'retrying', 'in_flight') \
         AND due_at <= $2) \
         AS oldest_eligible, \
        (SELECT finished_at FROM attempts \
         WHERE subscriber_id = $1 AND finished_at IS NOT NULL AND outcome = 'delivered' \
         ORDER BY finished_at DESC LIMIT 1) AS last_success";
    /// Subscriber `$1`'s latest finished attempt that failed.
    const LAST_FAILURE: &'static str = "SELECT finished_at, outcome, error_class, status, reason \
        FROM attempts WHERE subscriber_id = $1 AND finished_at IS NOT NULL \
          AND outcome IN ('retryable', 'terminal', 'blocked') \
        ORDER BY finished_at DESC LIMIT 1";

    async fn next_job_wake(
        &self,
        now: Timestamp,
        admitted: String,
    ) -> Result<Option<Timestamp>, StoreError> {
        let next: Option<i64> = sqlx::query_scalar(NEXT_WAKE)
            .bind(now.as_millis())
            .bind(admitted)
            .fetch_one(self)
            .await?;
        Ok(next.map(Timestamp::from_millis))
    }
}
