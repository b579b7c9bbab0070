-- Payloads stored once per event (issue #36 item 3, docs/DESIGN.md §3): the jobs of
-- one create request that carry the same payload (a fan-out, a schedule's period)
-- reference one `payloads` row by `jobs.payload_id`, and keep `jobs.payload` empty
-- (an empty text is never a JSON payload). A job created alone keeps its payload in
-- its own row, as before. A `payloads` row is written in the transaction of its jobs
-- and referenced by no other job later; retention deletes it once no job references
-- it. `created_at` is epoch ms.
CREATE TABLE payloads (
    id          TEXT COLLATE "C" PRIMARY KEY,
    body        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
ALTER TABLE jobs ADD COLUMN payload_id TEXT COLLATE "C";
-- Retention's check that no job references a payload any more.
CREATE INDEX jobs_payload ON jobs (payload_id) WHERE payload_id IS NOT NULL;
