-- The requests open per subscriber and per destination are each counted on an index
-- only that count can use (docs/DESIGN.md §3.6). PostgreSQL plans a claim's
-- statements once per connection (generic plans) and keeps the plan until the next
-- ANALYZE; planned while the tables were small or never analysed, every in-flight
-- index cost the same, and the per-subscriber count of the claim went through
-- `jobs_in_flight_destination` on its second column, reading every request open at
-- every destination once per subscriber (611 rows x 1,700 subscribers per claim in
-- issue #33's incident: 100-190 ms a claim instead of 20). A predicate that the other
-- count does not imply makes each index unusable for it: a subscriber's count names
-- its subscriber, a destination's its destination.
DROP INDEX jobs_in_flight_subscriber;
CREATE INDEX jobs_in_flight_subscriber ON jobs (subscriber_id, due_at)
    WHERE state = 'in_flight' AND subscriber_id IS NOT NULL;
DROP INDEX jobs_in_flight_destination;
CREATE INDEX jobs_in_flight_destination ON jobs (destination, due_at)
    WHERE state = 'in_flight' AND destination IS NOT NULL;
