//! Black-box tests of the `deferhook` binary: flags, errors, exit codes, shutdown, and
//! the committed OpenAPI document.

mod commands;
mod openapi;
