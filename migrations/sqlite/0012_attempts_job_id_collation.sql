-- Nothing to do on SQLite: it compares attempts.job_id and jobs.id alike (BINARY).
-- PostgreSQL's migration 0012 gives attempts.job_id the collation of jobs.id; the
-- number is kept in step on both backends.
SELECT 1;
