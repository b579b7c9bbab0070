//! The inserts of new jobs and of the payloads they share.

use super::{Dialect, Statement, Value};
use crate::store::records::NewJob;

/// Most rows one multi-row job insert writes (13 parameters each, under SQLite's
/// 32,766 and PostgreSQL's 65,535).
pub const INSERT_CHUNK: usize = 500;

/// A job to insert, and where its payload is stored.
#[derive(Clone, Copy, Debug)]
pub struct JobInsert<'a> {
    /// The job.
    pub job: &'a NewJob,
    /// The `payloads` row its payload is stored in (shared with the other jobs of its
    /// request that carry it); `None`: in its own row's `payload`.
    pub payload_id: Option<&'a str>,
}

impl JobInsert<'_> {
    /// The text for the row's `payload` column: the payload, or empty when it is in
    /// a `payloads` row (an empty text is never a JSON payload).
    fn own_payload(&self) -> String {
        match self.payload_id {
            Some(_) => String::new(),
            None => self.job.payload.to_string(),
        }
    }
}

/// `INSERT` of the shared payload `id` with text `body`, made at `created_at` (epoch
/// ms), into `payloads`.
pub fn insert_payload(dialect: Dialect, id: &str, body: &str, created_at: i64) -> Statement {
    let mut query = Statement::new(
        dialect,
        "INSERT INTO payloads (id, body, created_at) VALUES (",
    );
    query
        .bind(Value::Text(id.to_owned()))
        .push(", ")
        .bind(Value::Text(body.to_owned()))
        .push(", ")
        .bind(Value::Int(created_at))
        .push(")");
    query
}

/// `DELETE` of the shared payload `id` when no job references it (returns nothing).
pub fn forget_payload(dialect: Dialect, id: &str) -> Statement {
    let mut query = Statement::new(dialect, "DELETE FROM payloads WHERE id = ");
    query
        .bind(Value::Text(id.to_owned()))
        .push(" AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.payload_id = payloads.id)");
    query
}

/// `SELECT body` of the shared payload `id`.
pub fn payload_body(dialect: Dialect, id: &str) -> Statement {
    let mut query = Statement::new(dialect, "SELECT body FROM payloads WHERE id = ");
    query.bind(Value::Text(id.to_owned()));
    query
}

/// `INSERT` of `jobs` (at most [`INSERT_CHUNK`]) as new `scheduled` rows in one
/// statement; a job whose (subscriber_id, event_id) exists (or repeats an earlier row)
/// is skipped. Returns the ids it inserted (one column, `id`).
pub fn insert_new_jobs(dialect: Dialect, jobs: &[JobInsert<'_>]) -> Statement {
    let mut query = Statement::new(
        dialect,
        "INSERT INTO jobs (id, subscriber_id, event_id, payload, payload_id, state, \
         max_attempts, deliver_at, deadline, due_at, created_at, updated_at, event_type, \
         schedule_id) VALUES ",
    );
    push_rows(&mut query, jobs);
    query.push(" ON CONFLICT (subscriber_id, event_id) DO NOTHING RETURNING id");
    query
}

/// Pushes `jobs` as rows of a `VALUES` list onto `query` — `(id, subscriber_id,
/// event_id, payload, payload_id, 'scheduled', max_attempts, deliver_at, deadline,
/// due_at, created_at, updated_at, event_type, schedule_id), …` — for a multi-row
/// insert of new `scheduled` jobs (due at their `deliver_at`).
pub fn push_rows(query: &mut Statement, jobs: &[JobInsert<'_>]) {
    for (index, insert) in jobs.iter().enumerate() {
        let job = insert.job;
        query.push(if index == 0 { "(" } else { ", (" });
        query
            .bind(Value::Text(job.id.to_string()))
            .push(", ")
            .bind(Value::Text(job.subscriber_id.clone()))
            .push(", ")
            .bind(Value::Text(job.event_id.clone()))
            .push(", ")
            .bind(Value::Text(insert.own_payload()))
            .push(", ")
            .bind(Value::OptText(insert.payload_id.map(str::to_owned)))
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
}
