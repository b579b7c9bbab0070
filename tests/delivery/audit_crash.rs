//! A server killed between an operator action's commit and its audit entry's
//! settlement (issue #34 part 1; docs/DESIGN.md §5.11), on PostgreSQL: a trigger holds
//! the settlement, the cancel is answered, the process gets SIGKILL. The job is
//! cancelled and its entry is there, listed with no status: the action committed after
//! its entry, so no crash can leave one without the other.

use std::time::Duration;

use deferhook::domain::{Clock, SystemClock};
use serde_json::{Value, json};

use crate::process::spawn;

/// Makes every write to the audit trail after a job is cancelled (the settlement, or
/// an entry written only after its action) wait 60 s.
const STALL_SETTLEMENTS: &str = "
CREATE FUNCTION stall_settlement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM jobs WHERE state = 'cancelled') THEN
        PERFORM pg_sleep(60);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER stall_settlement BEFORE INSERT OR UPDATE ON audit
    FOR EACH ROW EXECUTE FUNCTION stall_settlement();
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_between_an_action_and_its_settlement_leaves_its_entry() {
    let Some(database) = crate::pg::TestDatabase::create().await else {
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let mut first = spawn(&database.url, &[]);
    let base = first.base.clone();
    let put = client
        .put(format!("{base}/v1/subscribers/acme"))
        .json(&json!({ "url": "http://127.0.0.1:9/hooks" }))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let later = SystemClock.now().plus_ms(3_600_000).to_rfc3339();
    let job: Value = client
        .post(format!("{base}/v1/jobs"))
        .json(
            &json!({ "subscriber_id": "acme", "event_id": "evt-crash", "payload": {},
                       "deliver_at": later }),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = job["id"].as_str().unwrap().to_owned();

    let pool = sqlx::PgPool::connect(&database.url).await.unwrap();
    sqlx::raw_sql(STALL_SETTLEMENTS)
        .execute(&pool)
        .await
        .unwrap();
    let cancel = client
        .post(format!("{base}/v1/jobs/{id}/cancel"))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 200);
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    drop(first);
    // The stalled settlement's session goes with its transaction uncommitted.
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::raw_sql("DROP TRIGGER stall_settlement ON audit")
        .execute(&pool)
        .await
        .unwrap();

    let second = spawn(&database.url, &[]);
    let get = |path: String| {
        let client = client.clone();
        async move {
            let reply = client.get(path).send().await.unwrap();
            assert!(reply.status().is_success(), "{}", reply.status());
            reply.json::<Value>().await.unwrap()
        }
    };
    let job = get(format!("{}/v1/jobs/{id}", second.base)).await;
    assert_eq!(job["state"], "cancelled");
    let audit = get(format!("{}/v1/audit?action=job.cancel", second.base)).await;
    let items = audit["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{audit}");
    assert_eq!(items[0]["target"], id);
    assert_eq!(items[0]["status"], Value::Null, "{}", items[0]);
}
