-- Endpoint circuits (issue #33, docs/DESIGN.md §15.1): one breaker per subscriber,
-- judged by its own failure rate over a sliding window (two fixed buckets), so one
-- subscriber's timeouts or 5xx answers hold only its own jobs, never the others on its
-- host:port. Also the receiver's back-pressure (Retry-After of a 429 or 503) and the
-- endpoint's typical attempt duration, which the claim's time-fair share of a
-- destination's places reads. A row is written by the first result of a subscriber's
-- attempt; no row reads as a closed circuit with an empty window. Every instant is
-- epoch milliseconds.
CREATE TABLE endpoint_circuits (
    subscriber_id     TEXT COLLATE "C" PRIMARY KEY,
    circuit           TEXT NOT NULL DEFAULT 'closed' CHECK (circuit IN ('closed', 'open')),
    window_start      BIGINT NOT NULL,
    results           BIGINT NOT NULL DEFAULT 0,
    failures          BIGINT NOT NULL DEFAULT 0,
    timeouts          BIGINT NOT NULL DEFAULT 0,
    previous_results  BIGINT NOT NULL DEFAULT 0,
    previous_failures BIGINT NOT NULL DEFAULT 0,
    previous_timeouts BIGINT NOT NULL DEFAULT 0,
    opened_at         BIGINT,
    -- open: when the cool-down ends and the probe may go
    retry_at          BIGINT,
    cooldown_ms       BIGINT NOT NULL DEFAULT 0,
    -- when it last opened or closed: older attempts' results do not count
    changed_at        BIGINT,
    -- back-pressure: nothing starts before it
    hold_until        BIGINT,
    -- the typical attempt duration (moving average), NULL before the first result
    duration_ms       BIGINT,
    -- the attempt timeout the last timed-out attempt hit, NULL before the first
    -- timeout: the retry advice names it (§5.9)
    timeout_ms        BIGINT,
    -- timeouts in a row, probes' included; any other answer resets it (§5.9)
    consecutive_timeouts BIGINT NOT NULL DEFAULT 0,
    -- duration_ms >= --long-attempt-ms, as of the last result (the claim reads it)
    long_running      BOOLEAN NOT NULL DEFAULT FALSE,
    last_result_at    BIGINT NOT NULL
);
