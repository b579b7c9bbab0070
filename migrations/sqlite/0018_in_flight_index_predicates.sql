-- PostgreSQL's migration 0018 gives its two in-flight indexes predicates that keep a
-- generic plan from counting a subscriber's open requests on the destination's index.
-- SQLite plans each statement as it is prepared and the destination counts name their
-- index (INDEXED BY), so its schema stays as it is; this file keeps both backends'
-- migrations numbered alike.
SELECT 1;
