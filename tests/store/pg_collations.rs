//! PostgreSQL's keys compare in one collation: every foreign key's column, and every
//! column joined to a key without one (`attempts.subscriber_id`), has the collation of
//! the column it refers to. A comparison of two columns of different collations
//! cannot use the other side's index: before migration 0012, `attempts.job_id` (the
//! database's default collation) joined to `jobs.id` (`COLLATE "C"`) read the whole
//! attempts table on every claim that reclaimed a lease and every event summary.

use sqlx::Connection;

/// The columns that refer to a key, with the collation of each side, where they differ.
const MISMATCHED: &str = "\
    SELECT c.conrelid::regclass::text || '.' || a.attname AS referring, \
           c.confrelid::regclass::text || '.' || af.attname AS referred \
    FROM pg_constraint c \
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] \
    JOIN pg_attribute af ON af.attrelid = c.confrelid AND af.attnum = c.confkey[1] \
    WHERE c.contype = 'f' AND a.attcollation <> af.attcollation \
    UNION ALL \
    SELECT 'attempts.subscriber_id', 'subscribers.id' \
    FROM pg_attribute a, pg_attribute s \
    WHERE a.attrelid = 'attempts'::regclass AND a.attname = 'subscriber_id' \
      AND s.attrelid = 'subscribers'::regclass AND s.attname = 'id' \
      AND a.attcollation <> s.attcollation \
    ORDER BY 1";

#[tokio::test]
async fn every_key_is_compared_in_the_collation_of_the_key_it_refers_to() {
    let Some(database) = crate::pg::TestDatabase::create().await else {
        return;
    };
    // Opening the store applies every migration.
    let _store = deferhook::store::open(&database.url).await.unwrap();
    let mut connection = sqlx::PgConnection::connect(&database.url).await.unwrap();
    let mismatched: Vec<(String, String)> = sqlx::query_as(MISMATCHED)
        .fetch_all(&mut connection)
        .await
        .unwrap();
    assert_eq!(mismatched, Vec::<(String, String)>::new());
    let _ = connection.close().await;
}
