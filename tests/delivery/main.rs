//! Black-box delivery tests: deferhook delivers to a real receiver on 127.0.0.1 that
//! answers as each test scripts it. Most tests step the worker with a manual clock
//! (`TestApp::run_pending` after `TestApp::advance`); the tests of the running loop
//! itself (wake-ups, several instances, restarts, shutdown, bursts) run it and poll
//! for outcomes with bounded timeouts. No test sleeps for a schedule.

#[macro_use]
#[path = "../common/app.rs"]
mod app;
#[path = "../common/faulty_store.rs"]
mod faulty_store;
#[path = "../common/log_wait.rs"]
mod log_wait;
#[path = "../common/pg.rs"]
mod pg;
mod receiver;
mod setup;

mod audit_crash;
mod basics;
mod black_box_clocks;
mod burst;
mod console_browser;
mod destinations_circuit;
mod destinations_limit;
mod incident;
mod instances;
mod interop;
mod isolation;
mod large_fan_out;
mod leases;
mod log_secrets;
mod malformed_answers;
mod outcomes;
mod pg_read_only;
mod pg_restart;
mod pgbouncer;
mod process;
mod replay;
mod resend;
mod retry_after;
mod schedules;
mod secrets;
mod signing;
mod skewed_clocks;
mod store_outage;
mod subscriber_deleted;
mod targets;
mod timeout_advice;
mod wake_ups;
mod worker_slots;
