//! Creating, reading and listing jobs, and their attempt history, in PostgreSQL.

use std::collections::HashSet;

use sqlx::{AssertSqlSafe, PgConnection, PgPool, Postgres, Row};
use uuid::Uuid;

use super::JOBS_CHANNEL;
use crate::domain::{Timestamp, Transition};
use crate::store::StoreError;
use crate::store::batch::{self, Created, KnownSubscribers};
use crate::store::group_commit::GroupResults;
use crate::store::records::{
    Attempt, CreateOutcome, Job, JobFilter, JobVersion, NewJob, PageRequest,
};
use crate::store::rows::{self, ATTEMPT_COLUMNS, JOB_COLUMNS};

impl batch::CreateGroups for PgPool {
    async fn create_group(
        &self,
        requests: &[Vec<NewJob>],
    ) -> Result<GroupResults<Created>, StoreError> {
        create_group(self, requests).await
    }
}

/// Writes a group of create requests in one transaction (see
/// [`batch::write_requests`]) and, when it created a job, announces it once with
/// `NOTIFY` (delivered at commit, to the workers of every instance).
async fn create_group(
    pool: &PgPool,
    requests: &[Vec<NewJob>],
) -> Result<GroupResults<Created>, StoreError> {
    let mut tx = pool.begin().await?;
    // FOR KEY SHARE (what a foreign-key check takes): the subscriber cannot vanish
    // before the jobs that name it commit, while claims (FOR NO KEY UPDATE of the same
    // row) and limit changes go on; FOR SHARE made every claim wait for the creates.
    let known: KnownSubscribers = sqlx::query_as::<_, (String, bool)>(
        "SELECT id, enabled FROM subscribers WHERE id = ANY($1) FOR KEY SHARE",
    )
    .bind(batch::subscriber_ids(requests))
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .collect();
    let results = batch::write_requests(&mut Group(&mut tx), requests, &known).await?;
    let created = results
        .iter()
        .flatten()
        .flatten()
        .any(|outcome| matches!(outcome, CreateOutcome::Created(_)));
    if created {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(JOBS_CHANNEL)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(results)
}

/// A group's transaction, as [`batch::write_requests`] drives it.
struct Group<'t>(&'t mut PgConnection);

impl batch::GroupWriter for Group<'_> {
    async fn execute(&mut self, sql: &'static str) -> Result<(), StoreError> {
        sqlx::query(sql).execute(&mut *self.0).await?;
        Ok(())
    }

    async fn insert(&mut self, jobs: &[NewJob]) -> Result<Created, StoreError> {
        insert(self.0, jobs).await
    }

    async fn insert_new(&mut self, jobs: &[&NewJob]) -> Result<HashSet<String>, StoreError> {
        let ids: Vec<String> = rows::insert_new_jobs::<Postgres>(jobs)
            .build_query_scalar()
            .fetch_all(&mut *self.0)
            .await?;
        Ok(ids.into_iter().collect())
    }
}

/// Inserts one request's jobs (in key order) and reads each back; a repeat of a
/// stored job with another payload is a [`StoreError::PayloadConflict`].
async fn insert(tx: &mut PgConnection, jobs: &[NewJob]) -> Result<Created, StoreError> {
    let find = format!(
        "SELECT {JOB_COLUMNS}, j.payload FROM jobs j JOIN subscribers s \
         ON s.id = j.subscriber_id WHERE j.subscriber_id = $1 AND j.event_id = $2"
    );
    let mut outcomes: Vec<Option<CreateOutcome>> = vec![None; jobs.len()];
    for index in batch::key_order(jobs) {
        let job = &jobs[index];
        let inserted = sqlx::query(
            "INSERT INTO jobs (id, subscriber_id, event_id, payload, state, max_attempts, \
             deliver_at, deadline, due_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, 'scheduled', $5, $6, $7, $6, $8, $8) \
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

pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<Job>, StoreError> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {JOB_COLUMNS} FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
         WHERE j.id = $1"
    )))
    .bind(id.to_string())
    .fetch_optional(pool)
    .await?
    .map(|row| rows::job(&row))
    .transpose()
}

pub async fn list(
    pool: &PgPool,
    filter: &JobFilter,
    page: PageRequest<Uuid>,
) -> Result<Vec<Job>, StoreError> {
    let mut query = rows::job_listing::<Postgres>(filter, &page);
    query
        .build()
        .fetch_all(pool)
        .await?
        .iter()
        .map(rows::job)
        .collect()
}

pub async fn attempts(pool: &PgPool, job_id: Uuid) -> Result<Vec<Attempt>, StoreError> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE job_id = $1 ORDER BY number"
    )))
    .bind(job_id.to_string())
    .fetch_all(pool)
    .await?
    .iter()
    .map(rows::attempt)
    .collect()
}

pub async fn transition_waiting(
    pool: &PgPool,
    id: Uuid,
    seen: JobVersion,
    transition: Transition,
    now: Timestamp,
) -> Result<bool, StoreError> {
    let updated = sqlx::query(
        "UPDATE jobs SET state = $3, due_at = $4, deadline = $5, \
         deliver_at = CASE WHEN $3 = 'scheduled' THEN COALESCE($4, deliver_at) ELSE deliver_at END, \
         updated_at = $6 \
         WHERE id = $1 AND state = $2 AND updated_at = $7 \
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
