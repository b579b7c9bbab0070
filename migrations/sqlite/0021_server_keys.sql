-- Keys the server makes for itself (issue #34 item 5.4), one row per purpose, made by
-- the first instance that needs one and read by every other: `cursor` signs the page
-- cursors of the API's listings (HMAC-SHA256, docs/DESIGN.md §5.1), so a cursor one
-- instance issued is accepted by every instance on this database, and after a
-- restart. `key` is 32 random bytes in standard base64; `created_at` epoch ms.
-- (0019 and 0020 are other branches' migrations of issue #34.)
CREATE TABLE server_keys (
    name        TEXT PRIMARY KEY NOT NULL,
    key         TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
