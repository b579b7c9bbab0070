//! Read-only figures in SQLite: the worker's next wake-up, the metrics gauges, a
//! subscriber's load and statistics (see [`crate::store::figures`]).
//!
//! Partial indexes are named with `INDEXED BY` and their predicates repeated word for
//! word: SQLite uses a partial index only when the query's text implies its predicate,
//! and `INDEXED BY` turns a plan that cannot use it into an error instead of a scan.

use super::Pools;
use super::destinations::DUE;
use crate::domain::Timestamp;
use crate::store::StoreError;
use crate::store::figures::FigureStatements;

/// The soonest of: the next scheduled or retrying job coming due (enabled
/// subscribers); for each enabled subscriber with due work whose destination lets work
/// go (`?2`, a JSON object keyed by those destinations), the moment its limits next
/// let a claim take some (now when they already do; none while it is at
/// `max_in_flight`, its half-open endpoint circuit has its probe out, or it is
/// long-running and its destination's share for those is full (§15.2): a finished
/// attempt frees it, and this instance's worker wakes on its own attempts, the poll on
/// other instances'; the end of its endpoint circuit's cool-down or of its receiver's
/// `Retry-After` while they hold it); the next lease to expire (one
/// already expired counts through its subscriber's due work, so a lease no claim can
/// take over now, its destination full or its circuit open, is no reason to wake); the
/// next deadline of a waiting job; a running replay's next burst. Range scans on the
/// `jobs_due`, `jobs_deadline` and `replays_running` indexes, so far-future jobs cost
/// nothing.
const NEXT_WAKE: &str = "SELECT \
           (SELECT MIN(CASE \
              WHEN s.max_in_flight <= (SELECT COUNT(*) FROM jobs o \
                INDEXED BY jobs_in_flight_subscriber WHERE o.subscriber_id = s.id \
                AND o.state = 'in_flight' AND o.due_at > ?1) THEN NULL \
              WHEN MAX(COALESCE(e.hold_until, ?1), CASE WHEN e.circuit = 'open' \
                THEN COALESCE(e.retry_at, ?1) ELSE ?1 END) > ?1 \
                THEN MAX(COALESCE(e.hold_until, ?1), CASE WHEN e.circuit = 'open' \
                  THEN COALESCE(e.retry_at, ?1) ELSE ?1 END) \
              WHEN e.circuit = 'open' AND EXISTS (SELECT 1 FROM jobs o \
                INDEXED BY jobs_in_flight_subscriber WHERE o.subscriber_id = s.id \
                AND o.state = 'in_flight' AND o.due_at > ?1) THEN NULL \
              WHEN e.long_running = 1 AND (SELECT json_extract(v.value, '$[1]') \
                FROM json_each(?2) v WHERE v.key = s.destination) <= 0 THEN NULL \
              WHEN s.rate_limit_per_second IS NULL THEN ?1 \
              ELSE (SELECT CASE \
                WHEN MAX(a.started_at) > ?1 - 1000 * MAX(1, s.rate_limit_per_second / 10) \
                                  / s.rate_limit_per_second \
                  THEN MAX(a.started_at) + 1000 * MAX(1, s.rate_limit_per_second / 10) \
                                  / s.rate_limit_per_second \
                WHEN COUNT(*) >= s.rate_limit_per_second THEN MIN(a.started_at) + 1000 \
                ELSE ?1 END \
                FROM attempts a INDEXED BY attempts_subscriber_started \
                WHERE a.subscriber_id = s.id AND a.started_at > ?1 - 1000) END) \
            FROM subscribers s LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
            WHERE s.enabled = 1 \
              AND s.destination IN (SELECT key FROM json_each(?2)) AND EXISTS ( \
              SELECT 1 FROM jobs d INDEXED BY jobs_subscriber_due \
              WHERE d.subscriber_id = s.id \
                AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= ?1 \
                AND d.deadline > ?1 \
                AND NOT (d.state = 'in_flight' AND d.max_attempts IS NOT NULL \
                         AND d.attempts >= d.max_attempts))) AS held, \
           (SELECT j.due_at FROM jobs j INDEXED BY jobs_due \
            JOIN subscribers s ON s.id = j.subscriber_id \
            WHERE j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at > ?1 \
              AND j.state <> 'in_flight' AND s.enabled = 1 \
            ORDER BY j.due_at LIMIT 1) AS coming, \
           (SELECT MIN(due_at) FROM jobs INDEXED BY jobs_in_flight_subscriber \
            WHERE state = 'in_flight' AND due_at > ?1) AS lease, \
           (SELECT deadline FROM jobs INDEXED BY jobs_deadline \
            WHERE state IN ('scheduled', 'retrying', 'in_flight') AND state <> 'in_flight' \
            ORDER BY deadline LIMIT 1) AS deadline, \
           (SELECT MIN(next_at) FROM replays INDEXED BY replays_running \
            WHERE state = 'running') AS replay";

