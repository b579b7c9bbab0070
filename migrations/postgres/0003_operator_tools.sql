-- Operator tools (issue #6): replays, the on-call listing filters, subscriber stats and
-- retention. Every instant is epoch milliseconds (BIGINT).

-- A replay: selected dead jobs moved back to `scheduled` at a bounded rate. The matched
-- jobs are snapshotted in `replay_jobs` at creation, so `matched` is exact and the
-- progress (`next_position`; the last burst began at `burst_position`) survives a
-- restart. `paced_until` is the token bucket's
-- state (GCRA theoretical arrival time); `next_at` the instant the next token is free.
CREATE TABLE replays (
    id               TEXT COLLATE "C" PRIMARY KEY,
    filter           TEXT NOT NULL,
    max_jobs         BIGINT NOT NULL CHECK (max_jobs > 0),
    rate_per_second  BIGINT NOT NULL CHECK (rate_per_second > 0),
    ttl_ms           BIGINT NOT NULL CHECK (ttl_ms > 0),
    state            TEXT NOT NULL CHECK (state IN ('running', 'done', 'cancelled')),
    matched          BIGINT NOT NULL,
    requeued         BIGINT NOT NULL DEFAULT 0,
    skipped          BIGINT NOT NULL DEFAULT 0,
    next_position    BIGINT NOT NULL DEFAULT 0,
    burst_position   BIGINT NOT NULL DEFAULT 0,
    paced_until      BIGINT NOT NULL,
    next_at          BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    finished_at      BIGINT
);
CREATE INDEX replays_running ON replays (next_at) WHERE state = 'running';

CREATE TABLE replay_jobs (
    replay_id  TEXT COLLATE "C" NOT NULL REFERENCES replays (id) ON DELETE CASCADE,
    position   BIGINT NOT NULL,
    job_id     TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (replay_id, position)
);
CREATE INDEX replay_jobs_job ON replay_jobs (job_id);

-- A replay grants a fresh attempt budget: `max_attempts` becomes attempts so far plus
-- the producer's budget, kept here from the first replay on.
ALTER TABLE jobs ADD COLUMN attempt_budget BIGINT;

-- dead letters by time and by reason (listings, replay matching)
CREATE INDEX jobs_dead_at ON jobs (dead_at) WHERE state = 'dead';
CREATE INDEX jobs_dead_reason ON jobs (dead_reason, id) WHERE state = 'dead';
-- subscriber stats: counts by state
CREATE INDEX jobs_subscriber_state ON jobs (subscriber_id, state);
-- subscriber stats: last success, last failure
CREATE INDEX attempts_subscriber_finished ON attempts (subscriber_id, finished_at)
    WHERE finished_at IS NOT NULL;
-- retention: finished jobs of each state by the time they finished
CREATE INDEX jobs_finished ON jobs (state, updated_at) WHERE state IN ('delivered', 'cancelled', 'dead');
