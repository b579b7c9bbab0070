//! The event reads in PostgreSQL (see [`crate::store::events`]).

use super::figures::load_columns;
use crate::store::events::EventStatements;
use sqlx::PgPool;

impl EventStatements for PgPool {
    /// The events with an affected job at `$1` (dead since `$2`; held back by the
    /// destinations of `$3`), newest job id first, below `$4` (all when NULL), at most
    /// `$5` (see [`EventStatements::AFFECTED`]). Each kind of affected job is selected on
    /// its own, so each can use its index (`jobs_state`, `jobs_in_flight_subscriber`,
    /// `jobs_dead_at`, `jobs_due`); each affected event's counts are read on
    /// `jobs_event_id`.
    const AFFECTED: &'static str = "WITH affected_jobs AS ( \
          SELECT event_id FROM jobs WHERE state = 'retrying' \
          UNION ALL \
          SELECT event_id FROM jobs WHERE state = 'in_flight' AND subscriber_id IS NOT NULL \
            AND due_at <= $1 \
          UNION ALL \
          SELECT event_id FROM jobs WHERE state = 'dead' AND dead_at >= $2 \
            AND dead_reason <> 'subscriber_deleted' \
          UNION ALL \
          SELECT j.event_id FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
          WHERE j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at <= $1 \
            AND j.state = 'scheduled' AND ( \
              NOT s.enabled \
              OR s.destination IN (SELECT jsonb_array_elements_text($3::jsonb)) \
              OR s.max_in_flight <= (SELECT COUNT(*) FROM jobs o \
                   WHERE o.subscriber_id = s.id \
                   AND o.state = 'in_flight' AND o.due_at > $1))), \
        affected AS ( \
          SELECT event_id, COUNT(*) AS affected FROM affected_jobs GROUP BY event_id), \
        events AS ( \
          SELECT a.event_id, a.affected, MAX(j.id) AS newest_id, \
            MIN(j.created_at) AS created_at, \
            COUNT(CASE WHEN j.state = 'scheduled' THEN 1 END) AS scheduled, \
            COUNT(CASE WHEN j.state = 'in_flight' AND j.due_at > $1 THEN 1 END) AS in_flight, \
            COUNT(CASE WHEN j.state = 'retrying' \
              OR (j.state = 'in_flight' AND j.due_at <= $1) THEN 1 END) AS retrying, \
            COUNT(CASE WHEN j.state = 'delivered' THEN 1 END) AS delivered, \
            COUNT(CASE WHEN j.state = 'dead' THEN 1 END) AS dead, \
            COUNT(CASE WHEN j.state = 'cancelled' THEN 1 END) AS cancelled \
          FROM affected a JOIN jobs j ON j.event_id = a.event_id \
          GROUP BY a.event_id, a.affected) \
        SELECT event_id, affected, newest_id, created_at, scheduled, in_flight, retrying, \
          delivered, dead, cancelled FROM events \
        WHERE $4::TEXT IS NULL OR newest_id < $4 ORDER BY newest_id DESC LIMIT $5";
    /// Every job of event `$1`, in subscriber id order, without the response bodies, with
    /// its latest failed attempt's `finished_at` (the failure test inside the aggregate, so
    /// the planner reads each job's few attempts on `attempts_pkey` rather than combining
    /// it with the subscriber-wide failure index).
    const JOBS: &'static str = "SELECT j.id, j.subscriber_id, j.event_id, j.state, j.attempts, \
        j.max_attempts, j.deliver_at, j.deadline, j.due_at, j.created_at, j.updated_at, \
        j.delivered_at, j.dead_at, j.dead_reason, j.dead_detail, j.last_error_class, \
        j.last_error_status, \
        j.last_error_reason, NULL::TEXT AS last_error_body, j.lease_owner, j.lease_token, \
        j.lease_expires_at, s.enabled AS subscriber_enabled, j.event_type, j.schedule_id, \
        (SELECT MAX(CASE WHEN a.outcome IN ('retryable', 'terminal', 'blocked') \
           THEN a.finished_at END) FROM attempts a WHERE a.job_id = j.id) AS last_error_at \
        FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id WHERE j.event_id = $1 \
        ORDER BY j.subscriber_id";
    /// The limits and their use at `$2` of the enabled subscribers with a job of event
    /// `$1` retrying, or due at `$2` and waiting for a claim, and of the subscribers with a
    /// job of it not delivered whose last attempt timed out (whether their recent attempts
    /// all did decides its advice, §5.9).
    const LOADS: &'static str = concat!(
        "SELECT s.id AS subscriber_id, s.destination, ",
        load_columns!(),
        " FROM subscribers s LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
        WHERE s.enabled AND s.id IN ( \
          SELECT j.subscriber_id FROM jobs j WHERE j.event_id = $1 \
            AND (j.state = 'retrying' OR j.state IN ('scheduled', 'in_flight') AND j.due_at <= $2)) \
        OR s.id IN (SELECT j.subscriber_id FROM jobs j WHERE j.event_id = $1 \
            AND j.last_error_class = 'timeout' AND j.state <> 'delivered')"
    );
    /// The destinations of those subscribers, with their requests open at `$2`.
    const DESTINATIONS: &'static str = "SELECT d.*, \
        (SELECT COUNT(*) FROM jobs o \
         WHERE o.destination = d.key AND o.state = 'in_flight' AND o.due_at > $2) AS in_flight, \
        0::BIGINT AS subscribers FROM destinations d WHERE d.key IN ( \
          SELECT s.destination FROM subscribers s JOIN jobs j ON j.subscriber_id = s.id \
          WHERE s.enabled AND j.event_id = $1 \
            AND (j.state = 'retrying' OR j.state IN ('scheduled', 'in_flight') AND j.due_at <= $2))";
}
