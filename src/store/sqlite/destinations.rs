//! Destinations in SQLite (see [`crate::store::destinations`]). Every write runs on
//! the one writer, so holding a row needs no lock clause. A destination's open
//! requests are counted on `jobs_in_flight_destination`, its subscribers on
//! `subscribers_destination`.

use super::Pools;
use crate::store::destinations::DestinationStatements;

impl DestinationStatements for Pools {
    const ENSURE: &'static str = "INSERT INTO destinations (key, created_at, updated_at) \
        VALUES (?1, ?2, ?2) ON CONFLICT (key) DO NOTHING";
    const ASSIGN: &'static str = "UPDATE subscribers SET destination = ?2 WHERE id = ?1";
    const UNASSIGNED: &'static str = "SELECT id, url FROM subscribers WHERE destination IS NULL AND deleted_at IS NULL \
         ORDER BY id LIMIT 1000";
    const ASSIGN_IN_FLIGHT: &'static str = "UPDATE jobs SET destination = \
        (SELECT s.destination FROM subscribers s WHERE s.id = jobs.subscriber_id) \
        WHERE state = 'in_flight' AND destination IS NULL";
    const VIEW: &'static str = "SELECT d.*, \
        (SELECT COUNT(*) FROM jobs o INDEXED BY jobs_in_flight_destination \
         WHERE o.destination = d.key AND o.state = 'in_flight' AND o.due_at > ?2) AS in_flight, \
        (SELECT COUNT(*) FROM subscribers s INDEXED BY subscribers_destination \
         WHERE s.destination = d.key) AS subscribers \
        FROM destinations d WHERE d.key = ?1";
    const LIST: &'static str = "SELECT d.*, \
        (SELECT COUNT(*) FROM jobs o INDEXED BY jobs_in_flight_destination \
         WHERE o.destination = d.key AND o.state = 'in_flight' AND o.due_at > ?3) AS in_flight, \
        (SELECT COUNT(*) FROM subscribers s INDEXED BY subscribers_destination \
         WHERE s.destination = d.key) AS subscribers \
        FROM destinations d WHERE d.key > ?1 ORDER BY d.key LIMIT CAST(?2 AS INTEGER)";
    const HOLD: &'static str = "SELECT d.* FROM destinations d WHERE d.key = ?1";
    const OF_JOBS: &'static str = "SELECT j.id AS job_id, d.* \
        FROM jobs j JOIN destinations d ON d.key = j.destination \
        WHERE j.id IN (SELECT value FROM json_each(?1))";
    const HOLD_ALL: &'static str = "SELECT d.* FROM destinations d \
        WHERE d.key IN (SELECT value FROM json_each(?1)) ORDER BY d.key";
    const WRITE: &'static str = "UPDATE destinations SET max_in_flight = ?2, paused = ?3, \
        forced_circuit = ?4, circuit = ?5, failures = ?6, cooldown_ms = ?7, opened_at = ?8, \
        retry_at = ?9, probe_job_id = ?10, probe_token = ?11, last_error_at = ?12, \
        last_error_class = ?13, last_error_status = ?14, last_error_reason = ?15, \
        updated_at = ?16, changed_at = ?17 WHERE key = ?1";
    const SPREAD: &'static str = "SELECT COUNT(*) AS served, \
        COALESCE(SUM(e.circuit = 'open'), 0) AS failing \
        FROM subscribers s INDEXED BY subscribers_destination \
        LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
        WHERE s.destination = ?1 AND s.enabled = 1 AND (e.last_result_at > ?2 OR EXISTS ( \
          SELECT 1 FROM jobs d INDEXED BY jobs_subscriber_due WHERE d.subscriber_id = s.id \
            AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= ?3))";
}

/// The destinations with due work at `?1` (of enabled subscribers), each with its
/// requests open at `?1`, those of them for long-running endpoints, and whether a
/// quick endpoint had a result there since `?2` ([`LoadedRow`]): a claim's first read,
/// and the next wake-up's. A destination's due work is found at its first subscriber
/// with due work (`subscribers_destination`), so in a fan-out a claim reads a probe or
/// two per destination instead of every enabled subscriber's due work.
///
/// [`LoadedRow`]: crate::store::destinations::LoadedRow
pub(super) const DUE: &str = "SELECT d.*, \
    (SELECT COUNT(*) FROM jobs o INDEXED BY jobs_in_flight_destination \
     WHERE o.destination = d.key AND o.state = 'in_flight' AND o.due_at > ?1) AS in_flight, \
    0 AS subscribers, \
    (SELECT COUNT(*) FROM jobs o INDEXED BY jobs_in_flight_destination \
     JOIN endpoint_circuits e ON e.subscriber_id = o.subscriber_id \
     WHERE o.destination = d.key AND o.state = 'in_flight' AND o.due_at > ?1 \
       AND e.long_running = 1) AS long_in_flight, \
    EXISTS (SELECT 1 FROM subscribers q INDEXED BY subscribers_destination \
     JOIN endpoint_circuits e ON e.subscriber_id = q.id \
     WHERE q.destination = d.key AND e.long_running = 0 AND e.last_result_at > ?2) \
     AS quick_active \
    FROM destinations d WHERE EXISTS ( \
      SELECT 1 FROM subscribers s INDEXED BY subscribers_destination \
      WHERE s.destination = d.key AND s.enabled = 1 AND EXISTS ( \
        SELECT 1 FROM jobs j INDEXED BY jobs_subscriber_due WHERE j.subscriber_id = s.id \
          AND j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at <= ?1 \
          AND j.deadline > ?1))";
