//! PostgreSQL plans a prepared statement once and keeps that generic plan until the
//! next `ANALYZE`. Made while `jobs` and `attempts` were small (a new deployment, or a
//! server without autovacuum), the outcome group's plan scanned both tables whole and
//! kept doing so as they grew: 4.4 ms per group at 24,000 jobs, where index reads
//! take 0.2 ms (issue #18). Under its settings the statement must never scan them
//! whole, whatever the statistics say. (On tables never analysed the planner may still
//! read `jobs` through a partial index of the jobs in flight or pending rather than
//! the primary key: bounded by the work outstanding, not by the table.)

use deferhook::store::postgres::outcomes::{INDEX_READS, RECORD};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// One outcome of the batch shape `crate::store::outcomes::to_json` writes.
const BATCH: &str = r#"[{"id":"j1","token":1,"number":1,"finished_at":5,"outcome":"delivered","status":200,"error_class":null,"reason":null,"body_excerpt":null,"state":"delivered","due_at":null,"attempts":1,"dead_reason":null,"deadline":9,"possible_duplicate":false,"resent":false,"now":5}]"#;

/// The generic plan of [`RECORD`] on an empty, never analysed database, after
/// `settings`: the scans it names.
async fn generic_plan(url: &str, settings: Option<&str>) -> Vec<String> {
    let mut db = PgConnection::connect(url).await.expect("connect");
    sqlx::raw_sql("BEGIN; SET LOCAL plan_cache_mode = force_generic_plan")
        .execute(&mut db)
        .await
        .expect("begin");
    if let Some(settings) = settings {
        sqlx::raw_sql(sqlx::AssertSqlSafe(settings))
            .execute(&mut db)
            .await
            .expect("settings");
    }
    let prepare = format!("PREPARE record(text) AS {RECORD}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
        .execute(&mut db)
        .await
        .expect("prepare");
    let explain = format!("EXPLAIN (COSTS OFF) EXECUTE record('{BATCH}')");
    let rows: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(explain))
        .fetch_all(&mut db)
        .await
        .expect("explain");
    rows.into_iter()
        .map(|(line,)| line.trim().trim_start_matches("->").trim().to_owned())
        .filter(|line| line.contains(" on "))
        .collect()
}

#[tokio::test]
async fn an_outcome_group_never_scans_jobs_or_attempts_whole() {
    let Some(database) = crate::pg::TestDatabase::create().await else {
        return;
    };
    deferhook::store::open(&database.url)
        .await
        .expect("migrate");
    let whole = |plan: &[String]| -> Vec<String> {
        plan.iter()
            .filter(|line| {
                line.starts_with("Seq Scan on jobs") || line.starts_with("Seq Scan on attempts")
            })
            .cloned()
            .collect()
    };
    let unset = generic_plan(&database.url, None).await;
    assert!(
        !whole(&unset).is_empty(),
        "without its settings the generic plan scans a table whole (else this test \
         proves nothing): {unset:#?}"
    );
    let plan = generic_plan(&database.url, Some(INDEX_READS)).await;
    assert_eq!(
        whole(&plan),
        Vec::<String>::new(),
        "jobs and attempts never scanned whole: {plan:#?}"
    );
    assert!(
        plan.iter()
            .any(|line| line.starts_with("Index Scan using attempts_pkey")),
        "the attempts finished are found by primary key: {plan:#?}"
    );
}
