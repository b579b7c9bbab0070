-- The operator console (issue #19). Every instant is epoch milliseconds.

-- One row per running instance, written every few seconds (its heartbeat): the console
-- lists the live ones (seen recently) with their worker slots in use. `id` is the
-- instance's lease owner (`host:pid:random`), so a job's lease names a row here.
-- worker_slots is 0 for an instance without a worker. A stopping instance deletes its
-- row; rows not seen for an hour are deleted by the next heartbeat of any instance.
CREATE TABLE instances (
    id            TEXT COLLATE "C" PRIMARY KEY,
    version       TEXT NOT NULL,
    started_at    BIGINT NOT NULL,
    seen_at       BIGINT NOT NULL,
    worker_slots  BIGINT NOT NULL,
    slots_in_use  BIGINT NOT NULL
);

-- Console sessions ended by logout before their expiry: a session cookie is signed and
-- carries its own expiry (any instance can check it), and one listed here is refused
-- by every instance. A row is deleted once its session would have expired anyway.
CREATE TABLE console_sessions_ended (
    id          TEXT COLLATE "C" PRIMARY KEY,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX console_sessions_ended_expiry ON console_sessions_ended (expires_at);

-- The dead letters grouped by dead reason and subscriber, with their first and last
-- dead_at, read from this index alone.
CREATE INDEX jobs_dead_groups ON jobs (dead_reason, subscriber_id, dead_at) WHERE state = 'dead';
