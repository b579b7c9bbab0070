//! Black-box delivery tests: deferhook delivers to a real receiver on 127.0.0.1 that
//! answers as each test scripts it. Settings are short so the suite stays fast; every
//! wait is a bounded poll.

#[macro_use]
mod app;
#[path = "../common/log_wait.rs"]
mod log_wait;
#[path = "../common/pg.rs"]
mod pg;
mod receiver;

mod basics;
mod burst;
mod instances;
mod interop;
mod isolation;
mod leases;
mod log_secrets;
mod outcomes;
mod pg_restart;
mod process;
mod replay;
mod retry_after;
mod secrets;
mod signing;
mod store_outage;
mod targets;
