//! Delivery: workers claim due jobs under leases, send them signed, and record each
//! outcome with a write fenced by the lease token (docs/DESIGN.md §2–§4).

pub mod attempt;
pub mod complete;
pub mod deletions;
pub mod held_leases;
pub mod outcome;
pub mod resolve;
pub mod retention;
mod run_loop;
pub mod sender;
pub mod settings;
pub mod signing;
pub mod slots;
pub mod worker;

pub use settings::DeliverySettings;
pub use worker::{ClaimPasses, Pending, Upkeep, Worker};
