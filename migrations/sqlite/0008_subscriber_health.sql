-- Subscriber health and retry advice (issue #16 parts 3 and 4).

-- Why a job that died at its deadline had waited (a waiting reason: its subscriber
-- paused, its destination paused or its circuit open), written by the deadline sweep;
-- NULL otherwise. Not an error class: dead_reason stays `deadline_exceeded`.
ALTER TABLE jobs ADD COLUMN dead_detail TEXT
    CHECK (dead_detail IN ('subscriber_paused', 'destination_paused', 'destination_circuit_open'));

-- A subscriber's latest success and its failures, found by one index seek each (its
-- health: the last attempt failed? since when?) however long its history: partial
-- indexes, so each finished attempt is in at most one of them (an `unknown` outcome,
-- after a crash, is in neither: it says nothing about the receiver).
CREATE INDEX attempts_subscriber_success ON attempts (subscriber_id, finished_at)
    WHERE outcome = 'delivered';
CREATE INDEX attempts_subscriber_failure ON attempts (subscriber_id, finished_at)
    WHERE outcome IN ('retryable', 'terminal', 'blocked');

-- A subscriber's jobs dead in the last hour (`dead_last_hour`): a range per subscriber,
-- however many other subscribers' jobs died meanwhile.
CREATE INDEX jobs_subscriber_dead ON jobs (subscriber_id, dead_at) WHERE state = 'dead';
