//! Endpoint circuits in PostgreSQL (see [`crate::store::endpoints`]). An outcome group
//! creates its subscribers' missing rows and holds them `FOR UPDATE` in ascending
//! subscriber order, after its attempt rows and before its destinations (the lock
//! order of docs/DESIGN.md §3.6), so two groups apply their results one after the
//! other. Claims only read the rows.

use sqlx::PgPool;

use crate::store::endpoints::EndpointStatements;

/// The columns of [`crate::store::endpoints::EndpointRow`], unqualified: the endpoint
/// hold and the outcome statement's (`super::outcomes`) read the same list.
macro_rules! endpoint_columns {
    () => {
        "subscriber_id, circuit, window_start, results, failures, timeouts, \
        previous_results, previous_failures, previous_timeouts, opened_at, retry_at, \
        cooldown_ms, changed_at, hold_until, duration_ms, timeout_ms, \
        consecutive_timeouts, last_result_at"
    };
}
pub(super) use endpoint_columns;

impl EndpointStatements for PgPool {
    const ENSURE: &'static str = "INSERT INTO endpoint_circuits \
        (subscriber_id, window_start, last_result_at) \
        SELECT id, $2, $2 FROM jsonb_array_elements_text($1::jsonb) AS v(id) ORDER BY id \
        ON CONFLICT (subscriber_id) DO NOTHING";
    const HOLD: &'static str = concat!(
        "SELECT ",
        endpoint_columns!(),
        " FROM endpoint_circuits \
        WHERE subscriber_id = ANY(ARRAY(SELECT jsonb_array_elements_text($1::jsonb))) \
        ORDER BY subscriber_id FOR UPDATE"
    );
    const WRITE: &'static str = "UPDATE endpoint_circuits e SET circuit = v.circuit, \
        window_start = v.window_start, results = v.results, failures = v.failures, \
        timeouts = v.timeouts, previous_results = v.previous_results, \
        previous_failures = v.previous_failures, previous_timeouts = v.previous_timeouts, \
        opened_at = v.opened_at, retry_at = v.retry_at, cooldown_ms = v.cooldown_ms, \
        changed_at = v.changed_at, hold_until = v.hold_until, duration_ms = v.duration_ms, \
        timeout_ms = v.timeout_ms, consecutive_timeouts = v.consecutive_timeouts, \
        long_running = v.long_running, last_result_at = v.last_result_at \
        FROM jsonb_to_recordset($1::jsonb) AS v(subscriber_id TEXT, circuit TEXT, \
          window_start BIGINT, results BIGINT, failures BIGINT, timeouts BIGINT, \
          previous_results BIGINT, previous_failures BIGINT, previous_timeouts BIGINT, \
          opened_at BIGINT, retry_at BIGINT, cooldown_ms BIGINT, changed_at BIGINT, \
          hold_until BIGINT, duration_ms BIGINT, timeout_ms BIGINT, \
          consecutive_timeouts BIGINT, long_running BOOLEAN, last_result_at BIGINT) \
        WHERE e.subscriber_id = v.subscriber_id";
    /// Each lease is one primary-key probe of `jobs` (a lateral subquery, never a
    /// join): in a generic plan made on an empty table, a join read every job in flight
    /// (`tests/store/pg_plans.rs`).
    const MARK_LONG: &'static str = "INSERT INTO endpoint_circuits AS e \
        (subscriber_id, window_start, last_result_at, long_running) \
        SELECT DISTINCT j.subscriber_id, $2::BIGINT, $2::BIGINT, true \
        FROM jsonb_array_elements($1::jsonb) AS v(a) \
        CROSS JOIN LATERAL (SELECT o.subscriber_id FROM jobs o WHERE o.id = v.a ->> 0 \
          AND o.lease_token = (v.a ->> 1)::BIGINT AND COALESCE(o.state, '') = 'in_flight' \
          OFFSET 0) j \
        WHERE EXISTS (SELECT 1 FROM subscribers s \
          WHERE s.id = j.subscriber_id AND s.deleted_at IS NULL) \
        ORDER BY j.subscriber_id \
        ON CONFLICT (subscriber_id) DO UPDATE SET long_running = true \
        WHERE NOT e.long_running";
}
