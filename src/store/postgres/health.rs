//! Subscribers' health figures in PostgreSQL: the statements (see
//! [`crate::store::health`]). `… = ANY(ARRAY(SELECT json_array_elements_text($N::json)))`
//! selects the subscribers named: the array is computed once (an init plan), so each
//! id is an index condition, where `IN (SELECT …)` would hash-join a scan of all jobs.

use sqlx::PgPool;

use crate::store::health::HealthStatements;

impl HealthStatements for PgPool {
    /// The waiting jobs at `$1` of the subscribers `$2`, per subscriber.
    const WAITING: &'static str = "SELECT subscriber_id, \
        COUNT(*) FILTER (WHERE state = 'scheduled') AS scheduled, \
        COUNT(*) FILTER (WHERE state = 'in_flight' AND due_at > $1) AS in_flight, \
        COUNT(*) FILTER (WHERE state = 'retrying' OR (state = 'in_flight' AND due_at <= $1)) \
          AS retrying, \
        MIN(due_at) FILTER (WHERE state = 'retrying' OR (state = 'in_flight' AND due_at <= $1)) \
          AS next_attempt_at \
        FROM jobs \
        WHERE state IN ('scheduled', 'retrying', 'in_flight') \
          AND subscriber_id = ANY(ARRAY(SELECT json_array_elements_text($2::json))) \
        GROUP BY subscriber_id";
    /// The jobs of the subscribers `$3` dead in (`$1`, `$2`], per subscriber.
    const DEAD_SINCE: &'static str = "SELECT subscriber_id, COUNT(*) AS n FROM jobs \
        WHERE state = 'dead' AND dead_at > $1 AND dead_at <= $2 \
          AND subscriber_id = ANY(ARRAY(SELECT json_array_elements_text($3::json))) \
        GROUP BY subscriber_id";
    /// The subscribers `$1`, each with its latest success and failure and its first
    /// failure after that success: one seek each in the partial indexes
    /// `attempts_subscriber_success` and `attempts_subscriber_failure`.
    const ATTEMPTS: &'static str = "SELECT s.id, s.destination, ls.last_success_at, \
        f.finished_at AS failure_at, f.outcome AS failure_outcome, \
        f.error_class AS failure_class, f.status::BIGINT AS failure_status, \
        f.reason AS failure_reason, ff.first_failure_at, \
        e.circuit AS endpoint_circuit, e.retry_at AS endpoint_retry_at, \
        e.hold_until AS endpoint_hold_until, \
        e.consecutive_timeouts AS endpoint_timeouts, s.attempt_timeout_ms AS own_timeout_ms, \
        e.timeout_ms AS endpoint_timeout_ms \
        FROM subscribers s \
        LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
        LEFT JOIN LATERAL (SELECT a.finished_at AS last_success_at FROM attempts a \
          WHERE a.subscriber_id = s.id AND a.outcome = 'delivered' \
          ORDER BY a.finished_at DESC LIMIT 1) ls ON TRUE \
        LEFT JOIN LATERAL (SELECT a.finished_at, a.outcome, a.error_class, a.status, a.reason \
          FROM attempts a WHERE a.subscriber_id = s.id \
            AND a.outcome IN ('retryable', 'terminal', 'blocked') \
          ORDER BY a.finished_at DESC LIMIT 1) f ON TRUE \
        LEFT JOIN LATERAL (SELECT a.finished_at AS first_failure_at FROM attempts a \
          WHERE a.subscriber_id = s.id AND a.outcome IN ('retryable', 'terminal', 'blocked') \
            AND a.finished_at > COALESCE(ls.last_success_at, -1) \
          ORDER BY a.finished_at LIMIT 1) ff ON TRUE \
        WHERE s.id = ANY(ARRAY(SELECT json_array_elements_text($1::json))) \
        ORDER BY s.id";
}