crate::store::lite_rows::row! {
    /// The five candidates of [`NEXT_WAKE`], each `NULL` when it has none.
    struct NextWake {
        held: Option<i64>,
        coming: Option<i64>,
        lease: Option<i64>,
        deadline: Option<i64>,
        replay: Option<i64>,
    }
}

/// The columns of a subscriber's load ([`crate::store::figures::LoadRow`]), from
/// `subscribers s` and `endpoint_circuits e`, at `?2`.
macro_rules! load_columns {
    () => {
        "s.max_in_flight AS subscriber_max_in_flight, s.rate_limit_per_second, \
             (SELECT COUNT(*) FROM jobs o INDEXED BY jobs_in_flight_subscriber \
              WHERE o.subscriber_id = s.id \
              AND o.state = 'in_flight' AND o.due_at > ?2) AS open_attempts, \
             CASE WHEN s.rate_limit_per_second IS NULL THEN 0 ELSE \
             (SELECT COUNT(*) FROM attempts a WHERE a.subscriber_id = s.id \
              AND a.started_at > ?2 - 1000) END AS started_last_second, \
             CASE WHEN s.rate_limit_per_second IS NULL THEN NULL ELSE \
             (SELECT MAX(a.started_at) FROM attempts a WHERE a.subscriber_id = s.id \
              AND a.started_at > ?2 - 1000) END AS last_started_at, \
             e.circuit AS endpoint_circuit, e.retry_at AS endpoint_retry_at, \
             e.hold_until AS endpoint_hold_until, \
        e.consecutive_timeouts AS endpoint_timeouts, s.attempt_timeout_ms AS own_timeout_ms, \
        e.timeout_ms AS endpoint_timeout_ms"
    };
}
pub(super) use load_columns;

