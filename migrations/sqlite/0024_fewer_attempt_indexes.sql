-- Issue #36 drops two indexes of `attempts` on PostgreSQL that none of its statements
-- used (attempts_subscriber_finished, attempts_started). SQLite keeps both: its
-- statements name attempts_subscriber_finished (`INDEXED BY`). Nothing changes here;
-- the file keeps the two backends' migrations numbered alike.
SELECT 1;
