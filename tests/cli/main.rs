//! Black-box tests of the `deferhook` binary: flags, errors, exit codes, shutdown, and
//! the committed OpenAPI document.

#[path = "../common/log_wait.rs"]
mod log_wait;

mod commands;
mod deploy_files;
mod migrations;
mod openapi;
mod operator_commands;
mod operator_support;
mod replay_commands;
mod replay_live;
