-- Why a subscriber is paused (issue #16): 'gone' when its receiver answered 410,
-- 'operator' when an operator set enabled = false; NULL while enabled (and for one
-- paused before this migration: its reason was not recorded). paused_at: when.
ALTER TABLE subscribers ADD COLUMN paused_reason TEXT
    CHECK (paused_reason IN ('gone', 'operator'));
ALTER TABLE subscribers ADD COLUMN paused_at INTEGER;
