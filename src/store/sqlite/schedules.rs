//! Recurring schedules in SQLite: the statements (see [`crate::store::schedules`]).

use super::Pools;
use crate::store::schedules::ScheduleStatements;

impl ScheduleStatements for Pools {
    /// Inserts or replaces a schedule's definition.
    const PUT: &'static str = "INSERT INTO schedules (id, subscriber_id, event_type, cron, time_zone, \
          every_ms, anchor, event_id, payload, ttl_ms, max_attempts, catch_up, enabled, \
          created_at, updated_at, next_period) \
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14, ?15) \
        ON CONFLICT (id) DO UPDATE SET subscriber_id = excluded.subscriber_id, \
          event_type = excluded.event_type, cron = excluded.cron, \
          time_zone = excluded.time_zone, every_ms = excluded.every_ms, \
          anchor = excluded.anchor, event_id = excluded.event_id, \
          payload = excluded.payload, ttl_ms = excluded.ttl_ms, \
          max_attempts = excluded.max_attempts, catch_up = excluded.catch_up, \
          enabled = CASE WHEN ?16 THEN excluded.enabled ELSE schedules.enabled END, \
          updated_at = excluded.updated_at, last_error = NULL, \
          next_period = CASE WHEN (schedules.cron IS NOT excluded.cron OR schedules.time_zone IS NOT excluded.time_zone \
          OR schedules.every_ms IS NOT excluded.every_ms OR schedules.anchor IS NOT excluded.anchor \
          OR (?16 AND excluded.enabled AND NOT schedules.enabled)) \
            THEN excluded.next_period ELSE schedules.next_period END, \
          cursor_version = schedules.cursor_version + CASE WHEN (schedules.cron IS NOT excluded.cron OR schedules.time_zone IS NOT excluded.time_zone \
          OR schedules.every_ms IS NOT excluded.every_ms OR schedules.anchor IS NOT excluded.anchor \
          OR (?16 AND excluded.enabled AND NOT schedules.enabled)) THEN 1 ELSE 0 END, \
          leased_until = CASE WHEN (schedules.cron IS NOT excluded.cron OR schedules.time_zone IS NOT excluded.time_zone \
          OR schedules.every_ms IS NOT excluded.every_ms OR schedules.anchor IS NOT excluded.anchor \
          OR (?16 AND excluded.enabled AND NOT schedules.enabled)) THEN NULL ELSE schedules.leased_until END \
        RETURNING id, subscriber_id, event_type, cron, time_zone, every_ms, anchor, event_id, \
          payload, ttl_ms, max_attempts, catch_up, enabled, created_at, updated_at, \
          next_period, cursor_version, last_period, last_event_id, last_job_id, last_jobs, last_error";
    // The one writer runs one transaction at a time.
    const SERIALIZE_PUTS: Option<&'static str> = None;
    /// Whether a put of `?1` would create a schedule over `?2`.
    const FULL: &'static str = "SELECT NOT EXISTS (SELECT 1 FROM schedules WHERE id = ?1) \
        AND (SELECT count(*) FROM schedules) >= ?2";
    /// Schedule `?1`.
    const GET: &'static str = "SELECT id, subscriber_id, event_type, cron, time_zone, every_ms, anchor, \
        event_id, payload, ttl_ms, max_attempts, catch_up, enabled, created_at, updated_at, \
        next_period, cursor_version, last_period, last_event_id, last_job_id, last_jobs, last_error \
        FROM schedules WHERE id = ?1";
    /// Schedules after `?1` in id order, at most `?2`.
    const LIST: &'static str = "SELECT id, subscriber_id, event_type, cron, time_zone, every_ms, anchor, \
        event_id, payload, ttl_ms, max_attempts, catch_up, enabled, created_at, updated_at, \
        next_period, cursor_version, last_period, last_event_id, last_job_id, last_jobs, last_error \
        FROM schedules WHERE (?1 IS NULL OR id > ?1) ORDER BY id LIMIT CAST(?2 AS INTEGER)";
    /// Deletes schedule `?1`.
    const DELETE: &'static str = "DELETE FROM schedules WHERE id = ?1";
    /// The enabled schedules due by `?1` (`schedules_due`: its predicate written as is).
    const DUE: &'static str = "SELECT id, subscriber_id, event_type, cron, time_zone, every_ms, anchor, \
        event_id, payload, ttl_ms, max_attempts, catch_up, enabled, created_at, updated_at, \
        next_period, cursor_version, last_period, last_event_id, last_job_id, last_jobs, last_error \
        FROM schedules INDEXED BY schedules_due \
        WHERE enabled = 1 AND next_period IS NOT NULL AND next_period <= ?1 \
          AND (leased_until IS NULL OR leased_until <= ?3) \
        ORDER BY next_period LIMIT CAST(?2 AS INTEGER)";
    /// Holds a schedule while a scheduler makes its due periods.
    const LEASE: &'static str = "UPDATE schedules SET leased_until = ?4 \
        WHERE id = ?1 AND next_period IS ?2 AND cursor_version = ?3 \
          AND (leased_until IS NULL OR leased_until <= ?5)";
    /// Moves a schedule's cursor if it is as read.
    const ADVANCE: &'static str = "UPDATE schedules SET next_period = ?4, leased_until = NULL, \
        last_period = CASE WHEN ?5 THEN ?6 ELSE last_period END, \
        last_event_id = CASE WHEN ?5 THEN ?7 ELSE last_event_id END, \
        last_job_id = CASE WHEN ?5 THEN ?8 ELSE last_job_id END, \
        last_jobs = CASE WHEN ?5 THEN ?9 ELSE last_jobs END, \
        last_error = CASE WHEN ?10 IS NOT NULL THEN ?10 WHEN ?5 THEN NULL ELSE last_error END \
        WHERE id = ?1 AND cursor_version = ?2 AND next_period IS ?3";
    /// Moves a schedule's cursor past a period if the scheduler still holds it as read.
    const FENCE: &'static str = "UPDATE schedules SET next_period = ?5 \
        WHERE id = ?1 AND cursor_version = ?2 AND next_period IS ?3 AND leased_until = ?4";
    /// Another schedule with template `?1` that could take the same keys.
    const SHARING_TEMPLATE: &'static str = "SELECT id FROM schedules WHERE event_id = ?1 AND id <> ?2 \
        AND (subscriber_id = ?3 OR ?3 IS NULL OR event_type IS NOT NULL) \
        ORDER BY id LIMIT 1";
    /// Records a manual run.
    const RECORD_RUN: &'static str = "UPDATE schedules SET last_period = ?2, last_event_id = ?3, \
        last_job_id = ?4, last_jobs = ?5, last_error = NULL \
        WHERE id = ?1 AND (last_period IS NULL OR last_period <= ?2)";
}
