-- Keys the server makes for itself (issue #34 item 5.4), one row per purpose, made by
-- the first instance that needs one and read by every other: `cursor` signs the page
-- cursors of the API's listings (HMAC-SHA256, docs/DESIGN.md §5.1), so a cursor one
-- instance issued is accepted by every instance on this database, and after a
-- restart. `key` is 32 random bytes in standard base64; `created_at` epoch ms.
-- (No 0019: issue #34's changes were numbered apart; 0020 is the audit's server id.)
CREATE TABLE server_keys (
    name        TEXT PRIMARY KEY NOT NULL,
    key         TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
