//! A subscriber's figures and the retention purge, written once for both backends:
//! [`maintenance_statements!`] expands them for one sqlx database. Each backend keeps
//! its own SQL (`STATE_COUNTS`, `ELIGIBLE_AND_SUCCESS`, `LAST_FAILURE`, `PURGE`,
//! `SUBSCRIBER_EXISTS` in the invoking module: SQLite names its partial indexes,
//! PostgreSQL locks the purge batch) and opens the transaction these run in.

/// Expands, in a module `statements`, `stats(conn, id, now)` and
/// `purge(conn, finished_before, dead_before, limit)` for database `$db`, over the SQL
/// constants of the invoking module.
macro_rules! maintenance_statements {
    ($db:ty) => {
        mod statements {
            use $crate::domain::Timestamp;
            use $crate::store::StoreError;
            use $crate::store::records::{PurgedJobs, SubscriberStats};
            use $crate::store::rows::{self, Columns};

            use super::{
                ELIGIBLE_AND_SUCCESS, LAST_FAILURE, PURGE, STATE_COUNTS, SUBSCRIBER_EXISTS,
            };

            /// The figures of subscriber `id` at `now`, or `None` when it does not exist;
            /// run in one snapshot (the caller's read transaction).
            pub async fn stats(
                conn: &mut <$db as sqlx::Database>::Connection,
                id: &str,
                now: Timestamp,
            ) -> Result<Option<SubscriberStats>, StoreError> {
                let known = sqlx::query::<$db>(SUBSCRIBER_EXISTS)
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await?;
                if known.is_none() {
                    return Ok(None);
                }
                let mut stats = SubscriberStats::default();
                for row in sqlx::query::<$db>(STATE_COUNTS)
                    .bind(id)
                    .fetch_all(&mut *conn)
                    .await?
                {
                    rows::add_state_count(&mut stats.jobs, &row)?;
                }
                let row = sqlx::query::<$db>(ELIGIBLE_AND_SUCCESS)
                    .bind(id)
                    .bind(now.as_millis())
                    .fetch_one(&mut *conn)
                    .await?;
                stats.oldest_eligible_since =
                    row.opt_int("oldest_eligible")?.map(Timestamp::from_millis);
                stats.last_success_at = row.opt_int("last_success")?.map(Timestamp::from_millis);
                stats.last_failure = sqlx::query::<$db>(LAST_FAILURE)
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await?
                    .map(|row| rows::attempt_failure(&row))
                    .transpose()?;
                Ok(Some(stats))
            }

            /// Deletes up to `limit` finished jobs in the caller's transaction: delivered
            /// and cancelled ones before `finished_before`, then dead ones before
            /// `dead_before`. Attempts and replay entries go with them (foreign keys
            /// cascade).
            pub async fn purge(
                conn: &mut <$db as sqlx::Database>::Connection,
                finished_before: Option<Timestamp>,
                dead_before: Option<Timestamp>,
                limit: u32,
            ) -> Result<PurgedJobs, StoreError> {
                let mut purged = PurgedJobs::default();
                for (state, before) in rows::purge_order(finished_before, dead_before) {
                    let left = u64::from(limit).saturating_sub(purged.total());
                    let Some(before) = before.filter(|_| left > 0) else {
                        continue;
                    };
                    for row in sqlx::query::<$db>(PURGE)
                        .bind(before.as_millis())
                        .bind(i64::try_from(left).unwrap_or(i64::MAX))
                        .bind(state.as_str())
                        .fetch_all(&mut *conn)
                        .await?
                    {
                        rows::count_purged(&mut purged, &row)?;
                    }
                }
                Ok(purged)
            }
        }
    };
}

pub(crate) use maintenance_statements;
