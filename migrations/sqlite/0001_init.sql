-- deferhook schema, version 1. Every instant is epoch milliseconds (INTEGER, UTC).

CREATE TABLE subscribers (
    id                    TEXT PRIMARY KEY NOT NULL,
    url                   TEXT NOT NULL,
    secret                TEXT NOT NULL,
    max_in_flight         INTEGER NOT NULL DEFAULT 16 CHECK (max_in_flight > 0),
    rate_limit_per_second INTEGER CHECK (rate_limit_per_second > 0),
    enabled               INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

CREATE TABLE jobs (
    id                 TEXT PRIMARY KEY NOT NULL,
    subscriber_id      TEXT NOT NULL REFERENCES subscribers (id),
    event_id           TEXT NOT NULL,
    payload            TEXT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN
                         ('scheduled', 'in_flight', 'retrying', 'delivered', 'dead', 'cancelled')),
    attempts           INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER,
    deliver_at         INTEGER NOT NULL,
    deadline           INTEGER NOT NULL,
    -- when the job next needs a worker: deliver_at (scheduled), next_attempt_at
    -- (retrying), the lease's expiry (in_flight); NULL once terminal
    due_at             INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    delivered_at       INTEGER,
    dead_at            INTEGER,
    dead_reason        TEXT,
    last_error_class   TEXT,
    last_error_status  INTEGER,
    last_error_reason  TEXT,
    last_error_body    TEXT,
    lease_owner        TEXT,
    lease_token        INTEGER NOT NULL DEFAULT 0,
    lease_expires_at   INTEGER,
    -- the outcome of the last attempt is unknown: the next one may be a duplicate
    possible_duplicate INTEGER NOT NULL DEFAULT 0,
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
    number             INTEGER NOT NULL,
    lease_token        INTEGER NOT NULL,
    lease_owner        TEXT NOT NULL,
    started_at         INTEGER NOT NULL,
    finished_at        INTEGER,
    outcome            TEXT NOT NULL CHECK (outcome IN
                         ('in_progress', 'delivered', 'retryable', 'terminal', 'unknown', 'blocked')),
    status             INTEGER,
    error_class        TEXT,
    reason             TEXT,
    body_excerpt       TEXT,
    possible_duplicate INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, number)
);
