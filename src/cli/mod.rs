//! The command line: its root ([`command`]) and the operator commands that talk to a
//! running server over its HTTP API: `deferhook jobs get | list`,
//! `deferhook replay create | status | cancel`,
//! `deferhook destinations list | show | set`,
//! `deferhook events list | show`,
//! `deferhook subscribers list | resume | delete`,
//! `deferhook schedules list | show | put | delete | run` and
//! `deferhook audit list`.
//!
//! They print tables (or the server's JSON with `--json`); a problem+json answer
//! becomes one message naming the title, the detail and each invalid field, and the
//! process exits 1.

pub mod args;
pub mod audit;
pub mod client;
pub mod command;
pub mod destinations;
pub mod event_args;
pub mod events;
pub mod jobs;
pub mod pages;
pub mod progress;
pub mod render;
pub mod replay;
pub mod schedule_args;
pub mod schedules;
pub mod subscriber_delete;
pub mod subscribers;