impl FigureStatements for Pools {
    const DUE_DESTINATIONS: &'static str = DUE;
    const GAUGED_DESTINATIONS: &'static str = "SELECT d.*, \
        (SELECT COUNT(*) FROM jobs o INDEXED BY jobs_in_flight_destination \
         WHERE o.destination = d.key AND o.state = 'in_flight' AND o.due_at > ?1) AS in_flight, \
        0 AS subscribers FROM destinations d \
        WHERE d.paused = 1 OR d.circuit <> 'closed' OR d.forced_circuit IS NOT NULL \
          OR d.key IN (SELECT destination FROM jobs INDEXED BY jobs_in_flight_destination \
                       WHERE state = 'in_flight' AND due_at > ?1)";
    /// Jobs per state.
    const STATE_COUNTS_ALL: &'static str = "SELECT state, COUNT(*) AS n FROM jobs GROUP BY state";
    /// Dead jobs per reason (`jobs_dead_reason`, covering).
    const DEAD_REASON_COUNTS_ALL: &'static str = "SELECT dead_reason AS reason, COUNT(*) AS n FROM jobs \
        INDEXED BY jobs_dead_reason WHERE state = 'dead' GROUP BY dead_reason";
    /// Jobs `in_flight` whose lease has expired at `?1` (read as `retrying`).
    const EXPIRED_LEASES_ALL: &'static str = "SELECT COUNT(*) AS n FROM jobs \
        INDEXED BY jobs_in_flight_subscriber WHERE state = 'in_flight' AND due_at <= ?1";
    /// The gauges at `?1` other than the counts; `?2` is `?1` minus the objective.
    /// An `in_flight` job whose lease has expired is due (at its lease's expiry) and
    /// `retrying` (docs/DESIGN.md §2.2).
    const GAUGES: &'static str = "SELECT \
               (SELECT MIN(j.due_at) FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
                 WHERE j.state IN ('scheduled', 'retrying', 'in_flight') AND j.due_at <= ?1 \
                 AND s.enabled = 1) AS oldest_eligible, \
               (SELECT MIN(deliver_at) FROM ( \
                 SELECT deliver_at FROM jobs WHERE state = 'retrying' \
                 UNION ALL SELECT deliver_at FROM jobs INDEXED BY jobs_in_flight_subscriber \
                 WHERE state = 'in_flight' AND due_at <= ?1) AS r) AS oldest_retrying, \
               (SELECT COUNT(*) FROM jobs WHERE state IN ('scheduled', 'retrying', 'in_flight') \
                 AND deliver_at <= ?2) AS past_slo, \
               (SELECT COUNT(*) FROM jobs WHERE state IN ('scheduled', 'retrying', 'in_flight') \
                 AND (deadline - ?1) * 10 <= (deadline - deliver_at)) AS near_deadline";
    /// Subscriber `?1`'s limits and their use at `?2`.
    const LOAD: &'static str = concat!(
        "SELECT ",
        load_columns!(),
        " FROM subscribers s LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
          WHERE s.id = ?1 AND s.deleted_at IS NULL"
    );
    /// [`Self::LOAD`] of each subscriber, with its id and destination (`jobs_in_flight_destination`
    /// for its open requests).
    const LOADS_AT_DESTINATIONS: &'static str = concat!(
        "SELECT s.id AS subscriber_id, ",
        load_columns!(),
        ", d.*, (SELECT COUNT(*) FROM jobs o INDEXED BY jobs_in_flight_destination \
           WHERE o.destination = d.key AND o.state = 'in_flight' AND o.due_at > ?2) \
           AS in_flight, 0 AS subscribers \
          FROM subscribers s LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
          JOIN destinations d ON d.key = s.destination \
          WHERE s.id IN (SELECT value FROM json_each(?1)) AND s.deleted_at IS NULL"
    );
    /// Whether subscriber `?1` exists.
    const SUBSCRIBER_EXISTS: &'static str =
        "SELECT 1 FROM subscribers WHERE id = ?1 AND deleted_at IS NULL";
    /// Jobs of subscriber `?1` per state (`jobs_subscriber_state`, covering).
    const STATE_COUNTS: &'static str = "SELECT state, COUNT(*) AS n FROM jobs \
        INDEXED BY jobs_subscriber_state WHERE subscriber_id = ?1 GROUP BY state";
    /// Jobs of subscriber `?1` `in_flight` whose lease has expired at `?2`.
    const EXPIRED_LEASES: &'static str = "SELECT COUNT(*) AS n FROM jobs \
        INDEXED BY jobs_in_flight_subscriber \
        WHERE subscriber_id = ?1 AND state = 'in_flight' AND due_at <= ?2";
    /// The earliest due time of subscriber `?1`'s waiting jobs due at `?2` (an expired
    /// lease's included: its job is `retrying`, due at the expiry), and its latest
    /// delivered attempt (`attempts_subscriber_finished`, newest first).
    const ELIGIBLE_AND_SUCCESS: &'static str = "SELECT \
        (SELECT MIN(due_at) FROM jobs INDEXED BY jobs_subscriber_state \
         WHERE subscriber_id = ?1 AND state IN ('scheduled', 'retrying', 'in_flight') \
         AND due_at <= ?2) \
         AS oldest_eligible, \
        (SELECT finished_at FROM attempts INDEXED BY attempts_subscriber_finished \
         WHERE subscriber_id = ?1 AND finished_at IS NOT NULL AND outcome = 'delivered' \
         ORDER BY finished_at DESC LIMIT 1) AS last_success";
    /// Subscriber `?1`'s latest finished attempt that failed.
    const LAST_FAILURE: &'static str = "SELECT finished_at, outcome, error_class, status, \
        reason FROM attempts INDEXED BY attempts_subscriber_finished \
        WHERE subscriber_id = ?1 AND finished_at IS NOT NULL \
          AND outcome IN ('retryable', 'terminal', 'blocked') \
        ORDER BY finished_at DESC LIMIT 1";

    async fn next_job_wake(
        &self,
        now: Timestamp,
        admitted: String,
    ) -> Result<Option<Timestamp>, StoreError> {
        let row: NextWake = sqlx::query_as(NEXT_WAKE)
            .bind(now.as_millis())
            .bind(admitted)
            .fetch_one(&self.readers)
            .await?;
        let earliest = [row.held, row.coming, row.lease, row.deadline, row.replay]
            .into_iter()
            .flatten()
            .min();
        Ok(earliest.map(Timestamp::from_millis))
    }
}
