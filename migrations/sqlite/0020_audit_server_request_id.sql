-- The server's own id of each audited request (issue #34 part 4.10; docs/DESIGN.md
-- §5.1, §5.11): a UUID the server gives every request, never taken from the client,
-- recorded beside `request_id` (the client's `x-request-id`, which any actor can copy
-- from another entry). Entries written before this migration have none (NULL).
ALTER TABLE audit ADD COLUMN server_request_id TEXT;
