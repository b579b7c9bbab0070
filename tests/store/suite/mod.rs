//! The cases of the store conformance suite, one file per subject. Each case is
//! defined once with `store_case!` (main.rs), which runs it on every backend against a
//! fresh, empty, migrated store.

pub mod audit;
pub mod claims;
pub mod clock;
pub mod console;
pub mod control;
pub mod create_groups;
pub mod deadlines;
pub mod deletions;
pub mod destinations;
pub mod endpoints;
pub mod event_types;
pub mod events;
pub mod expired_leases;
pub mod fencing;
pub mod filters;
pub mod health;
pub mod jobs;
pub mod leases;
pub mod limits;
pub mod listing;
pub mod on_call_filters;
pub mod payloads;
pub mod reclaims;
pub mod replay_slices;
pub mod replays;
pub mod retention;
pub mod rotation;
pub mod scheduler;
pub mod schedules;
pub mod sealing;
pub mod sealing_leftovers;
pub mod server_keys;
pub mod stats;
pub mod subscriber_changes;
pub mod subscribers;
