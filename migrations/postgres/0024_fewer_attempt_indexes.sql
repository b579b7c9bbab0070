-- Cheaper rows (issue #36 item 2): every attempt row is inserted (`in_progress`, by the
-- claim) and updated once (its outcome), and PostgreSQL writes a new entry in every
-- index whose predicate holds for each version (no update of `attempts` is HOT: the
-- outcome changes `finished_at` and `outcome`, which indexes hold). Two indexes served
-- no statement of PostgreSQL's (an audit with EXPLAIN of every statement, custom and
-- generic plans, on 200,000 jobs and 231,000 attempts):
-- - attempts_subscriber_finished (subscriber_id, finished_at): no plan used it; a
--   subscriber's latest success and failure are read on attempts_subscriber_success
--   and attempts_subscriber_failure (migration 0013);
-- - attempts_started (started_at): only the console's recent attempts of one
--   subscriber used it, scanning it backwards past every other subscriber's rows
--   (2,413 rows read for 100, 5,530 in a generic plan); without it that read is a
--   backward range of attempts_subscriber_started (100 rows read).
-- An attempt's life wrote 8 index entries (3 + 5), now 5 (2 + 3). SQLite keeps both:
-- its statements name attempts_subscriber_finished (`INDEXED BY`), and its writes cost
-- no round trip per index.
DROP INDEX IF EXISTS attempts_subscriber_finished;
DROP INDEX IF EXISTS attempts_started;
