-- Claims (issue #8): each subscriber's due work in due order, so a claim reads only
-- the oldest few due jobs of each subscriber instead of ranking the whole backlog.
CREATE INDEX jobs_subscriber_due ON jobs (subscriber_id, due_at, id)
    WHERE state IN ('scheduled', 'retrying', 'in_flight');
