//! deferhook: schedules and delivers delayed webhooks.
//!
//! Producers POST a job (subscriber, event id, JSON payload, when to deliver, a
//! deadline); deferhook stores it durably and its workers deliver it signed (Standard
//! Webhooks), retried with backoff and jitter until the deadline, dead-lettered when it
//! cannot succeed. The layout: [`domain`] holds the pure rules (state machine,
//! policies), [`store`] the durable state behind one trait, [`app`] the operator
//! actions and views, which [`api`] (the HTTP API) and [`console`] (the operator's
//! pages) both serve, [`delivery`] the workers, [`server`] the wiring of `deferhook
//! serve`, [`cli`] the operator commands that talk to a running server.

pub mod api;
pub mod app;
pub mod audit_trail;
pub mod cli;
pub mod clock_sync;
pub mod config;
pub mod console;
pub mod delivery;
pub mod domain;
pub mod fan_out;
pub mod heartbeat;
pub mod metrics;
pub mod open_files;
pub mod scheduler;
pub mod secret_key;
pub mod server;
pub mod store;
pub mod telemetry;
#[doc(hidden)]
pub mod testing;
