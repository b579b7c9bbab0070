//! Deleting a subscriber in SQLite: the statements (see [`crate::store::deletions`]).

use super::Pools;
use crate::store::deletions::DeletionStatements;

impl DeletionStatements for Pools {
    /// Live subscriber `?1`.
    const LOCK: &'static str = "SELECT 1 FROM subscribers WHERE id = ?1 AND deleted_at IS NULL";
    /// Copies subscriber `?1` as tombstone `?2`, deleted at `?3`.
    const TOMBSTONE: &'static str = "INSERT INTO subscribers (id, url, secret, max_in_flight, \
        rate_limit_per_second, enabled, created_at, updated_at, paused_reason, paused_at, \
        previous_secret, previous_secret_expires_at, destination, deleted_at) \
        SELECT ?2, url, '', max_in_flight, rate_limit_per_second, 0, created_at, ?3, NULL, \
          NULL, NULL, NULL, NULL, ?3 \
        FROM subscribers WHERE id = ?1";
    /// Subscriber `?1`'s waiting jobs end `dead` at `?2` (`jobs_subscriber_state`).
    const KILL_JOBS: &'static str = "UPDATE jobs SET state = 'dead', dead_reason = 'subscriber_deleted', \
        dead_at = ?2, due_at = NULL, updated_at = ?2, lease_owner = NULL, lease_expires_at = NULL \
        WHERE subscriber_id = ?1 AND state IN ('scheduled', 'retrying', 'in_flight')";
    /// Subscriber `?1`'s attempts in progress read `unknown` from `?2`, for reason `?3`.
    const ABANDON_ATTEMPTS: &'static str = "UPDATE attempts SET outcome = 'unknown', finished_at = ?2, \
        reason = ?3 WHERE subscriber_id = ?1 AND outcome = 'in_progress'";
    /// Subscriber `?1` is being deleted into tombstone `?2` from `?3`.
    const MARK: &'static str = "UPDATE subscribers SET deleted_at = ?3, deleting_to = ?2, \
        enabled = 0, secret = '', previous_secret = NULL, previous_secret_expires_at = NULL, \
        paused_reason = NULL, paused_at = NULL, destination = NULL, updated_at = ?3 \
        WHERE id = ?1";
    /// The tombstone of subscriber `?1` if it is being deleted.
    const MOVING_TO: &'static str = "SELECT deleting_to FROM subscribers \
        WHERE id = ?1 AND deleting_to IS NOT NULL";
    /// At most `?3` of subscriber `?1`'s jobs move to tombstone `?2` (`jobs_subscriber_id`).
    const MOVE_JOBS: &'static str = "UPDATE jobs SET subscriber_id = ?2 WHERE id IN ( \
        SELECT id FROM jobs WHERE subscriber_id = ?1 LIMIT CAST(?3 AS INTEGER))";
    /// At most `?3` of subscriber `?1`'s attempts move to tombstone `?2`.
    const MOVE_ATTEMPTS: &'static str = "UPDATE attempts SET subscriber_id = ?2 \
        WHERE (job_id, number) IN ( \
          SELECT job_id, number FROM attempts WHERE subscriber_id = ?1 LIMIT CAST(?3 AS INTEGER))";
    /// Subscriber `?1` goes, once being deleted and nothing refers to it any more.
    const DELETE: &'static str = "DELETE FROM subscribers WHERE id = ?1 AND deleting_to IS NOT NULL \
        AND NOT EXISTS (SELECT 1 FROM jobs WHERE subscriber_id = ?1) \
        AND NOT EXISTS (SELECT 1 FROM attempts WHERE subscriber_id = ?1)";
    const FORGET_ENDPOINT: &'static str = "DELETE FROM endpoint_circuits WHERE subscriber_id = ?1";
    /// The subscribers being deleted, at most `?1` (`subscribers_deleting`).
    const IN_PROGRESS: &'static str = "SELECT id FROM subscribers WHERE deleting_to IS NOT NULL \
        ORDER BY id LIMIT CAST(?1 AS INTEGER)";
    /// Tombstones deleted before `?1` without jobs left, at most `?2`.
    const PURGE_TOMBSTONES: &'static str = "DELETE FROM subscribers WHERE id IN ( \
          SELECT s.id FROM subscribers s WHERE s.deleted_at IS NOT NULL AND s.deleted_at < ?1 \
            AND s.deleting_to IS NULL \
            AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.subscriber_id = s.id) \
            AND NOT EXISTS (SELECT 1 FROM subscribers d WHERE d.deleting_to = s.id) LIMIT CAST(?2 AS INTEGER)) \
        AND deleted_at IS NOT NULL AND deleting_to IS NULL";
}
