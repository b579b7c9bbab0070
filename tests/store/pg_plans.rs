//! PostgreSQL keeps a prepared statement's generic plan until `ANALYZE` (or DDL)
//! invalidates it. Made while a table was small and never analysed (a new deployment,
//! or a server without autovacuum), a plan that joins a batch to the table scans it
//! whole, and keeps doing so as it grows: an outcome group read all of `attempts`
//! (11,569 rows for a group of 99, issue #18). The outcome group reaches its attempt
//! rows by primary-key probes in such a plan. The claim, the next wake-up and the
//! figures count open requests on the index of what they count (issue #33's incident:
//! a claim counted each subscriber's on the destination's index) and find a
//! destination's due work from its subscribers.

use deferhook::store::postgres::outcomes::APPLY_TRANSITIONS;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The statement as it was: the batch joined to `attempts`.
const JOINED: &str = "SELECT a.job_id FROM attempts a JOIN json_to_recordset($1::json) \
    AS h(id text, number bigint, token bigint) ON a.job_id = h.id AND a.number = h.number \
    AND a.lease_token = h.token ORDER BY a.job_id, a.number FOR NO KEY UPDATE OF a";

/// The nodes of `statement`'s generic plan (one text parameter) on the database at
/// `url`.
async fn generic_plan(url: &str, statement: &str) -> Vec<String> {
    generic_plan_of(url, "text", statement).await
}

/// A new database with deferhook's schema and nothing in it (never analysed), or
/// `None` without PostgreSQL.
async fn new_database() -> Option<crate::pg::TestDatabase> {
    let database = crate::pg::TestDatabase::create().await?;
    deferhook::store::open(&database.url)
        .await
        .expect("migrate");
    Some(database)
}

#[tokio::test]
async fn an_outcome_group_finds_its_attempts_by_primary_key_on_a_new_database() {
    let Some(database) = new_database().await else {
        return;
    };
    let joined = generic_plan(&database.url, JOINED).await;
    assert!(
        joined.iter().any(|l| l.starts_with("Seq Scan on attempts")),
        "joined, the generic plan scans attempts whole (else this test proves nothing): \
         {joined:#?}"
    );
    let plan = generic_plan_of(&database.url, "text, text", APPLY_TRANSITIONS).await;
    for table in ["attempts", "jobs", "endpoint_circuits", "destinations"] {
        assert!(
            !plan
                .iter()
                .any(|l| l.starts_with(&format!("Seq Scan on {table}"))),
            "{table} never scanned whole: {plan:#?}"
        );
    }
    let probes = |index: &str| {
        plan.iter()
            .filter(|l| l.starts_with(&format!("Index Scan using {index} on ")))
            .count()
    };
    assert_eq!(
        probes("attempts_pkey"),
        2,
        "attempts held, then updated, by primary key: {plan:#?}"
    );
    assert_eq!(
        probes("jobs_pkey"),
        3,
        "jobs held, updated, and their destinations read by primary key (no index of live \
         jobs): {plan:#?}"
    );
    let reads_of_jobs = plan.iter().filter(|l| l.contains(" on jobs")).count();
    assert_eq!(reads_of_jobs, 4, "the update and three probes: {plan:#?}");
    assert_eq!(
        probes("endpoint_circuits_pkey"),
        1,
        "endpoint circuits held by primary key: {plan:#?}"
    );
    assert_eq!(
        probes("destinations_pkey"),
        1,
        "the jobs' destinations read by primary key: {plan:#?}"
    );
}

/// The nodes of `statement`'s generic plan, prepared with parameter `types` (a comma
/// list, e.g. `bigint, text[]`), on the database at `url`.
async fn generic_plan_of(url: &str, types: &str, statement: &str) -> Vec<String> {
    let mut db = PgConnection::connect(url).await.expect("connect");
    sqlx::raw_sql("SET plan_cache_mode = force_generic_plan")
        .execute(&mut db)
        .await
        .expect("set");
    let prepare = if types.is_empty() {
        format!("PREPARE plan_of AS {statement}")
    } else {
        format!("PREPARE plan_of({types}) AS {statement}")
    };
    sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
        .execute(&mut db)
        .await
        .unwrap_or_else(|e| panic!("prepare {statement}: {e}"));
    let values: Vec<&str> = types
        .split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|t| match t.trim() {
            "bigint" => "0",
            "text" => "'a'",
            "text[]" => "'{a}'",
            "bigint[]" => "'{1}'",
            "jsonb" | "json" => "'[]'",
            "boolean" => "false",
            "integer" => "0",
            other => panic!("no sample value of type {other}"),
        })
        .collect();
    let explain = if values.is_empty() {
        "EXPLAIN (COSTS OFF) EXECUTE plan_of".to_owned()
    } else {
        format!("EXPLAIN (COSTS OFF) EXECUTE plan_of({})", values.join(", "))
    };
    let rows: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(explain))
        .fetch_all(&mut db)
        .await
        .expect("explain");
    rows.into_iter()
        .map(|(line,)| line.trim().trim_start_matches("->").trim().to_owned())
        .collect()
}

