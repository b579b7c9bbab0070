//! PostgreSQL keeps a prepared statement's generic plan until `ANALYZE` (or DDL)
//! invalidates it. Made while a table was small and never analysed (a new deployment,
//! or a server without autovacuum), a plan that joins a batch to the table scans it
//! whole, and keeps doing so as it grows: an outcome group read all of `attempts`
//! (11,569 rows for a group of 99, issue #18). The outcome group reaches its attempt
//! rows by primary-key probes in such a plan.

use deferhook::store::postgres::outcomes::FINISH_ATTEMPTS;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// One outcome of the batch shape `crate::store::outcomes::to_json` writes.
const BATCH: &str = r#"[{"id":"j1","token":1,"number":1,"finished_at":5,"outcome":"delivered","status":200,"error_class":null,"reason":null,"body_excerpt":null,"state":"delivered","due_at":null,"attempts":1,"dead_reason":null,"deadline":9,"possible_duplicate":false,"resent":false,"now":5}]"#;

/// The statement as it was: the batch joined to `attempts`.
const JOINED: &str = "SELECT a.job_id FROM attempts a JOIN json_to_recordset($1::json) \
    AS h(id text, number bigint, token bigint) ON a.job_id = h.id AND a.number = h.number \
    AND a.lease_token = h.token ORDER BY a.job_id, a.number FOR NO KEY UPDATE OF a";

/// The nodes of `statement`'s generic plan (one text parameter, given [`BATCH`]) on
/// the database at `url`.
async fn generic_plan(url: &str, statement: &str) -> Vec<String> {
    let mut db = PgConnection::connect(url).await.expect("connect");
    sqlx::raw_sql("SET plan_cache_mode = force_generic_plan")
        .execute(&mut db)
        .await
        .expect("set");
    let prepare = format!("PREPARE plan_of(text) AS {statement}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
        .execute(&mut db)
        .await
        .expect("prepare");
    let explain = format!("EXPLAIN (COSTS OFF) EXECUTE plan_of('{BATCH}')");
    let rows: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(explain))
        .fetch_all(&mut db)
        .await
        .expect("explain");
    rows.into_iter()
        .map(|(line,)| line.trim().trim_start_matches("->").trim().to_owned())
        .collect()
}

#[tokio::test]
async fn an_outcome_group_finds_its_attempts_by_primary_key_on_a_new_database() {
    let Some(database) = crate::pg::TestDatabase::create().await else {
        return;
    };
    deferhook::store::open(&database.url)
        .await
        .expect("migrate");
    let joined = generic_plan(&database.url, JOINED).await;
    assert!(
        joined.iter().any(|l| l.starts_with("Seq Scan on attempts")),
        "joined, the generic plan scans attempts whole (else this test proves nothing): \
         {joined:#?}"
    );
    let plan = generic_plan(&database.url, FINISH_ATTEMPTS).await;
    assert!(
        !plan.iter().any(|l| l.starts_with("Seq Scan on attempts")),
        "attempts never scanned whole: {plan:#?}"
    );
    let probes = plan
        .iter()
        .filter(|l| l.starts_with("Index Scan using attempts_pkey on attempts"))
        .count();
    assert_eq!(probes, 2, "held, then updated, by primary key: {plan:#?}");
}
