//! Outcomes in PostgreSQL: the statements of a batch (see [`crate::store::outcomes`]),
//! one round trip for a whole batch. The batch (`$1`) is read as rows with
//! `json_to_recordset`.

use sqlx::PgPool;

use crate::store::outcomes::{OutcomeStatements, OutcomeWrite};

/// Holds the subscribers of jobs `$1` (a JSON array of ids), in id order.
const LOCK_SUBSCRIBERS: &str = "SELECT s.id FROM subscribers s WHERE s.id IN ( \
      SELECT j.subscriber_id FROM jobs j WHERE j.id IN (SELECT json_array_elements_text($1::json))) \
    ORDER BY s.id FOR NO KEY UPDATE OF s";

/// Set before [`RECORD`] in the group's transaction: its tables are reached by index
/// (each access names its rows by `= ANY(ARRAY(...))`) and never scanned whole,
/// whatever the plan cache holds. A generic plan made while the tables were small (PostgreSQL plans a
/// prepared statement once, and `json_to_recordset` always counts as 100 rows) kept
/// scanning `jobs` and `attempts` whole as they grew, until the next `ANALYZE`:
/// 4.4 ms per group at 24,000 jobs where index reads take 0.2.
pub const INDEX_READS: &str = "SET LOCAL enable_seqscan = off";

/// Records a batch `$1` in one statement, taking its row locks in the store's order
/// (see [`OutcomeWrite::One`]):
///
/// 1. `locked` holds the jobs whose lease still holds (fencing token, `in_flight`) in
///    ascending id order (a sort under the row locks);
/// 2. `applied` applies their transitions (the same conditions, so a job changed
///    since the statement's snapshot is judged on its latest version);
/// 3. `held`, which starts only once `applied` is complete (its sub-select counts it),
///    holds the attempt rows in (job, number) order: a late result's job is not held
///    by step 1, so its attempt row is the first lock it takes, and a deletion moving a
///    subscriber's attempts takes them in that order too;
/// 4. `finished` finishes each attempt, named by its lease token, so a late result
///    still lands on its own attempt; a resent request makes it a possible duplicate.
///
/// Returns the (id, token) of the transitions applied; the final filter makes the
/// attempts finish before the rows are returned.
pub const RECORD: &str = "WITH v AS MATERIALIZED (SELECT * FROM json_to_recordset($1::json) \
      AS v(id text, token bigint, number bigint, finished_at bigint, outcome text, \
        status bigint, error_class text, reason text, body_excerpt text, state text, \
        due_at bigint, attempts bigint, dead_reason text, deadline bigint, \
        possible_duplicate boolean, resent boolean, now bigint)), \
    locked AS MATERIALIZED (SELECT j.id FROM jobs j \
      JOIN v ON j.id = v.id AND j.lease_token = v.token \
      WHERE j.id = ANY(ARRAY(SELECT id FROM v)) AND j.state = 'in_flight' \
      ORDER BY j.id FOR NO KEY UPDATE OF j), \
    applied AS (UPDATE jobs j SET state = v.state, due_at = v.due_at, \
      attempts = v.attempts, dead_reason = v.dead_reason, dead_detail = NULL, \
      deadline = v.deadline, possible_duplicate = v.possible_duplicate, \
      updated_at = v.now, lease_owner = NULL, lease_expires_at = NULL, \
      delivered_at = CASE WHEN v.state = 'delivered' THEN v.finished_at ELSE j.delivered_at END, \
      dead_at = CASE WHEN v.state = 'dead' THEN v.now ELSE j.dead_at END, \
      last_error_class = COALESCE(v.error_class, j.last_error_class), \
      last_error_status = CASE WHEN v.error_class IS NULL THEN j.last_error_status ELSE v.status END, \
      last_error_reason = CASE WHEN v.error_class IS NULL THEN j.last_error_reason ELSE v.reason END, \
      last_error_body = CASE WHEN v.error_class IS NULL THEN j.last_error_body ELSE v.body_excerpt END \
      FROM v, locked l \
      WHERE j.id = ANY(ARRAY(SELECT id FROM locked)) AND l.id = j.id AND j.id = v.id \
        AND j.lease_token = v.token AND j.state = 'in_flight' \
      RETURNING j.id, j.lease_token), \
    held AS MATERIALIZED (SELECT a.job_id, a.number FROM attempts a \
      JOIN v ON a.job_id = v.id AND a.number = v.number AND a.lease_token = v.token \
      WHERE (SELECT COUNT(*) FROM applied) >= 0 AND a.job_id = ANY(ARRAY(SELECT id FROM v)) \
      ORDER BY a.job_id, a.number FOR NO KEY UPDATE OF a), \
    finished AS (UPDATE attempts a SET finished_at = v.finished_at, outcome = v.outcome, \
      status = v.status, error_class = v.error_class, reason = v.reason, \
      body_excerpt = v.body_excerpt, possible_duplicate = a.possible_duplicate OR v.resent \
      FROM v, held h \
      WHERE a.job_id = ANY(ARRAY(SELECT job_id FROM held)) AND a.job_id = v.id \
        AND a.number = v.number AND a.lease_token = v.token \
        AND h.job_id = a.job_id AND h.number = a.number \
      RETURNING a.job_id) \
    SELECT id, lease_token FROM applied WHERE (SELECT COUNT(*) FROM finished) >= 0";

/// Pauses the subscriber of job `$1` at `$2` for reason `gone` (its receiver
/// answered 410); one already paused keeps its reason.
const PAUSE_SUBSCRIBER: &str = "UPDATE subscribers SET enabled = FALSE, paused_reason = 'gone', \
    paused_at = $2, updated_at = $2 \
    WHERE id = (SELECT subscriber_id FROM jobs WHERE id = $1) AND enabled = TRUE";

impl OutcomeStatements for PgPool {
    const LOCK_SUBSCRIBERS: Option<&'static str> = Some(LOCK_SUBSCRIBERS);
    const RECORD: OutcomeWrite = OutcomeWrite::One {
        settings: INDEX_READS,
        record: RECORD,
    };
    const PAUSE_SUBSCRIBER: &'static str = PAUSE_SUBSCRIBER;
}