/// The parameter types PostgreSQL infers for `statement` (a comma list for
/// [`generic_plan_of`]).
async fn inferred_types(url: &str, statement: &str) -> String {
    let mut db = PgConnection::connect(url).await.expect("connect");
    let prepare = format!("PREPARE typed_by_use AS {statement}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
        .execute(&mut db)
        .await
        .unwrap_or_else(|e| panic!("prepare {statement}: {e}"));
    sqlx::query_scalar(
        "SELECT array_to_string(parameter_types::text[], ', ') FROM pg_prepared_statements \
         WHERE name = 'typed_by_use'",
    )
    .fetch_one(&mut db)
    .await
    .expect("types")
}

/// Each read of `index` in `plan`, with the condition it reads the index by (empty when
/// it reads the index whole).
fn reads_of<'a>(plan: &'a [String], index: &str) -> Vec<&'a str> {
    let using = format!(" using {index} on ");
    plan.iter()
        .enumerate()
        .filter(|(_, line)| line.contains(&using))
        .map(|(at, _)| {
            plan[at + 1..]
                .iter()
                .take_while(|l| !l.contains(" on ") && !l.starts_with("SubPlan"))
                .find_map(|l| l.strip_prefix("Index Cond: "))
                .unwrap_or("")
        })
        .collect()
}

/// Whether every read of `index` in `plan` goes by its leading `column` (`"name = "`).
fn all_by(plan: &[String], index: &str, column: &str) -> bool {
    reads_of(plan, index)
        .iter()
        .all(|condition| condition.trim_start_matches('(').starts_with(column))
}

/// On a new database every in-flight index costs the planner the same and it takes the
/// newest that applies: before migration 0018 the claim counted each subscriber's open
/// requests on `jobs_in_flight_destination` by its second column, reading every open
/// request once per subscriber (100–190 ms a claim in issue #33's incident), and kept
/// that plan for the connection's life. Each count now has an index only it can use.
#[tokio::test]
async fn open_requests_are_counted_on_the_index_of_what_they_count() {
    let Some(database) = new_database().await else {
        return;
    };
    for (name, types, statement) in deferhook::store::postgres::PINNED_READS {
        let plan = generic_plan_of(&database.url, types, statement).await;
        assert!(
            all_by(&plan, "jobs_in_flight_destination", "destination = "),
            "{name}: a destination's index is read by destination: {plan:#?}"
        );
        // The gauges read every pending job (the oldest, those past the objective).
        let hot = name.starts_with("claim") || name.starts_with("next wake-up");
        assert!(
            !hot || all_by(&plan, "jobs_subscriber_due", "subscriber_id = "),
            "{name}: the due jobs are read per subscriber: {plan:#?}"
        );
        // Elsewhere a read of every in-flight row goes by `due_at` on it: as many rows
        // as requests are open.
        assert!(
            !name.starts_with("claim")
                || all_by(&plan, "jobs_in_flight_subscriber", "subscriber_id = "),
            "{name}: a subscriber's count reads its own entries: {plan:#?}"
        );
        if name.contains("due destinations") {
            // The claim's hold also asks, by one probe, whether a subscriber has no
            // destination yet.
            let expected: &[&str] = if name.starts_with("claim") {
                &["(destination = d.key)", "(destination IS NULL)"]
            } else {
                &["(destination = d.key)"]
            };
            assert_eq!(
                reads_of(&plan, "subscribers_destination"),
                expected,
                "{name}: a destination's subscribers are probed until one has due work: \
                 {plan:#?}"
            );
        }
    }
    let (_, types, lock) = deferhook::store::postgres::PINNED_READS[0];
    let plan = generic_plan_of(&database.url, types, lock).await;
    assert_eq!(
        reads_of(&plan, "jobs_in_flight_subscriber"),
        ["((subscriber_id = c.id) AND (due_at > $1))"],
        "{plan:#?}"
    );

    // The indexes as migration 0006 made them: the claim's count goes astray (else
    // this test proves nothing).
    sqlx::raw_sql(
        "DROP INDEX jobs_in_flight_destination; \
         CREATE INDEX jobs_in_flight_destination ON jobs (destination, due_at) \
         WHERE state = 'in_flight'",
    )
    .execute(&mut PgConnection::connect(&database.url).await.expect("connect"))
    .await
    .expect("old index");
    let plan = generic_plan_of(&database.url, types, lock).await;
    assert_eq!(
        reads_of(&plan, "jobs_in_flight_destination"),
        ["(due_at > $1)"],
        "{plan:#?}"
    );
}

/// A read of an index of `jobs` or `attempts` in a plan: the index and its condition
/// (empty when it reads the index whole).
struct IndexRead {
    index: String,
    condition: String,
}

