//! Destinations in PostgreSQL (see [`crate::store::destinations`]). A row that a
//! write reads first is held `FOR NO KEY UPDATE`: claims on other instances skip it
//! (`SKIP LOCKED`) while it changes, and two writers apply one after the other.

use sqlx::PgPool;

use crate::store::destinations::DestinationStatements;

impl DestinationStatements for PgPool {
    const ENSURE: &'static str = "INSERT INTO destinations (key, created_at, updated_at) \
        VALUES ($1, $2, $2) ON CONFLICT (key) DO NOTHING";
    const ASSIGN: &'static str = "UPDATE subscribers SET destination = $2 WHERE id = $1";
    const UNASSIGNED: &'static str = "SELECT id, url FROM subscribers WHERE destination IS NULL AND deleted_at IS NULL \
         ORDER BY id LIMIT 1000";
    const ASSIGN_IN_FLIGHT: &'static str = "UPDATE jobs SET destination = \
        (SELECT s.destination FROM subscribers s WHERE s.id = jobs.subscriber_id) \
        WHERE state = 'in_flight' AND subscriber_id IS NOT NULL AND destination IS NULL";
    const VIEW: &'static str = "SELECT d.*, \
        (SELECT COUNT(*) FROM jobs o WHERE o.destination = d.key AND o.state = 'in_flight' \
         AND o.due_at > $2) AS in_flight, \
        (SELECT COUNT(*) FROM subscribers s WHERE s.destination = d.key) AS subscribers \
        FROM destinations d WHERE d.key = $1";
    const LIST: &'static str = "SELECT d.*, \
        (SELECT COUNT(*) FROM jobs o WHERE o.destination = d.key AND o.state = 'in_flight' \
         AND o.due_at > $3) AS in_flight, \
        (SELECT COUNT(*) FROM subscribers s WHERE s.destination = d.key) AS subscribers \
        FROM destinations d WHERE d.key > $1 ORDER BY d.key LIMIT $2";
    const HOLD: &'static str = "SELECT d.* FROM destinations d WHERE d.key = $1 \
        FOR NO KEY UPDATE";
    const OF_JOBS: &'static str = "SELECT j.id AS job_id, d.* \
        FROM jobs j JOIN destinations d ON d.key = j.destination \
        WHERE j.id = ANY(ARRAY(SELECT jsonb_array_elements_text($1::jsonb)))";
    const HOLD_ALL: &'static str = "SELECT d.* FROM destinations d \
        WHERE d.key IN (SELECT jsonb_array_elements_text($1::jsonb)) ORDER BY d.key \
        FOR NO KEY UPDATE";
    const WRITE: &'static str = "UPDATE destinations SET max_in_flight = $2, paused = $3, \
        forced_circuit = $4, circuit = $5, failures = $6, cooldown_ms = $7, opened_at = $8, \
        retry_at = $9, probe_job_id = $10, probe_token = $11, last_error_at = $12, \
        last_error_class = $13, last_error_status = $14, last_error_reason = $15, \
        updated_at = $16, changed_at = $17 WHERE key = $1";
    /// `OFFSET 0` keeps the due-work `EXISTS` one probe of `jobs_subscriber_due` per
    /// subscriber: hashed, a generic plan made on an empty table read every due job.
    const SPREAD: &'static str = "SELECT COUNT(*)::BIGINT AS served, \
        (COUNT(*) FILTER (WHERE e.circuit = 'open'))::BIGINT AS failing \
        FROM subscribers s LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
        WHERE s.destination = $1 AND s.enabled AND (e.last_result_at > $2 OR EXISTS ( \
          SELECT 1 FROM jobs d WHERE d.subscriber_id = s.id \
            AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= $3 \
          OFFSET 0))";
}

