//! Creating jobs in PostgreSQL: the statements of a group's transaction (see
//! [`crate::store::creates`]).

use std::collections::BTreeSet;

use sqlx::PgPool;

use super::{JOBS_CHANNEL, Tx, binds};
use crate::store::StoreError;
use crate::store::creates::{CreateStatements, KnownSubscribers, LoneWritten};
use crate::store::dialect::inserts::{JobInsert, push_rows};
use crate::store::dialect::{Dialect, Query, Statement, Value};
use crate::store::records::NewJob;

/// Which of the subscribers `$1` exist, with whether each is enabled. FOR KEY SHARE
/// (what a foreign-key check takes): the subscriber cannot vanish before the jobs that
/// name it commit, while claims (FOR NO KEY UPDATE of the same row) and limit changes
/// go on; FOR SHARE made every claim wait for the creates.
const KNOWN_SUBSCRIBERS: &str = "SELECT id, enabled FROM subscribers WHERE id = ANY($1) AND deleted_at IS NULL \
    FOR KEY SHARE";

impl CreateStatements for PgPool {
    /// Inserts one job unless its key exists.
    const INSERT: &'static str = "INSERT INTO jobs (id, subscriber_id, event_id, payload, state, \
        max_attempts, deliver_at, deadline, due_at, created_at, updated_at, event_type, \
        schedule_id, payload_id) \
        VALUES ($1, $2, $3, $4, 'scheduled', $5, $6, $7, $6, $8, $8, $9, $10, $11) \
        ON CONFLICT (subscriber_id, event_id) DO NOTHING";
    /// The job of key (`$1`, `$2`) with its own payload and its shared payload's id.
    const FIND: &'static str = "SELECT j.id, j.subscriber_id, j.event_id, j.state, j.attempts, \
        j.max_attempts, j.deliver_at, j.deadline, j.due_at, j.created_at, j.updated_at, \
        j.delivered_at, j.dead_at, j.dead_reason, j.dead_detail, j.last_error_class, j.last_error_status, \
        j.last_error_reason, j.last_error_body, j.lease_owner, j.lease_token, \
        j.lease_expires_at, s.enabled AS subscriber_enabled, j.event_type, j.schedule_id, \
        j.payload, j.payload_id \
        FROM jobs j JOIN subscribers s ON s.id = j.subscriber_id \
        WHERE j.subscriber_id = $1 AND j.event_id = $2";

    async fn write_lone(&self, jobs: &[&NewJob]) -> Option<Result<LoneWritten, StoreError>> {
        let run = async {
            let (sql, arguments) = binds::bound(Query::from(lone_statement(jobs)))?;
            let rows: Vec<(String, Option<String>, Option<bool>)> =
                sqlx::query_as_with(sql, arguments).fetch_all(self).await?;
            let mut written = LoneWritten::default();
            for (kind, id, enabled) in rows {
                match (kind.as_str(), id) {
                    ("known", Some(id)) => {
                        written.known.insert(id, enabled.unwrap_or(true));
                    }
                    ("inserted", Some(id)) => {
                        written.inserted.insert(id);
                    }
                    _ => {}
                }
            }
            Ok(written)
        };
        Some(run.await)
    }

    async fn known_subscribers(tx: &mut Tx, ids: &[&str]) -> Result<KnownSubscribers, StoreError> {
        // PostgreSQL would plan KNOWN_SUBSCRIBERS anew on every run (a custom plan for
        // its array looks cheaper than the generic one): 0.09 ms of planning for 0.02
        // ms of execution. The generic plan is the same primary-key lookup.
        sqlx::raw_sql("SET LOCAL plan_cache_mode = force_generic_plan")
            .execute(&mut **tx)
            .await?;
        let known: Vec<(String, bool)> = sqlx::query_as(KNOWN_SUBSCRIBERS)
            .bind(ids)
            .fetch_all(&mut **tx)
            .await?;
        Ok(known.into_iter().collect())
    }
}

/// The one statement of [`CreateStatements::write_lone`] for `jobs` (key order): holds
/// the subscribers they name `FOR KEY SHARE` in id order (as [`KNOWN_SUBSCRIBERS`]),
/// inserts, in key order, the jobs of those that exist unless their key does
/// (`ON CONFLICT DO NOTHING`), and notifies [`JOBS_CHANNEL`] when it inserted one.
/// Rows: `('known', id, enabled)` per subscriber held, `('inserted', id, NULL)` per job
/// inserted, and `('notified', NULL, NULL)` when it notified. Its placeholders are one
/// per value (no arrays), so PostgreSQL keeps a generic plan for each shape without a
/// `SET LOCAL` (an array made it plan anew on every run, step 3 of issue #18); a
/// statement outside a transaction commits on its own, so the whole create is one
/// round trip.
fn lone_statement(jobs: &[&NewJob]) -> Statement {
    let subscribers: BTreeSet<&str> = jobs.iter().map(|j| j.subscriber_id.as_str()).collect();
    let mut query = Statement::new(
        Dialect::Postgres,
        "WITH known AS MATERIALIZED (SELECT id, enabled FROM subscribers WHERE id IN (",
    );
    for (index, id) in subscribers.iter().enumerate() {
        query.push(if index == 0 { "" } else { ", " });
        query.bind(Value::Text((*id).to_owned()));
    }
    query.push(
        ") AND deleted_at IS NULL ORDER BY id FOR KEY SHARE), \
         inserted AS (INSERT INTO jobs (id, subscriber_id, event_id, payload, payload_id, \
           state, max_attempts, deliver_at, deadline, due_at, created_at, updated_at, \
           event_type, schedule_id) \
         SELECT v.* FROM (VALUES ",
    );
    let rows: Vec<JobInsert<'_>> = jobs
        .iter()
        .map(|job| JobInsert {
            job,
            payload_id: None,
        })
        .collect();
    push_rows(&mut query, &rows);
    query.push(
        ") AS v(id, subscriber_id, event_id, payload, payload_id, state, max_attempts, \
           deliver_at, deadline, due_at, created_at, updated_at, event_type, schedule_id) \
         WHERE v.subscriber_id IN (SELECT id FROM known) \
         ORDER BY v.subscriber_id COLLATE \"C\", v.event_id COLLATE \"C\" \
         ON CONFLICT (subscriber_id, event_id) DO NOTHING RETURNING id) \
       SELECT 'known' AS kind, id::text AS id, enabled FROM known \
       UNION ALL SELECT 'inserted', id::text, NULL FROM inserted \
       UNION ALL SELECT 'notified', NULL, NULL \
         FROM (SELECT pg_notify(",
    );
    query
        .bind(Value::Text(JOBS_CHANNEL.to_owned()))
        .push(", '')) n WHERE EXISTS (SELECT 1 FROM inserted)");
    query
}
