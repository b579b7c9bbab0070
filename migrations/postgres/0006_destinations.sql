-- Destinations (issue #14): subscribers whose URLs share host:port share a
-- destination, with its own concurrency limit and circuit breaker. A subscriber's
-- destination is written from its URL (existing ones at start-up); a job's is written
-- by the claim, so the requests open to a destination are its jobs in flight.
ALTER TABLE subscribers ADD COLUMN destination TEXT COLLATE "C";
CREATE INDEX subscribers_destination ON subscribers (destination, id);
ALTER TABLE jobs ADD COLUMN destination TEXT COLLATE "C";
CREATE INDEX jobs_in_flight_destination ON jobs (destination, due_at) WHERE state = 'in_flight';

CREATE TABLE destinations (
    key               TEXT COLLATE "C" PRIMARY KEY,
    -- the operator's limit; NULL follows --destination-max-in-flight
    max_in_flight     BIGINT CHECK (max_in_flight > 0),
    paused            BOOLEAN NOT NULL DEFAULT FALSE,
    forced_circuit    TEXT CHECK (forced_circuit IN ('open', 'closed')),
    circuit           TEXT NOT NULL DEFAULT 'closed'
                        CHECK (circuit IN ('closed', 'open', 'half_open')),
    failures          BIGINT NOT NULL DEFAULT 0,
    cooldown_ms       BIGINT NOT NULL DEFAULT 0,
    opened_at         BIGINT,
    -- open: when the probe may go; half_open: when the probe's lease ends
    retry_at          BIGINT,
    probe_job_id      TEXT,
    probe_token       BIGINT,
    -- when the circuit last opened or closed: older attempts' results do not count
    changed_at        BIGINT,
    last_error_at     BIGINT,
    last_error_class  TEXT,
    last_error_status BIGINT,
    last_error_reason TEXT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);
