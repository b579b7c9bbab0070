-- A subscriber's own attempt timeout (issue #33, docs/DESIGN.md §3): NULL uses the
-- server's --attempt-timeout-ms. Milliseconds.
ALTER TABLE subscribers ADD COLUMN attempt_timeout_ms INTEGER;
