-- Issue #36 drops two foreign keys on PostgreSQL (jobs.subscriber_id → subscribers,
-- attempts.job_id → jobs), whose checks cost a statement each per job there. SQLite
-- keeps them: checked in the process, they cost no round trip, and dropping one would
-- mean rebuilding the table. Nothing changes here; the file keeps the two backends'
-- migrations numbered alike.
SELECT 1;
