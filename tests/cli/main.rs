//! Black-box tests of the `deferhook` binary: flags, errors, exit codes, shutdown, and
//! the committed OpenAPI document.

#[path = "../common/app.rs"]
mod app;
#[path = "../common/log_wait.rs"]
mod log_wait;
#[path = "../common/pg.rs"]
mod pg;

mod audit_commands;
mod commands;
mod deploy_files;
mod destination_commands;
mod event_commands;
mod event_dot_segments;
mod migrations;
mod openapi;
mod operator_commands;
mod operator_support;
mod replay_commands;
mod replay_live;
mod replay_slices;
mod request_log;
mod schedule_commands;
mod secret_flags;
mod secret_key_file;
mod subscriber_commands;
