//! `../shared/CASES.md` C-19 (issue #34 part 2): PostgreSQL refuses writes for a while
//! (`default_transaction_read_only` set on the database, every session ended so each
//! reconnect is read-only, as a failover does), then accepts them again. Two instances:
//! during the fault producers get 503 with `Retry-After` and `/readyz` fails; after it,
//! with no restart, both accept writes and are ready within 10 s, and every job
//! answered 201, those due during the fault included, is delivered, none left
//! `in_flight`. The same with a 1 ms `statement_timeout` (57014) instead.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

use crate::pg::{TestDatabase, admin_url};
use crate::process::Process;
use crate::receiver::{Receiver, Reply};

async fn admin(sql: String) {
    let mut connection = PgConnection::connect(&admin_url()).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut connection)
        .await
        .unwrap();
    let _ = connection.close().await;
}

async fn post_job(
    client: &reqwest::Client,
    base: &str,
    event: &str,
    delay_ms: u64,
) -> (u16, reqwest::header::HeaderMap) {
    let body =
        json!({"subscriber_id": "s", "event_id": event, "payload": {}, "delay_ms": delay_ms});
    match client
        .post(format!("{base}/v1/jobs"))
        .json(&body)
        .send()
        .await
    {
        Ok(response) => (response.status().as_u16(), response.headers().clone()),
        Err(_) => (0, reqwest::header::HeaderMap::new()),
    }
}

