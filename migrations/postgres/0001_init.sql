-- deferhook schema, version 1. Every instant is epoch milliseconds (BIGINT, UTC), as in
-- migrations/sqlite, so both stores compare the same numbers. Identifiers use the "C"
-- collation so that ordering (and cursors) is bytewise, as in SQLite.

CREATE TABLE subscribers (
    id                    TEXT COLLATE "C" PRIMARY KEY,
    url                   TEXT NOT NULL,
    secret                TEXT NOT NULL,
    max_in_flight         BIGINT NOT NULL DEFAULT 16 CHECK (max_in_flight > 0),
    rate_limit_per_second BIGINT CHECK (rate_limit_per_second > 0),
    enabled               BOOLEAN NOT NULL DEFAULT TRUE,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL
);

CREATE TABLE jobs (
    id                 TEXT COLLATE "C" PRIMARY KEY,
    subscriber_id      TEXT COLLATE "C" NOT NULL REFERENCES subscribers (id),
    event_id           TEXT COLLATE "C" NOT NULL,
    payload            TEXT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN
                         ('scheduled', 'in_flight', 'retrying', 'delivered', 'dead', 'cancelled')),
    attempts           BIGINT NOT NULL DEFAULT 0,
    max_attempts       BIGINT,
    deliver_at         BIGINT NOT NULL,
    deadline           BIGINT NOT NULL,
    -- when the job next needs a worker: deliver_at (scheduled), next_attempt_at
    -- (retrying), the lease's expiry (in_flight); NULL once terminal
    due_at             BIGINT,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    delivered_at       BIGINT,
    dead_at            BIGINT,
    dead_reason        TEXT,
    last_error_class   TEXT,
    last_error_status  BIGINT,
    last_error_reason  TEXT,
    last_error_body    TEXT,
    lease_owner        TEXT,
    lease_token        BIGINT NOT NULL DEFAULT 0,
    lease_expires_at   BIGINT,
    -- the outcome of the last attempt is unknown: the next one may be a duplicate
    possible_duplicate BOOLEAN NOT NULL DEFAULT FALSE,
    UNIQUE (subscriber_id, event_id)
);

-- the claim: due work in due order
CREATE INDEX jobs_due ON jobs (due_at) WHERE state IN ('scheduled', 'retrying', 'in_flight');
-- the deadline sweep
CREATE INDEX jobs_deadline ON jobs (deadline) WHERE state IN ('scheduled', 'retrying', 'in_flight');
-- listings, newest first (ids are UUIDv7, ordered by creation time)
CREATE INDEX jobs_event_id ON jobs (event_id, id);
CREATE INDEX jobs_subscriber_id ON jobs (subscriber_id, id);
CREATE INDEX jobs_state ON jobs (state, id);

CREATE TABLE attempts (
    job_id             TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    number             BIGINT NOT NULL,
    lease_token        BIGINT NOT NULL,
    lease_owner        TEXT NOT NULL,
    started_at         BIGINT NOT NULL,
    finished_at        BIGINT,
    outcome            TEXT NOT NULL CHECK (outcome IN
                         ('in_progress', 'delivered', 'retryable', 'terminal', 'unknown', 'blocked')),
    status             BIGINT,
    error_class        TEXT,
    reason             TEXT,
    body_excerpt       TEXT,
    possible_duplicate BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (job_id, number)
);
