-- Fewer statements per job (issue #36 item 1): PostgreSQL checks a foreign key with a
-- statement of its own for every row written, one per created job (jobs.subscriber_id
-- → subscribers) and one per claimed attempt (attempts.job_id → jobs): two of the
-- ~20 statements a job cost at one sender. Neither is needed for correctness:
-- - a create holds each subscriber it writes jobs for `FOR KEY SHARE` (and writes none
--   for a subscriber that is gone or being deleted), which is the lock the foreign
--   key's check took; a deletion holds the subscriber `FOR UPDATE` and moves its jobs
--   to a tombstone it wrote first (docs/DESIGN.md §5.3.1);
-- - a claim inserts attempt rows only for jobs it holds `FOR UPDATE`, and the
--   retention purge, the only statement that deletes jobs, deletes their attempt rows
--   itself in the same statement (the cascade did it before).
-- SQLite keeps its foreign keys: checked in the process, they cost no round trip.
DO $$
DECLARE
    fk record;
BEGIN
    FOR fk IN
        SELECT conrelid::regclass::text AS tab, conname FROM pg_constraint
        WHERE contype = 'f'
          AND ((conrelid = 'jobs'::regclass AND confrelid = 'subscribers'::regclass)
            OR (conrelid = 'attempts'::regclass AND confrelid = 'jobs'::regclass))
    LOOP
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', fk.tab, fk.conname);
    END LOOP;
END $$;