async fn status(client: &reqwest::Client, url: String) -> u16 {
    match client.get(url).send().await {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}

/// Waits until `/readyz` of every instance answers `want`, at most `within`.
async fn wait_ready(client: &reqwest::Client, instances: &[&Process], want: u16, within: Duration) {
    let deadline = Instant::now() + within;
    for process in instances {
        loop {
            let got = status(client, format!("{}/readyz", process.base)).await;
            if got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{}: /readyz answered {got}, not {want}, within {within:?}",
                process.base
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Two instances on a fresh database, subscriber `s` at a receiver answering 200, and
/// `before` jobs due `due_ms` from now accepted through the first instance.
struct Pair {
    _database: TestDatabase,
    name: String,
    receiver: Receiver,
    a: Process,
    b: Process,
    client: reqwest::Client,
    accepted: Vec<String>,
}

async fn start_pair(before: usize, due_ms: u64) -> Option<Pair> {
    let database = TestDatabase::create().await?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let name = database.url.rsplit('/').next().unwrap().to_owned();
    let receiver = Receiver::start(vec![Reply::status(200)]).await;
    let flags = ["--backoff-base-ms", "200"];
    let a = crate::process::spawn(&database.url, &flags);
    let b = crate::process::spawn(&database.url, &flags);
    let client = reqwest::Client::new();
    let put = client
        .put(format!("{}/v1/subscribers/s", a.base))
        .json(&json!({ "url": receiver.url("/") }))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let mut accepted = Vec::new();
    for n in 0..before {
        let event = format!("before-{n}");
        let (status, _) = post_job(&client, &a.base, &event, due_ms).await;
        assert_eq!(status, 201);
        accepted.push(event);
    }
    Some(Pair {
        _database: database,
        name,
        receiver,
        a,
        b,
        client,
        accepted,
    })
}

/// Sets `setting` on the test's database and ends every session, so that each new one
/// takes it (a failover does the same).
async fn fault(pair: &Pair, setting: &str) {
    let name = &pair.name;
    admin(format!("ALTER DATABASE {name} SET {setting}")).await;
    admin(format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    ))
    .await;
}

/// Waits (30 s at most) until every job answered 201 is delivered, and only those
/// exist, each received once or more; reads refused meanwhile are waited out.
async fn every_accepted_job_delivered(pair: &Pair) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = pair
            .client
            .get(format!(
                "{}/v1/jobs?subscriber_id=s&limit=1000",
                pair.a.base
            ))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let listed: Value = response.json().await.unwrap();
        let Some(items) = listed["items"].as_array() else {
            assert!(
                Instant::now() < deadline,
                "reads still refused 30 s after the fault: {status} {listed}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let delivered = items.iter().filter(|j| j["state"] == "delivered").count();
        if delivered == pair.accepted.len() {
            assert_eq!(
                items.len(),
                pair.accepted.len(),
                "only the jobs answered 201: {listed}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{delivered} of {} delivered 30 s after the fault: {listed}",
            pair.accepted.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let counts = pair.receiver.counts_by_id();
    assert_eq!(
        counts.len(),
        pair.accepted.len(),
        "each reached the receiver"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_refuses_writes_then_accepts_them_loses_nothing() {
    let Some(mut pair) = start_pair(20, 4_000).await else {
        return;
    };
    let (client, a, b) = (pair.client.clone(), &pair.a, &pair.b);
    fault(&pair, "default_transaction_read_only = on").await;
    let fault_at = Instant::now();
    wait_ready(&client, &[a, b], 503, Duration::from_secs(10)).await;
    for (n, process) in [a, b].into_iter().enumerate() {
        let (status, headers) = post_job(&client, &process.base, &format!("during-{n}"), 0).await;
        assert_eq!(status, 503, "a write during the fault");
        assert!(headers.contains_key("retry-after"), "{headers:?}");
    }
    // The jobs accepted before come due during the fault.
    let due = Duration::from_millis(4_500);
    if let Some(rest) = due.checked_sub(fault_at.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    admin(format!(
        "ALTER DATABASE {} RESET default_transaction_read_only",
        pair.name
    ))
    .await;

    wait_ready(&client, &[a, b], 200, Duration::from_secs(10)).await;
    let mut after = Vec::new();
    for (n, process) in [a, b].into_iter().enumerate() {
        let event = format!("after-{n}");
        let (status, _) = post_job(&client, &process.base, &event, 0).await;
        assert_eq!(status, 201, "a write after the fault");
        after.push(event);
    }
    pair.accepted.extend(after);
    every_accepted_job_delivered(&pair).await;
}

/// The C-19 variant: a `statement_timeout` of 1 ms on the database for 5 s, every
/// session ended so each reconnect takes it. Producers get 201 or 503 with
/// `Retry-After`, never a 500; after the RESET, with no restart and without ending the
/// sessions opened during the fault (they keep the 1 ms default), both instances accept
/// every write within 10 s, and every job answered 201 is delivered, none left
/// `in_flight`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_statements_are_transient_and_their_sessions_are_replaced() {
    let Some(mut pair) = start_pair(10, 3_000).await else {
        return;
    };
    let client = pair.client.clone();
    fault(&pair, "statement_timeout = '1ms'").await;
    let fault_at = Instant::now();
    let mut accepted = Vec::new();
    let mut refused = 0;
    let mut unready_seen = false;
    let mut n = 0;
    while fault_at.elapsed() < Duration::from_secs(5) {
        for process in [&pair.a, &pair.b] {
            n += 1;
            let event = format!("during-{n}");
            let (status, headers) = post_job(&client, &process.base, &event, 0).await;
            match status {
                201 => accepted.push(event),
                503 => {
                    assert!(headers.contains_key("retry-after"), "{headers:?}");
                    refused += 1;
                    let ready = self::status(&client, format!("{}/readyz", process.base)).await;
                    unready_seen |= ready == 503;
                }
                other => panic!("a write during the fault answered {other}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused > 0, "the 1 ms timeout cancelled no write in 5 s");
    assert!(
        unready_seen,
        "/readyz stayed 200 while writes were cancelled"
    );
    admin(format!(
        "ALTER DATABASE {} RESET statement_timeout",
        pair.name
    ))
    .await;

    // Within 10 s each instance takes every write again.
    let deadline = Instant::now() + Duration::from_secs(10);
    for (i, process) in [&pair.a, &pair.b].into_iter().enumerate() {
        let mut in_a_row = 0;
        let mut n = 0;
        while in_a_row < 5 {
            n += 1;
            let event = format!("after-{i}-{n}");
            let (status, _) = post_job(&client, &process.base, &event, 0).await;
            if status == 201 {
                accepted.push(event);
                in_a_row += 1;
            } else {
                assert_eq!(status, 503, "never a 500");
                in_a_row = 0;
                assert!(
                    Instant::now() < deadline,
                    "{}: writes still refused 10 s after the reset",
                    process.base
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    wait_ready(&client, &[&pair.a, &pair.b], 200, Duration::from_secs(10)).await;
    pair.accepted.extend(accepted);
    every_accepted_job_delivered(&pair).await;
}
