//! Recurring schedules in PostgreSQL: the statements (see [`crate::store::schedules`]).

use crate::store::schedules::ScheduleStatements;
use sqlx::PgPool;

/// Puts of schedules one at a time, until the transaction ends: two puts creating
/// schedules at once would each count the schedules without the other's. The key is
/// `defhschd` in ASCII, a lock of this table's puts alone.
const SERIALIZE_PUTS: &str = "SELECT pg_advisory_xact_lock(7234300975239096420)";

impl ScheduleStatements for PgPool {
    /// Inserts or replaces a schedule's definition.
    const PUT: &'static str = "INSERT INTO schedules (id, subscriber_id, event_type, cron, time_zone, \
          every_ms, anchor, event_id, payload, ttl_ms, max_attempts, catch_up, enabled, \
          created_at, updated_at, next_period) \
        VALUES ($1, $2::TEXT, $3::TEXT, $4::TEXT, $5, $6::BIGINT, $7::BIGINT, $8, $9, $10::BIGINT, \
          $11::BIGINT, $12, $13, $14, $14, $15::BIGINT) \
        ON CONFLICT (id) DO UPDATE SET subscriber_id = excluded.subscriber_id, \
          event_type = excluded.event_type, cron = excluded.cron, \
          time_zone = excluded.time_zone, every_ms = excluded.every_ms, \
          anchor = excluded.anchor, event_id = excluded.event_id, \
          payload = excluded.payload, ttl_ms = excluded.ttl_ms, \
          max_attempts = excluded.max_attempts, catch_up = excluded.catch_up, \
          enabled = CASE WHEN $16::BOOLEAN THEN excluded.enabled ELSE schedules.enabled END, \
          updated_at = excluded.updated_at, last_error = NULL, \
          next_period = CASE WHEN (schedules.cron IS DISTINCT FROM excluded.cron OR schedules.time_zone IS DISTINCT FROM excluded.time_zone \
          OR schedules.every_ms IS DISTINCT FROM excluded.every_ms OR schedules.anchor IS DISTINCT FROM excluded.anchor \
          OR ($16::BOOLEAN AND excluded.enabled AND NOT schedules.enabled)) \
            THEN excluded.next_period ELSE schedules.next_period END, \
          cursor_version = schedules.cursor_version + CASE WHEN (schedules.cron IS DISTINCT FROM excluded.cron OR schedules.time_zone IS DISTINCT FROM excluded.time_zone \
          OR schedules.every_ms IS DISTINCT FROM excluded.every_ms OR schedules.anchor IS DISTINCT FROM excluded.anchor \
          OR ($16::BOOLEAN AND excluded.enabled AND NOT schedules.enabled)) THEN 1 ELSE 0 END, \
          leased_until = CASE WHEN (schedules.cron IS DISTINCT FROM excluded.cron OR schedules.time_zone IS DISTINCT FROM excluded.time_zone \
          OR schedules.every_ms IS DISTINCT FROM excluded.every_ms OR schedules.anchor IS DISTINCT FROM excluded.anchor \
          OR ($16::BOOLEAN AND excluded.enabled AND NOT schedules.enabled)) THEN NULL ELSE schedules.leased_until END \
        RETURNING id, subscriber_id, event_type, cron, time_zone, every_ms, anchor, event_id, \
          payload, ttl_ms, max_attempts, catch_up, enabled, created_at, updated_at, \
          next_period, cursor_version, last_period, last_event_id, last_job_id, last_jobs, last_error";
    const SERIALIZE_PUTS: Option<&'static str> = Some(SERIALIZE_PUTS);
    /// Whether a put of `$1` would create a schedule over `$2`.
    const FULL: &'static str = "SELECT NOT EXISTS (SELECT 1 FROM schedules WHERE id = $1) \
        AND (SELECT count(*) FROM schedules) >= $2";
    /// Schedule `$1`.
    const GET: &'static str = "SELECT id, subscriber_id, event_type, cron, time_zone, every_ms, anchor, \
        event_id, payload, ttl_ms, max_attempts, catch_up, enabled, created_at, updated_at, \
        next_period, cursor_version, last_period, last_event_id, last_job_id, last_jobs, last_error \
        FROM schedules WHERE id = $1";
    /// Schedules after `$1` in id order, at most `$2`.
    const LIST: &'static str = "SELECT id, subscriber_id, event_type, cron, time_zone, every_ms, anchor, \
        event_id, payload, ttl_ms, max_attempts, catch_up, enabled, created_at, updated_at, \
        next_period, cursor_version, last_period, last_event_id, last_job_id, last_jobs, last_error \
        FROM schedules WHERE ($1::TEXT IS NULL OR id > $1) ORDER BY id LIMIT $2";
    /// Deletes schedule `$1`.
    const DELETE: &'static str = "DELETE FROM schedules WHERE id = $1";
    /// The enabled schedules due by `$1` (`schedules_due`).
    const DUE: &'static str = "SELECT id, subscriber_id, event_type, cron, time_zone, every_ms, anchor, \
        event_id, payload, ttl_ms, max_attempts, catch_up, enabled, created_at, updated_at, \
        next_period, cursor_version, last_period, last_event_id, last_job_id, last_jobs, last_error \
        FROM schedules \
        WHERE enabled AND next_period IS NOT NULL AND next_period <= $1 \
          AND (leased_until IS NULL OR leased_until <= $3) \
        ORDER BY next_period LIMIT $2";
    /// Holds a schedule while a scheduler makes its due periods.
    const LEASE: &'static str = "UPDATE schedules SET leased_until = $4 \
        WHERE id = $1 AND next_period IS NOT DISTINCT FROM $2::BIGINT AND cursor_version = $3 \
          AND (leased_until IS NULL OR leased_until <= $5)";
    /// Moves a schedule's cursor if it is as read.
    const ADVANCE: &'static str = "UPDATE schedules SET next_period = $4::BIGINT, leased_until = NULL, \
        last_period = CASE WHEN $5::BOOLEAN THEN $6::BIGINT ELSE last_period END, \
        last_event_id = CASE WHEN $5 THEN $7::TEXT ELSE last_event_id END, \
        last_job_id = CASE WHEN $5 THEN $8::TEXT ELSE last_job_id END, \
        last_jobs = CASE WHEN $5 THEN $9::BIGINT ELSE last_jobs END, \
        last_error = CASE WHEN $10::TEXT IS NOT NULL THEN $10 WHEN $5 THEN NULL \
          ELSE last_error END \
        WHERE id = $1 AND cursor_version = $2 \
          AND next_period IS NOT DISTINCT FROM $3::BIGINT";
    /// Moves a schedule's cursor past a period if the scheduler still holds it as read.
    const FENCE: &'static str = "UPDATE schedules SET next_period = $5::BIGINT \
        WHERE id = $1 AND cursor_version = $2 \
          AND next_period IS NOT DISTINCT FROM $3::BIGINT AND leased_until = $4";
    /// Another schedule with template `$1` that could take the same keys.
    const SHARING_TEMPLATE: &'static str = "SELECT id FROM schedules WHERE event_id = $1 AND id <> $2 \
        AND (subscriber_id = $3::TEXT OR $3::TEXT IS NULL OR event_type IS NOT NULL) \
        ORDER BY id LIMIT 1";
    /// Records a manual run.
    const RECORD_RUN: &'static str = "UPDATE schedules SET last_period = $2, last_event_id = $3, \
        last_job_id = $4, last_jobs = $5, last_error = NULL \
        WHERE id = $1 AND (last_period IS NULL OR last_period <= $2)";
}
