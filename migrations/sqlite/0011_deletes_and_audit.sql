-- Deleted subscribers and the audit trail (issue #16, parts 8 and 9). Every instant is
-- epoch milliseconds.

-- A deleted subscriber stays as a tombstone row, renamed to `<id>/<deletion uuid>` (an
-- id the API cannot take: '/' is not allowed in subscriber ids), with its jobs and
-- attempts moved to it, so its history stays readable until retention while the id,
-- its idempotency space (UNIQUE (subscriber_id, event_id)), stats and destination are
-- free for a new subscriber. A tombstone is disabled, has no secret and no
-- destination; deleted_at is when it was deleted (NULL for every live subscriber).
ALTER TABLE subscribers ADD COLUMN deleted_at INTEGER;
-- retention: the tombstones deleted before a cutoff
CREATE INDEX subscribers_deleted ON subscribers (deleted_at) WHERE deleted_at IS NOT NULL;
-- A deletion commits in two steps (docs/DESIGN.md §5.3.1): first the row is marked
-- (deleted_at set, disabled, secret wiped, deleting_to naming its new tombstone), then
-- its jobs and attempts move to the tombstone in small batches and the row goes. While
-- deleting_to is set the id is neither live nor free; a crash mid-move is finished by
-- the maintenance task, which finds these rows here.
ALTER TABLE subscribers ADD COLUMN deleting_to TEXT;
CREATE INDEX subscribers_deleting ON subscribers (id) WHERE deleting_to IS NOT NULL;

-- The audit trail: one row per successful operator action. `parameters` is the
-- request's JSON without secrets; `actor` the API token's fingerprint (NULL when the
-- API runs without tokens). Listed newest first by id (UUIDv7 stamped with `at`).
CREATE TABLE audit (
    id          TEXT PRIMARY KEY NOT NULL,
    at          INTEGER NOT NULL,
    action      TEXT NOT NULL,
    target      TEXT,
    parameters  TEXT,
    actor       TEXT,
    status      INTEGER NOT NULL,
    request_id  TEXT
);
CREATE INDEX audit_action ON audit (action, id);
CREATE INDEX audit_target ON audit (target, id);
-- retention: the oldest first
CREATE INDEX audit_at ON audit (at);
