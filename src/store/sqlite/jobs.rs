//! Reading and changing one job in SQLite: the statements (see
//! [`crate::store::jobs`]). The job listing is built at run time
//! ([`crate::store::dialect::listing`]).

use super::Pools;
use crate::store::jobs::JobStatements;

impl JobStatements for Pools {
    /// Job `?1`.
    const GET: &'static str = "SELECT j.id, j.subscriber_id, j.event_id, j.state, j.attempts, \
        j.max_attempts, j.deliver_at, j.deadline, j.due_at, j.created_at, j.updated_at, \
        j.delivered_at, j.dead_at, j.dead_reason, j.dead_detail, j.last_error_class, j.last_error_status, \
        j.last_error_reason, j.last_error_body, j.lease_owner, j.lease_token, \
        j.lease_expires_at, s.enabled AS subscriber_enabled, j.event_type, j.schedule_id \
        FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id WHERE j.id = ?1";
    /// An operator's transition of waiting job `?1` at `?6`, only if it is still as it
    /// was read (`updated_at` `?7`; state `?2`, or read as `retrying`, still `in_flight`
    /// with its lease expired at `?6`). Ends the lease (the job's next attempt, if any, is
    /// then a possible duplicate).
    const TRANSITION_WAITING: &'static str = "UPDATE jobs SET state = ?3, due_at = ?4, deadline = ?5, \
        deliver_at = CASE WHEN ?3 = 'scheduled' THEN COALESCE(?4, deliver_at) ELSE deliver_at END, \
        updated_at = ?6, lease_owner = NULL, lease_expires_at = NULL, \
        possible_duplicate = CASE WHEN state = 'in_flight' THEN 1 ELSE possible_duplicate END \
        WHERE id = ?1 AND updated_at = ?7 \
        AND (state = ?2 AND state IN ('scheduled', 'retrying') \
             OR ?2 = 'retrying' AND state = 'in_flight' AND due_at <= ?6)";
}
