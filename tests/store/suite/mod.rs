//! The cases of the store conformance suite. Each is `pub async fn case(store:
//! SharedStore)` against a fresh, empty, migrated store, and is listed once in
//! `store_suite!` (main.rs) so every backend runs it.

pub mod claims;
pub mod control;
pub mod deadlines;
pub mod fencing;
pub mod filters;
pub mod jobs;
pub mod leases;
pub mod limits;
pub mod listing;
pub mod reclaims;
pub mod replays;
pub mod retention;
pub mod rotation;
pub mod sealing;
pub mod stats;
pub mod subscribers;
