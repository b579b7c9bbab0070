//! Outcomes in PostgreSQL: the statements of a batch (see [`crate::store::outcomes`]).
//! The batch (`$1`) is read as rows with `json_to_recordset`.

use sqlx::PgPool;

use crate::store::outcomes::OutcomeStatements;

/// Holds the subscribers of jobs `$1` (a JSON array of ids), in id order.
const LOCK_SUBSCRIBERS: &str = "SELECT s.id FROM subscribers s WHERE s.id IN ( \
      SELECT j.subscriber_id FROM jobs j WHERE j.id IN (SELECT json_array_elements_text($1::json))) \
    ORDER BY s.id FOR NO KEY UPDATE OF s";

/// Holds the jobs of the batch whose lease still holds, in id order, before any
/// attempt row is touched: a sweep or a reclaiming claim holds a job and then updates
/// its attempt, so taking the attempt first could deadlock with it.
const LOCK_JOBS: &str = "SELECT j.id FROM jobs j \
    JOIN json_to_recordset($1::json) AS v(id text, token bigint) \
      ON j.id = v.id AND j.lease_token = v.token \
    WHERE j.state = 'in_flight' ORDER BY j.id FOR NO KEY UPDATE OF j";

/// [`OutcomeStatements::FINISH_ATTEMPTS`] on PostgreSQL, for `tests/store/pg_plans.rs`,
/// which pins its generic plan from outside the crate.
#[doc(hidden)]
pub const FINISH_ATTEMPTS: &str = <PgPool as OutcomeStatements>::FINISH_ATTEMPTS;

impl OutcomeStatements for PgPool {
    const LOCK_SUBSCRIBERS: Option<&'static str> = Some(LOCK_SUBSCRIBERS);
    const LOCK_JOBS: Option<&'static str> = Some(LOCK_JOBS);
    /// Finishes each attempt of the batch: its row is named by its lease token, so a late
    /// result still lands on its own attempt. A resent request makes it a possible duplicate.
    /// The rows are held in (job, number) order first: a late result's job is not held by
    /// [`LOCK_JOBS`], so its attempt row is the first lock it takes, and a deletion moving a
    /// subscriber's attempts takes them in that order too. Each row is one primary-key
    /// probe, taken in that order (the lateral subquery with its row lock is never
    /// flattened into a join): written as a join, a generic plan made while `attempts` was
    /// small scanned it whole for every group (11,569 rows for a group of 99,
    /// `auto_explain`), and PostgreSQL keeps such a plan until the next `ANALYZE`
    /// (or DDL) invalidates it.
    const FINISH_ATTEMPTS: &'static str = "WITH held AS MATERIALIZED (SELECT l.job_id, l.number \
          FROM (SELECT * FROM json_to_recordset($1::json) AS h(id text, number bigint, \
            token bigint) ORDER BY h.id COLLATE \"C\", h.number) h \
          CROSS JOIN LATERAL (SELECT a.job_id, a.number FROM attempts a \
            WHERE a.job_id = h.id AND a.number = h.number AND a.lease_token = h.token \
            FOR NO KEY UPDATE OF a) l) \
        UPDATE attempts a SET finished_at = v.finished_at, \
        outcome = v.outcome, status = v.status, error_class = v.error_class, reason = v.reason, \
        body_excerpt = v.body_excerpt, possible_duplicate = a.possible_duplicate OR v.resent FROM \
        json_to_recordset($1::json) AS v(id text, token bigint, number bigint, \
          finished_at bigint, outcome text, status bigint, error_class text, reason text, \
          body_excerpt text, state text, due_at bigint, attempts bigint, dead_reason text, \
          deadline bigint, possible_duplicate boolean, resent boolean, now bigint), held \
        WHERE a.job_id = v.id AND a.number = v.number AND a.lease_token = v.token \
          AND held.job_id = a.job_id AND held.number = a.number";
    /// Applies each transition only while its lease holds (fencing token, `in_flight`);
    /// returns the (id, token) of those applied.
    const APPLY_TRANSITIONS: &'static str = "UPDATE jobs j SET state = v.state, due_at = v.due_at, \
        attempts = v.attempts, dead_reason = v.dead_reason, dead_detail = NULL, deadline = v.deadline, \
        possible_duplicate = v.possible_duplicate, updated_at = v.now, \
        lease_owner = NULL, lease_expires_at = NULL, \
        delivered_at = CASE WHEN v.state = 'delivered' THEN v.finished_at ELSE j.delivered_at END, \
        dead_at = CASE WHEN v.state = 'dead' THEN v.now ELSE j.dead_at END, \
        last_error_class = COALESCE(v.error_class, j.last_error_class), \
        last_error_status = CASE WHEN v.error_class IS NULL THEN j.last_error_status ELSE v.status END, \
        last_error_reason = CASE WHEN v.error_class IS NULL THEN j.last_error_reason ELSE v.reason END, \
        last_error_body = CASE WHEN v.error_class IS NULL THEN j.last_error_body ELSE v.body_excerpt END \
        FROM \
        json_to_recordset($1::json) AS v(id text, token bigint, number bigint, \
          finished_at bigint, outcome text, status bigint, error_class text, reason text, \
          body_excerpt text, state text, due_at bigint, attempts bigint, dead_reason text, \
          deadline bigint, possible_duplicate boolean, now bigint) \
        WHERE j.id = v.id AND j.lease_token = v.token AND j.state = 'in_flight' \
        RETURNING j.id, j.lease_token";
    /// Pauses the subscriber of job `$1` at `$2` for reason `gone` (its receiver
    /// answered 410); one already paused keeps its reason.
    const PAUSE_SUBSCRIBER: &'static str = "UPDATE subscribers SET enabled = FALSE, paused_reason = 'gone', \
        paused_at = $2, updated_at = $2 \
        WHERE id = (SELECT subscriber_id FROM jobs WHERE id = $1) AND enabled = TRUE";
}
