-- Recurring schedules and event types (issue #20). Every instant is epoch milliseconds.

-- The event types a subscriber subscribes to, as given (a JSON array of names, each
-- exact or ending in the wildcard `*`), for reading it back...
ALTER TABLE subscribers ADD COLUMN event_types TEXT NOT NULL DEFAULT '[]';
-- ...and one row per pattern, for matching: an event of type `shipment.delivered` looks
-- up the patterns `shipment.delivered`, `*`, `s*`, `sh*`, ... `shipment.delivered*`
-- (every prefix with the wildcard) through the primary key. Written in the same
-- transaction as the column; a subscriber's rows go with its row.
CREATE TABLE subscriber_event_types (
    pattern        TEXT NOT NULL,
    subscriber_id  TEXT NOT NULL REFERENCES subscribers (id) ON DELETE CASCADE,
    PRIMARY KEY (pattern, subscriber_id)
);
CREATE INDEX subscriber_event_types_subscriber ON subscriber_event_types (subscriber_id);

-- A job's event type (`webhook-event-type`) and the schedule that created it.
ALTER TABLE jobs ADD COLUMN event_type TEXT;
ALTER TABLE jobs ADD COLUMN schedule_id TEXT;
-- the job listing's filters, newest first; only the jobs that have one
CREATE INDEX jobs_event_type ON jobs (event_type, id) WHERE event_type IS NOT NULL;
CREATE INDEX jobs_schedule_id ON jobs (schedule_id, id) WHERE schedule_id IS NOT NULL;

-- A recurring schedule: its periods start by `cron` in `time_zone`, or every
-- `every_ms` from `anchor`; each period becomes one job per target (its subscriber, or
-- every subscriber of its event type) created shortly before the period starts, with
-- the event id `event_id` filled with the period's start, so the jobs' (subscriber_id,
-- event_id) uniqueness makes a period's job unique across restarts and instances.
CREATE TABLE schedules (
    id             TEXT PRIMARY KEY NOT NULL,
    subscriber_id  TEXT,
    event_type     TEXT,
    cron           TEXT,
    time_zone      TEXT NOT NULL,
    every_ms       INTEGER CHECK (every_ms > 0),
    anchor         INTEGER,
    event_id       TEXT NOT NULL,
    payload        TEXT NOT NULL,
    ttl_ms         INTEGER,
    max_attempts   INTEGER,
    catch_up       TEXT NOT NULL CHECK (catch_up IN ('latest', 'none')),
    enabled        INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    -- the start of the earliest period whose jobs are not created yet; NULL: no more
    next_period    INTEGER,
    -- counts the restarts of the cursor (a new timing, a resume): a scheduler moves the
    -- cursor only if it and this are as it read them
    cursor_version INTEGER NOT NULL DEFAULT 0,
    -- a scheduler making the schedule's due periods holds it until then: the others
    -- pass it by (it is taken over once this has passed)
    leased_until   INTEGER,
    -- the last period whose jobs were created, its event id, one of its jobs (NULL
    -- when no subscriber matched) and how many it created
    last_period    INTEGER,
    last_event_id  TEXT,
    last_job_id    TEXT,
    last_jobs      INTEGER,
    -- why the last period created nothing (e.g. its subscriber does not exist)
    last_error     TEXT,
    CHECK ((subscriber_id IS NULL) <> (event_type IS NULL)),
    CHECK ((cron IS NULL) <> (every_ms IS NULL))
);
-- the scheduler's read: the enabled schedules whose next period is due soon
CREATE INDEX schedules_due ON schedules (next_period) WHERE enabled = 1 AND next_period IS NOT NULL;
