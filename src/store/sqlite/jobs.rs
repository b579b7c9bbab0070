//! Creating, reading and listing jobs in SQLite.

use std::collections::HashSet;

use sqlx::{AssertSqlSafe, Row, Sqlite, SqliteConnection, SqlitePool};
use uuid::Uuid;

use crate::domain::{Timestamp, Transition};
use crate::store::StoreError;
use crate::store::batch::{self, Created, KnownSubscribers};
use crate::store::group_commit::GroupResults;
use crate::store::records::{CreateOutcome, Job, JobFilter, JobVersion, NewJob, PageRequest};
use crate::store::rows::{self, JOB_COLUMNS};

/// Writes a group of create requests in one transaction (one fsync): each request is
/// all or nothing on its own (a savepoint around a multi-job request), and a request
/// that fails (unknown subscriber, payload conflict) leaves the others written. An
/// error of the database itself fails the whole group (see
/// [`batch::alone_on_failure`]).
impl batch::CreateGroups for SqlitePool {
    async fn create_group(
        &self,
        requests: &[Vec<NewJob>],
    ) -> Result<GroupResults<Created>, StoreError> {
        create_group(self, requests).await
    }
}

async fn create_group(
    writer: &SqlitePool,
    requests: &[Vec<NewJob>],
) -> Result<GroupResults<Created>, StoreError> {
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
    let mut known = KnownSubscribers::new();
    for id in batch::subscriber_ids(requests) {
        let enabled: Option<bool> =
            sqlx::query_scalar("SELECT enabled FROM subscribers WHERE id = ?1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        if let Some(enabled) = enabled {
            known.insert(id.to_owned(), enabled);
        }
    }
    let results = batch::write_requests(&mut Group(&mut tx), requests, &known).await?;
    tx.commit().await?;
    Ok(results)
}

/// A group's transaction, as [`batch::write_requests`] drives it.
struct Group<'t>(&'t mut SqliteConnection);

impl batch::GroupWriter for Group<'_> {
    async fn execute(&mut self, sql: &'static str) -> Result<(), StoreError> {
        sqlx::query(sql).execute(&mut *self.0).await?;
        Ok(())
    }

    async fn insert(&mut self, jobs: &[NewJob]) -> Result<Created, StoreError> {
        insert(self.0, jobs).await
    }

    async fn insert_new(&mut self, jobs: &[&NewJob]) -> Result<HashSet<String>, StoreError> {
        let ids: Vec<String> = rows::insert_new_jobs::<Sqlite>(jobs)
            .build_query_scalar()
            .fetch_all(&mut *self.0)
            .await?;
        Ok(ids.into_iter().collect())
    }
}

/// Inserts one request's jobs (in key order) and reads each back; a repeat of a
/// stored job with another payload is a [`StoreError::PayloadConflict`].
async fn insert(tx: &mut SqliteConnection, jobs: &[NewJob]) -> Result<Created, StoreError> {
    let find = format!(
        "SELECT {JOB_COLUMNS}, j.payload FROM jobs j JOIN subscribers s \
         ON s.id = j.subscriber_id WHERE j.subscriber_id = ?1 AND j.event_id = ?2"
    );
    let mut outcomes: Vec<Option<CreateOutcome>> = vec![None; jobs.len()];
    for index in batch::key_order(jobs) {
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
            batch::repeat(stored, row.try_get("payload")?, job)?
        });
    }
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
