//! Endpoint circuits in SQLite (see [`crate::store::endpoints`]). Every write runs on
//! the one writer, so holding a row needs no lock clause.

use super::Pools;
use crate::store::endpoints::EndpointStatements;

impl EndpointStatements for Pools {
    const ENSURE: &'static str = "INSERT INTO endpoint_circuits \
        (subscriber_id, window_start, last_result_at) \
        SELECT value, ?2, ?2 FROM json_each(?1) WHERE true \
        ON CONFLICT (subscriber_id) DO NOTHING";
    const HOLD: &'static str = "SELECT subscriber_id, circuit, window_start, results, \
        failures, timeouts, previous_results, previous_failures, previous_timeouts, \
        opened_at, retry_at, cooldown_ms, changed_at, hold_until, duration_ms, \
        timeout_ms, consecutive_timeouts, last_result_at FROM endpoint_circuits \
        WHERE subscriber_id IN (SELECT value FROM json_each(?1)) ORDER BY subscriber_id";
    const WRITE: &'static str = "UPDATE endpoint_circuits SET circuit = v.circuit, \
        window_start = v.window_start, results = v.results, failures = v.failures, \
        timeouts = v.timeouts, previous_results = v.previous_results, \
        previous_failures = v.previous_failures, previous_timeouts = v.previous_timeouts, \
        opened_at = v.opened_at, retry_at = v.retry_at, cooldown_ms = v.cooldown_ms, \
        changed_at = v.changed_at, hold_until = v.hold_until, duration_ms = v.duration_ms, \
        timeout_ms = v.timeout_ms, consecutive_timeouts = v.consecutive_timeouts, \
        long_running = v.long_running, last_result_at = v.last_result_at \
        FROM (SELECT json_extract(value, '$.subscriber_id') AS subscriber_id, \
          json_extract(value, '$.circuit') AS circuit, \
          json_extract(value, '$.window_start') AS window_start, \
          json_extract(value, '$.results') AS results, \
          json_extract(value, '$.failures') AS failures, \
          json_extract(value, '$.timeouts') AS timeouts, \
          json_extract(value, '$.previous_results') AS previous_results, \
          json_extract(value, '$.previous_failures') AS previous_failures, \
          json_extract(value, '$.previous_timeouts') AS previous_timeouts, \
          json_extract(value, '$.opened_at') AS opened_at, \
          json_extract(value, '$.retry_at') AS retry_at, \
          json_extract(value, '$.cooldown_ms') AS cooldown_ms, \
          json_extract(value, '$.changed_at') AS changed_at, \
          json_extract(value, '$.hold_until') AS hold_until, \
          json_extract(value, '$.duration_ms') AS duration_ms, \
          json_extract(value, '$.timeout_ms') AS timeout_ms, \
          json_extract(value, '$.consecutive_timeouts') AS consecutive_timeouts, \
          json_extract(value, '$.long_running') AS long_running, \
          json_extract(value, '$.last_result_at') AS last_result_at \
          FROM json_each(?1)) AS v \
        WHERE endpoint_circuits.subscriber_id = v.subscriber_id";
    const MARK_LONG: &'static str = "INSERT INTO endpoint_circuits \
        (subscriber_id, window_start, last_result_at, long_running) \
        SELECT DISTINCT j.subscriber_id, ?2, ?2, 1 FROM json_each(?1) v \
        JOIN jobs j ON j.id = json_extract(v.value, '$[0]') \
          AND j.lease_token = json_extract(v.value, '$[1]') \
        WHERE j.state = 'in_flight' AND EXISTS (SELECT 1 FROM subscribers s \
          WHERE s.id = j.subscriber_id AND s.deleted_at IS NULL) \
        ON CONFLICT (subscriber_id) DO UPDATE SET long_running = 1 WHERE long_running = 0";
}
