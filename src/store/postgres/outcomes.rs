//! Outcomes in PostgreSQL: the statements of a batch (see [`crate::store::outcomes`]).
//! The batch (`$1`) is read as rows with `json_to_recordset`.

use sqlx::PgPool;

use super::endpoints::endpoint_columns;
use crate::store::outcomes::{Apply, OutcomeStatements};

/// Holds the subscribers of jobs `$1` (a JSON array of ids), in id order; each job is
/// one primary-key probe, also in a generic plan made on an empty table.
pub(super) const LOCK_SUBSCRIBERS: &str = "SELECT s.id FROM subscribers s WHERE s.id IN ( \
      SELECT l.subscriber_id FROM json_array_elements_text($1::json) AS v(id) \
      CROSS JOIN LATERAL (SELECT j.subscriber_id FROM jobs j \
        WHERE j.id = v.id AND COALESCE(j.state, '') <> '' OFFSET 0) l) \
    ORDER BY s.id FOR NO KEY UPDATE OF s";

/// Writes a batch of outcomes in one statement ([`Apply::WithReads`]; issue #36: five
/// before, which held the jobs, finished the attempts, applied, then held the endpoint
/// circuits and read the jobs' destinations), taking its row locks in the store's
/// order:
/// 1. `held_jobs`: the jobs whose lease still holds (fencing token, `in_flight`),
///    each one primary-key probe, held in ascending id order;
/// 2. `held`: then every attempt row of the batch (a late result's too: its job is
///    not held), named by its lease token so a late result still lands on its own
///    attempt, held in (job, number) order; the `COUNT` over `held_jobs` makes
///    PostgreSQL hold the jobs before it reads one attempt;
/// 3. `finished`: finishes those attempts (a resent request makes one a possible
///    duplicate);
/// 4. `applied`: applies each transition whose job was held;
/// 5. `endpoints`: then (the `COUNT` over `applied`) holds the endpoint circuits of
///    subscribers `$2` `FOR UPDATE`, in ascending subscriber id by the column's
///    collation (`"C"`, as every other holder of these rows sorts them: sorted by the
///    database's collation, ids such as `B` and `a` came in the other order and an
///    outcome group deadlocked with a long-attempt note), each one primary-key probe
///    (a subscriber without a row yet has none to hold: the caller creates it);
///
/// and returns the (id, token) pairs applied, the endpoint rows held and each batch
/// job's destination (read, not held: the caller holds those it changes, after).
///
/// Every read of a table is a probe by primary key, driven by the batch, also in a
/// generic plan made while the tables were empty (`tests/store/pg_plans.rs`): a join
/// of the batch to `attempts` scanned it whole for every group (11,569 rows for a
/// group of 99, `auto_explain`), and PostgreSQL keeps such a plan until the next
/// `ANALYZE` (or DDL) invalidates it. The lateral subqueries with their row locks (or
/// `OFFSET 0`) are never flattened into joins; `COALESCE(j.state, '')` keeps the
/// partial indexes on live jobs (and `jobs_state`) out of the probes. The rows are
/// updated by ordinary scans, not by the held rows' `ctid`: a row another transaction
/// updated after this statement's snapshot (a lease renewal) is found by its old
/// version and followed to the new one, where a `ctid` of the new version would be
/// invisible to the snapshot and the transition lost. Public (hidden) for
/// `tests/store/pg_plans.rs`, which pins its generic plan from outside the crate.
#[doc(hidden)]
pub const APPLY_TRANSITIONS: &str = concat!(
    "WITH v AS MATERIALIZED ( \
      SELECT * FROM json_to_recordset($1::json) AS v(id text, token bigint, number bigint, \
        finished_at bigint, outcome text, status bigint, error_class text, reason text, \
        body_excerpt text, state text, due_at bigint, attempts bigint, dead_reason text, \
        deadline bigint, possible_duplicate boolean, resent boolean, now bigint) \
    ), held_jobs AS MATERIALIZED ( \
      SELECT l.id, h.token FROM (SELECT DISTINCT v.id COLLATE \"C\" AS id, v.token \
        FROM v ORDER BY 1, 2) h \
      CROSS JOIN LATERAL (SELECT j.id FROM jobs j WHERE j.id = h.id \
        AND j.lease_token = h.token AND COALESCE(j.state, '') = 'in_flight' \
        FOR NO KEY UPDATE OF j) l \
    ), held AS MATERIALIZED ( \
      SELECT l.job_id, l.number FROM (SELECT v.id, v.number, v.token FROM v \
        WHERE (SELECT COUNT(*) FROM held_jobs) >= 0 \
        ORDER BY v.id COLLATE \"C\", v.number) h \
      CROSS JOIN LATERAL (SELECT a.job_id, a.number FROM attempts a \
        WHERE a.job_id = h.id AND a.number = h.number AND a.lease_token = h.token \
        FOR NO KEY UPDATE OF a) l \
    ), finished AS ( \
      UPDATE attempts a SET finished_at = v.finished_at, outcome = v.outcome, \
        status = v.status, error_class = v.error_class, reason = v.reason, \
        body_excerpt = v.body_excerpt, \
        possible_duplicate = a.possible_duplicate OR v.resent \
      FROM v JOIN held ON held.job_id = v.id AND held.number = v.number \
      WHERE a.job_id = held.job_id AND a.number = held.number AND a.lease_token = v.token \
      RETURNING a.job_id \
    ), applied AS ( \
      UPDATE jobs j SET state = v.state, due_at = v.due_at, \
      attempts = v.attempts, dead_reason = v.dead_reason, dead_detail = NULL, \
      deadline = v.deadline, possible_duplicate = v.possible_duplicate, updated_at = v.now, \
      lease_owner = NULL, lease_expires_at = NULL, \
      delivered_at = CASE WHEN v.state = 'delivered' THEN v.finished_at ELSE j.delivered_at END, \
      dead_at = CASE WHEN v.state = 'dead' THEN v.now ELSE j.dead_at END, \
      last_error_class = COALESCE(v.error_class, j.last_error_class), \
      last_error_status = CASE WHEN v.error_class IS NULL THEN j.last_error_status ELSE v.status END, \
      last_error_reason = CASE WHEN v.error_class IS NULL THEN j.last_error_reason ELSE v.reason END, \
      last_error_body = CASE WHEN v.error_class IS NULL THEN j.last_error_body ELSE v.body_excerpt END \
      FROM held_jobs h JOIN v ON v.id = h.id AND v.token = h.token \
      WHERE j.id = h.id AND j.lease_token = v.token AND COALESCE(j.state, '') = 'in_flight' \
        AND (SELECT COUNT(*) FROM finished) >= 0 \
      RETURNING j.id, j.lease_token \
    ), endpoints AS MATERIALIZED ( \
      SELECT l.* FROM (SELECT e.id FROM jsonb_array_elements_text($2::jsonb) AS e(id) \
        WHERE (SELECT COUNT(*) FROM applied) >= 0 ORDER BY e.id COLLATE \"C\") h \
      CROSS JOIN LATERAL (SELECT ",
    endpoint_columns!(),
    " FROM endpoint_circuits c \
        WHERE c.subscriber_id = h.id FOR UPDATE OF c) l \
    ) \
    SELECT (SELECT COALESCE(json_agg(json_build_array(a.id, a.lease_token)), '[]') \
        FROM applied a)::text AS applied, \
      (SELECT COALESCE(json_agg(e), '[]') FROM endpoints e)::text AS endpoints, \
      (SELECT COALESCE(jsonb_agg(to_jsonb(d) || jsonb_build_object('job_id', b.id)), '[]') \
        FROM (SELECT DISTINCT v.id FROM v) b \
        CROSS JOIN LATERAL (SELECT d.* FROM jobs j JOIN destinations d ON d.key = j.destination \
          WHERE j.id = b.id OFFSET 0) d)::text AS destinations"
);

impl OutcomeStatements for PgPool {
    const LOCK_SUBSCRIBERS: Option<&'static str> = Some(LOCK_SUBSCRIBERS);
    const APPLY: Apply = Apply::WithReads(APPLY_TRANSITIONS);
    /// Pauses the subscriber of job `$1` at `$2` for reason `gone` (its receiver
    /// answered 410); one already paused keeps its reason.
    const PAUSE_SUBSCRIBER: &'static str = "UPDATE subscribers SET enabled = FALSE, paused_reason = 'gone', \
        paused_at = $2, updated_at = $2 \
        WHERE id = (SELECT subscriber_id FROM jobs WHERE id = $1) AND enabled = TRUE";
}
