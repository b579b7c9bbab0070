//! The multi-row insert of new jobs.

use super::{Dialect, Statement, Value};
use crate::store::records::NewJob;

/// Most rows one multi-row job insert writes (12 parameters each, under SQLite's
/// 32,766 and PostgreSQL's 65,535).
pub const INSERT_CHUNK: usize = 500;

/// `INSERT` of `jobs` (at most [`INSERT_CHUNK`]) as new `scheduled` rows in one
/// statement; a job whose (subscriber_id, event_id) exists (or repeats an earlier row)
/// is skipped. Returns the ids it inserted (one column, `id`).
pub fn insert_new_jobs(dialect: Dialect, jobs: &[&NewJob]) -> Statement {
    let mut query = Statement::new(
        dialect,
        "INSERT INTO jobs (id, subscriber_id, event_id, payload, state, max_attempts, \
         deliver_at, deadline, due_at, created_at, updated_at, event_type, schedule_id) \
         VALUES ",
    );
    for (index, job) in jobs.iter().enumerate() {
        query.push(if index == 0 { "(" } else { ", (" });
        query
            .bind(Value::Text(job.id.to_string()))
            .push(", ")
            .bind(Value::Text(job.subscriber_id.clone()))
            .push(", ")
            .bind(Value::Text(job.event_id.clone()))
            .push(", ")
            .bind(Value::Text(job.payload.clone()))
            .push(", 'scheduled', ")
            .bind(Value::OptInt(job.max_attempts.map(i64::from)))
            .push(", ")
            .bind(Value::Int(job.deliver_at.as_millis()))
            .push(", ")
            .bind(Value::Int(job.deadline.as_millis()))
            .push(", ")
            .bind(Value::Int(job.deliver_at.as_millis()))
            .push(", ")
            .bind(Value::Int(job.created_at.as_millis()))
            .push(", ")
            .bind(Value::Int(job.created_at.as_millis()))
            .push(", ")
            .bind(Value::OptText(job.event_type.clone()))
            .push(", ")
            .bind(Value::OptText(job.schedule_id.clone()))
            .push(")");
    }
    query.push(" ON CONFLICT (subscriber_id, event_id) DO NOTHING RETURNING id");
    query
}