/// Every read of an index of `jobs` or `attempts` in `plan`.
fn index_reads(plan: &[String]) -> Vec<IndexRead> {
    let mut reads = Vec::new();
    for (at, line) in plan.iter().enumerate() {
        let index = if let Some(rest) = line
            .strip_prefix("Index Scan using ")
            .or_else(|| line.strip_prefix("Index Only Scan using "))
        {
            let (index, table) = rest.split_once(" on ").unwrap_or((rest, ""));
            let table = table.split_whitespace().next().unwrap_or("");
            if table != "jobs" && table != "attempts" {
                continue;
            }
            index.to_owned()
        } else if let Some(index) = line.strip_prefix("Bitmap Index Scan on ") {
            if !index.starts_with("jobs") && !index.starts_with("attempts") {
                continue;
            }
            index.trim().to_owned()
        } else {
            continue;
        };
        let condition = plan[at + 1..]
            .iter()
            .take_while(|l| !l.contains(" on ") && !l.starts_with("SubPlan"))
            .find_map(|l| l.strip_prefix("Index Cond: "))
            .unwrap_or("")
            .to_owned();
        reads.push(IndexRead { index, condition });
    }
    reads
}

/// The leading column of each index of `jobs` and `attempts`.
async fn leading_columns(url: &str) -> std::collections::HashMap<String, String> {
    let mut db = PgConnection::connect(url).await.expect("connect");
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT indexname, indexdef FROM pg_indexes \
         WHERE tablename IN ('jobs', 'attempts')",
    )
    .fetch_all(&mut db)
    .await
    .expect("indexes");
    rows.into_iter()
        .map(|(name, definition)| {
            let columns = definition.split_once('(').map_or("", |(_, rest)| rest);
            let first = columns
                .split([',', ')', ' '])
                .next()
                .unwrap_or("")
                .to_owned();
            (name, first)
        })
        .collect()
}

/// Whether `read` picks out rows by a value of the run: its index's leading column
/// compared with a parameter or a column of another row (a probe, or a range of
/// times from now), or the first entry of it in order (`MIN`, `MAX`). The two in-flight
/// indexes are exempt: every read of one reads at
/// most the requests open, which the limits bound, and a statement that reads every
/// in-flight row reads them by `due_at` (§3.6). A condition on the leading column by
/// a constant (`state = 'in_flight'`), or none on it, reads a set that grows with
/// the table.
fn selective(read: &IndexRead, leading: &std::collections::HashMap<String, String>) -> bool {
    if read.index.starts_with("jobs_in_flight_") {
        return !read.condition.is_empty();
    }
    let Some(column) = leading.get(&read.index) else {
        return false;
    };
    read.condition
        .split(" AND ")
        .map(|clause| clause.trim_start_matches('('))
        .filter(|clause| clause.starts_with(&format!("{column} ")))
        .any(|clause| {
            let value = clause.split_once(' ').map_or("", |(_, rest)| rest);
            // `IS NOT NULL`: a `MIN` or `MAX` read as the first entry in order.
            value.contains('$') || value.contains('.') || value.starts_with("IS NOT NULL")
        })
}

/// The delivery path runs on sessions that plan generically, so each statement's plan is
/// made at its first run, perhaps on an empty database, and kept until `ANALYZE`. None
/// of them may then read `jobs` or `attempts` whole: each would do so on every run as
/// the tables grow.
#[tokio::test]
async fn no_statement_of_the_delivery_path_reads_jobs_or_attempts_whole_on_a_new_database() {
    let Some(database) = new_database().await else {
        return;
    };
    let renew_joined = "SELECT j.id FROM jobs j JOIN UNNEST($1::text[], $2::bigint[]) \
        AS l(id, token) ON j.id = l.id AND j.lease_token = l.token";
    let plan = generic_plan_of(&database.url, "text[], bigint[]", renew_joined).await;
    assert!(
        plan.iter().any(|l| l.starts_with("Seq Scan on jobs")),
        "a batch joined to jobs is a scan in such a plan (else this test proves nothing): \
         {plan:#?}"
    );
    let leading = leading_columns(&database.url).await;
    let by_state = "SELECT j.id FROM jobs j JOIN UNNEST($1::text[], $2::bigint[]) \
        AS l(id, token) ON j.id = l.id AND j.lease_token = l.token \
        WHERE j.state = 'in_flight'";
    let plan = generic_plan_of(&database.url, "text[], bigint[]", by_state).await;
    assert!(
        index_reads(&plan)
            .iter()
            .any(|read| !selective(read, &leading)),
        "the renewal as it was reads every in-flight job by its state (else this test \
         proves nothing): {plan:#?}"
    );
    let mut scans = Vec::new();
    for (name, statement) in deferhook::store::postgres::WORKER_STATEMENTS {
        let types = inferred_types(&database.url, statement).await;
        let plan = generic_plan_of(&database.url, &types, statement).await;
        for table in ["jobs", "attempts"] {
            if plan
                .iter()
                .any(|l| l.starts_with(&format!("Seq Scan on {table}")))
            {
                scans.push(format!("{name} scans {table}: {plan:#?}"));
            }
        }
        for read in index_reads(&plan) {
            if !selective(&read, &leading) {
                scans.push(format!(
                    "{name} reads {} by {:?}, not by its leading column {:?} from a \
                     parameter or another row: {plan:#?}",
                    read.index,
                    read.condition,
                    leading.get(&read.index)
                ));
            }
        }
    }
    assert!(scans.is_empty(), "{}", scans.join("\n"));
}
