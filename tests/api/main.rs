//! Black-box tests of the HTTP API (docs/DESIGN.md §5): a real server on 127.0.0.1:0 over a
//! fresh SQLite file, a manual clock, and plain HTTP requests.

#[path = "../common/app.rs"]
mod app;
#[path = "../common/db_faults.rs"]
mod db_faults;
#[path = "../common/pg.rs"]
mod pg;

mod audit;
mod audit_settlement;
mod auth;
mod connections;
mod console_access;
mod console_forms;
mod console_pages;
mod console_support;
mod credential_guesses;
mod dead_jobs_gauge;
mod destinations;
mod errors;
mod event_reads;
mod event_types;
mod fan_out;
mod hang_ups;
mod health;
mod http_errors;
mod idempotency;
mod job_control;
mod job_retry;
mod jobs_create;
mod jobs_filters;
mod jobs_read;
mod limits;
mod loopback_host;
mod on_call_edges;
mod page_cursors;
mod replay_slices;
mod replays;
mod request_ids;
mod schedule_quotas;
mod schedules;
mod secret_rotation;
mod subscriber_changes;
mod subscriber_delete;
mod subscriber_health;
mod subscriber_ids;
mod subscriber_pause;
mod subscriber_stats;
mod subscribers;
mod support;
mod targets;
mod worker_wake_ups;
