//! Creating, reading and listing jobs in SQLite.

use std::collections::BTreeSet;

use sqlx::{AssertSqlSafe, Row, Sqlite, SqlitePool};
use uuid::Uuid;

use crate::domain::{Timestamp, Transition};
use crate::store::records::{CreateOutcome, Job, JobFilter, JobVersion, NewJob, PageRequest};
use crate::store::rows::{self, JOB_COLUMNS};
use crate::store::{StoreError, batch};

pub async fn create(
    writer: &SqlitePool,
    jobs: Vec<NewJob>,
) -> Result<Vec<CreateOutcome>, StoreError> {
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let subscriber_ids: BTreeSet<&str> = jobs.iter().map(|j| j.subscriber_id.as_str()).collect();
    for id in subscriber_ids {
        let known = sqlx::query("SELECT 1 FROM subscribers WHERE id = ?1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        if known.is_none() {
            return Err(StoreError::UnknownSubscriber(id.to_owned()));
        }
    }
    let find = format!(
        "SELECT {JOB_COLUMNS}, j.payload FROM jobs j JOIN subscribers s \
         ON s.id = j.subscriber_id WHERE j.subscriber_id = ?1 AND j.event_id = ?2"
    );
    let order = batch::key_order(&jobs);
    let mut outcomes: Vec<Option<CreateOutcome>> = vec![None; jobs.len()];
    for &index in &order {
        let job = &jobs[index];
        let inserted = sqlx::query(
            "INSERT INTO jobs (id, subscriber_id, event_id, payload, state, max_attempts, \
             deliver_at, deadline, due_at, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, 'scheduled', ?5, ?6, ?7, ?6, ?8, ?8) \
             ON CONFLICT (subscriber_id, event_id) DO NOTHING",
        )
        .bind(job.id.to_string())
        .bind(&job.subscriber_id)
        .bind(&job.event_id)
        .bind(&job.payload)
        .bind(job.max_attempts.map(i64::from))
        .bind(job.deliver_at.as_millis())
        .bind(job.deadline.as_millis())
        .bind(job.created_at.as_millis())
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        let row = sqlx::query(AssertSqlSafe(find.as_str()))
            .bind(&job.subscriber_id)
            .bind(&job.event_id)
            .fetch_one(&mut *tx)
            .await?;
        let stored = rows::job(&row)?;
        outcomes[index] = Some(if inserted {
            CreateOutcome::Created(stored)
        } else {
            // A conflict returns early: dropping the transaction rolls back this call.
            batch::repeat(stored, row.try_get("payload")?, job)?
        });
    }
    tx.commit().await?;
    batch::in_request_order(outcomes)
}

pub async fn get(readers: &SqlitePool, id: Uuid) -> Result<Option<Job>, StoreError> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {JOB_COLUMNS} FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
         WHERE j.id = ?1"
    )))
    .bind(id.to_string())
    .fetch_optional(readers)
    .await?
    .map(|row| rows::job(&row))
    .transpose()
}

pub async fn list(
    readers: &SqlitePool,
    filter: &JobFilter,
    page: PageRequest<Uuid>,
) -> Result<Vec<Job>, StoreError> {
    let mut query = rows::job_listing::<Sqlite>(filter, &page);
    query
        .build()
        .fetch_all(readers)
        .await?
        .iter()
        .map(rows::job)
        .collect()
}

pub async fn transition_waiting(
    pool: &SqlitePool,
    id: Uuid,
    seen: JobVersion,
    transition: Transition,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let updated = sqlx::query(
        "UPDATE jobs SET state = ?3, due_at = ?4, deadline = ?5, \
         deliver_at = CASE WHEN ?3 = 'scheduled' THEN COALESCE(?4, deliver_at) ELSE deliver_at END, \
         updated_at = ?6 \
         WHERE id = ?1 AND state = ?2 AND updated_at = ?7 \
         AND state IN ('scheduled', 'retrying')",
    )
    .bind(id.to_string())
    .bind(seen.state.as_str())
    .bind(transition.to.as_str())
    .bind(transition.due_at.map(Timestamp::as_millis))
    .bind(transition.deadline.as_millis())
    .bind(now.as_millis())
    .bind(seen.updated_at.as_millis())
    .execute(pool)
    .await?
    .rows_affected();
    Ok(updated == 1)
}
