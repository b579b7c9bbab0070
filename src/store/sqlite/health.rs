//! Subscribers' health figures in SQLite: the statements (see
//! [`crate::store::health`]). `… IN (SELECT value FROM json_each(?N))` selects the
//! subscribers named: one seek each in the subscriber-led indexes.

use super::Pools;
use crate::store::health::HealthStatements;

impl HealthStatements for Pools {
    /// The waiting jobs at `?1` of the subscribers `?2`, per subscriber: a walk of the
    /// waiting work's partial index (`jobs_subscriber_due`).
    const WAITING: &'static str = "SELECT subscriber_id, \
        SUM(state = 'scheduled') AS scheduled, \
        SUM(state = 'in_flight' AND due_at > ?1) AS in_flight, \
        SUM(state = 'retrying' OR (state = 'in_flight' AND due_at <= ?1)) AS retrying, \
        MIN(CASE WHEN state = 'retrying' OR (state = 'in_flight' AND due_at <= ?1) \
          THEN due_at END) AS next_attempt_at \
        FROM jobs INDEXED BY jobs_subscriber_due \
        WHERE state IN ('scheduled', 'retrying', 'in_flight') \
          AND subscriber_id IN (SELECT value FROM json_each(?2)) \
        GROUP BY subscriber_id";
    /// The jobs of the subscribers `?3` dead in (`?1`, `?2`], per subscriber
    /// (`jobs_subscriber_dead`, a range per subscriber).
    const DEAD_SINCE: &'static str = "SELECT subscriber_id, COUNT(*) AS n \
        FROM jobs INDEXED BY jobs_subscriber_dead \
        WHERE state = 'dead' AND dead_at > ?1 AND dead_at <= ?2 \
          AND subscriber_id IN (SELECT value FROM json_each(?3)) \
        GROUP BY subscriber_id";
    /// The subscribers `?1`, each with its latest success and failure and its first failure
    /// after that success: one seek each in `attempts_subscriber_success` and
    /// `attempts_subscriber_failure` (the failure's row is then read by its rowid).
    const ATTEMPTS: &'static str = "SELECT h.id, h.destination, h.last_success_at, \
        f.finished_at AS failure_at, f.outcome AS failure_outcome, \
        f.error_class AS failure_class, f.status AS failure_status, \
        f.reason AS failure_reason, \
        e.circuit AS endpoint_circuit, e.retry_at AS endpoint_retry_at, \
        e.hold_until AS endpoint_hold_until, \
        e.consecutive_timeouts AS endpoint_timeouts, h.attempt_timeout_ms AS own_timeout_ms, \
        e.timeout_ms AS endpoint_timeout_ms, \
        (SELECT a.finished_at FROM attempts a INDEXED BY attempts_subscriber_failure \
         WHERE a.subscriber_id = h.id AND a.outcome IN ('retryable', 'terminal', 'blocked') \
           AND a.finished_at > COALESCE(h.last_success_at, -1) \
         ORDER BY a.finished_at LIMIT 1) AS first_failure_at \
        FROM (SELECT s.id, s.destination, s.attempt_timeout_ms, \
          (SELECT a.finished_at FROM attempts a INDEXED BY attempts_subscriber_success \
           WHERE a.subscriber_id = s.id AND a.outcome = 'delivered' \
           ORDER BY a.finished_at DESC LIMIT 1) AS last_success_at, \
          (SELECT a.rowid FROM attempts a INDEXED BY attempts_subscriber_failure \
           WHERE a.subscriber_id = s.id AND a.outcome IN ('retryable', 'terminal', 'blocked') \
           ORDER BY a.finished_at DESC LIMIT 1) AS failure_row \
          FROM subscribers s \
          WHERE s.id IN (SELECT value FROM json_each(?1))) h \
        LEFT JOIN attempts f ON f.rowid = h.failure_row \
        LEFT JOIN endpoint_circuits e ON e.subscriber_id = h.id \
        ORDER BY h.id";
}
