-- Endpoint circuits (issue #33, docs/DESIGN.md §15.1): one breaker per subscriber,
-- judged by its own failure rate over a sliding window (two fixed buckets), so one
-- subscriber's timeouts or 5xx answers hold only its own jobs, never the others on its
-- host:port. Also the receiver's back-pressure (Retry-After of a 429 or 503) and the
-- endpoint's typical attempt duration, which the claim's time-fair share of a
-- destination's places reads. A row is written by the first result of a subscriber's
-- attempt; no row reads as a closed circuit with an empty window. Every instant is
-- epoch milliseconds.
CREATE TABLE endpoint_circuits (
    subscriber_id     TEXT PRIMARY KEY NOT NULL,
    circuit           TEXT NOT NULL DEFAULT 'closed' CHECK (circuit IN ('closed', 'open')),
    window_start      INTEGER NOT NULL,
    results           INTEGER NOT NULL DEFAULT 0,
    failures          INTEGER NOT NULL DEFAULT 0,
    timeouts          INTEGER NOT NULL DEFAULT 0,
    previous_results  INTEGER NOT NULL DEFAULT 0,
    previous_failures INTEGER NOT NULL DEFAULT 0,
    previous_timeouts INTEGER NOT NULL DEFAULT 0,
    opened_at         INTEGER,
    -- open: when the cool-down ends and the probe may go
    retry_at          INTEGER,
    cooldown_ms       INTEGER NOT NULL DEFAULT 0,
    -- when it last opened or closed: older attempts' results do not count
    changed_at        INTEGER,
    -- back-pressure: nothing starts before it
    hold_until        INTEGER,
    -- the typical attempt duration (moving average), NULL before the first result
    duration_ms       INTEGER,
    -- the attempt timeout the last timed-out attempt hit, NULL before the first
    -- timeout: the retry advice names it (§5.9)
    timeout_ms        INTEGER,
    -- timeouts in a row, probes' included; any other answer resets it (§5.9)
    consecutive_timeouts INTEGER NOT NULL DEFAULT 0,
    -- duration_ms >= --long-attempt-ms, as of the last result (the claim reads it)
    long_running      INTEGER NOT NULL DEFAULT 0,
    last_result_at    INTEGER NOT NULL
);