/// The destinations with due work at `$1` (of enabled subscribers), each with its
/// requests open at `$1`, those for long-running endpoints, and whether a quick
/// endpoint had a result there since `$2`, read without holding them (the next
/// wake-up's read).
///
/// The requests open for long-running endpoints are read on the destination's index,
/// each checked against its endpoint by one probe (`OFFSET 0`): joined, the join's
/// condition on `subscriber_id` let a generic plan read them on the subscriber's index
/// by `due_at` alone (docs/DESIGN.md §3.6).
///
/// A destination's due work is found at its first subscriber with due work
/// (`subscribers_destination`; the outer `OFFSET 0` keeps that a probe per
/// destination): in a fan-out a claim reads a probe or two per destination instead of
/// every enabled subscriber's due work (1,700–2,000 per claim in issue #14's shape).
///
/// Here, in [`HOLD_DUE`] and in the next wake-up's read, `OFFSET 0` keeps each
/// subscriber's `EXISTS` one probe of `jobs_subscriber_due`: turned into a semi-join,
/// a generic plan made while `jobs` was small read every pending job on each run (37
/// ms per claim at 24,000 jobs, `auto_explain`), and PostgreSQL keeps such a plan
/// until the next `ANALYZE` (or DDL) invalidates it.
pub(super) const DUE: &str = "SELECT d.*, \
    (SELECT COUNT(*) FROM jobs o WHERE o.destination = d.key AND o.state = 'in_flight' \
     AND o.due_at > $1) AS in_flight, \
    0::BIGINT AS subscribers, \
    (SELECT COUNT(*) FROM jobs o WHERE o.destination = d.key AND o.state = 'in_flight' \
       AND o.due_at > $1 AND EXISTS (SELECT 1 FROM endpoint_circuits e \
         WHERE e.subscriber_id = o.subscriber_id AND e.long_running OFFSET 0)) \
     AS long_in_flight, \
    EXISTS (SELECT 1 FROM subscribers q JOIN endpoint_circuits e ON e.subscriber_id = q.id \
     WHERE q.destination = d.key AND NOT e.long_running AND e.last_result_at > $2) \
     AS quick_active \
    FROM destinations d WHERE EXISTS ( \
      SELECT 1 FROM subscribers s WHERE s.destination = d.key AND s.enabled AND EXISTS ( \
        SELECT 1 FROM jobs j WHERE j.subscriber_id = s.id \
          AND j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at <= $1 \
          AND j.deadline > $1 OFFSET 0) OFFSET 0)";

/// Holds (`FOR NO KEY UPDATE SKIP LOCKED`) the destinations with due work at `$1`: a
/// destination held by another claim is skipped this time, so two instances never
/// count its open requests at once. Rows `(key, FALSE)`, in key order; then one row
/// `(NULL, TRUE)` when a subscriber has no destination yet (written by a version
/// before destinations, docs/DESIGN.md §15): the claim then assigns them first. In the
/// same statement, so a claim costs no read of its own for that rare case.
pub(super) const HOLD_DUE: &str = "SELECT h.key, FALSE AS unassigned FROM ( \
      SELECT d.key FROM destinations d WHERE EXISTS ( \
        SELECT 1 FROM subscribers s WHERE s.destination = d.key AND s.enabled AND EXISTS ( \
          SELECT 1 FROM jobs j WHERE j.subscriber_id = s.id \
            AND j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at <= $1 \
            AND j.deadline > $1 OFFSET 0) OFFSET 0) \
      ORDER BY d.key FOR NO KEY UPDATE OF d SKIP LOCKED) h \
    UNION ALL SELECT NULL, TRUE WHERE EXISTS (SELECT 1 FROM subscribers \
      WHERE destination IS NULL AND deleted_at IS NULL)";

/// Destinations `$2` (keys) with their requests open at `$1`, those for
/// long-running endpoints, and whether a quick endpoint had a result there since `$3`,
/// read after they are held (a later statement's snapshot sees every claim committed
/// before).
pub(super) const HELD_LOADS: &str = "SELECT d.*, \
    (SELECT COUNT(*) FROM jobs o WHERE o.destination = d.key AND o.state = 'in_flight' \
     AND o.due_at > $1) AS in_flight, \
    0::BIGINT AS subscribers, \
    (SELECT COUNT(*) FROM jobs o WHERE o.destination = d.key AND o.state = 'in_flight' \
       AND o.due_at > $1 AND EXISTS (SELECT 1 FROM endpoint_circuits e \
         WHERE e.subscriber_id = o.subscriber_id AND e.long_running OFFSET 0)) \
     AS long_in_flight, \
    EXISTS (SELECT 1 FROM subscribers q JOIN endpoint_circuits e ON e.subscriber_id = q.id \
     WHERE q.destination = d.key AND NOT e.long_running AND e.last_result_at > $3) \
     AS quick_active \
    FROM destinations d WHERE d.key = ANY($2)";
