-- Per-subscriber limits: the claim counts attempts started in the last second per
-- subscriber (rate_limit_per_second), so attempts carry their subscriber.

ALTER TABLE attempts ADD COLUMN subscriber_id TEXT COLLATE "C";
UPDATE attempts SET subscriber_id = jobs.subscriber_id FROM jobs WHERE jobs.id = attempts.job_id;
CREATE INDEX attempts_subscriber_started ON attempts (subscriber_id, started_at);
-- attempts of the last second, for every subscriber at once
CREATE INDEX attempts_started ON attempts (started_at);
-- open attempts per subscriber (max_in_flight)
CREATE INDEX jobs_in_flight_subscriber ON jobs (subscriber_id, due_at) WHERE state = 'in_flight';
