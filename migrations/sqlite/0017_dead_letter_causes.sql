-- Dead letters grouped by cause first (issue #33, docs/DESIGN.md §17): the dead reason,
-- the last error's class and status, then the subscriber. The index of migration 0013
-- covered (dead_reason, subscriber_id, dead_at) only; this one serves both groupings
-- from the index alone.
DROP INDEX jobs_dead_groups;
CREATE INDEX jobs_dead_causes ON jobs
    (dead_reason, last_error_class, last_error_status, subscriber_id, dead_at)
    WHERE state = 'dead';
