//! A PostgreSQL restart while jobs are in flight loses nothing: `/readyz` answers 503
//! while the server is down and 200 after, the instance reconnects by itself, and
//! outcomes recorded during the outage are stored once it is back.
//!
//! The test runs a private, throwaway cluster of the installed PostgreSQL server (so
//! stopping it disturbs nobody). Without the server binaries it is skipped with one
//! line, except under `CI=true`.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::receiver::{Receiver, Reply};

// The soak's private cluster (issue #17), shared rather than written twice.
#[path = "../../bench/src/chaos/cluster.rs"]
mod cluster;

async fn status(client: &reqwest::Client, url: String) -> u16 {
    match client.get(url).send().await {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_mid_delivery_loses_nothing() {
    let Some(cluster) = cluster::cluster_or_skip("the PostgreSQL restart test") else {
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = cluster.database("dh").await.unwrap();
    let receiver =
        Receiver::start(vec![Reply::status(200).after(Duration::from_millis(400))]).await;
    let process = crate::process::spawn(
        &url,
        &[
            "--lease-ms",
            "8000",
            "--attempt-timeout-ms",
            "3000",
            "--backoff-base-ms",
            "200",
        ],
    );
    let base = process.base.clone();
    let client = reqwest::Client::new();
    let put = client
        .put(format!("{base}/v1/subscribers/s"))
        .json(&json!({ "url": receiver.url("/") }))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let mut ids = Vec::new();
    for n in 0..20 {
        let job: serde_json::Value = client
            .post(format!("{base}/v1/jobs"))
            .json(
                &json!({ "subscriber_id": "s", "event_id": format!("evt-{n}"),
                           "payload": {"n": n}, "delay_ms": n * 150 }),
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        ids.push(job["id"].as_str().unwrap().to_owned());
    }
    receiver.wait_for(1, Duration::from_secs(5)).await;

    cluster.stop().unwrap();
    assert_eq!(status(&client, format!("{base}/readyz")).await, 503);
    assert_eq!(
        status(&client, format!("{base}/v1/jobs/{}", ids[0])).await,
        503
    );
    // PostgreSQL stays down until the attempts open at the stop have their answers,
    // so their outcomes are written while it is unreachable.
    let answered = Instant::now() + Duration::from_secs(5);
    while receiver.open_now() > 0 {
        assert!(Instant::now() < answered, "the receiver never answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.start().unwrap();

    let deadline = Instant::now() + Duration::from_secs(30);
    while status(&client, format!("{base}/readyz")).await != 200 {
        assert!(Instant::now() < deadline, "/readyz never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for id in &ids {
        loop {
            let job: serde_json::Value = client
                .get(format!("{base}/v1/jobs/{id}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if job["state"] == "delivered" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "not delivered after the restart: {job}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let counts = receiver.counts_by_id();
    assert_eq!(counts.len(), 20, "every job reached the receiver");
    assert_eq!(receiver.max_open_per_id(), 1);
    // A job sent twice must have an attempt whose outcome is unknown.
    for (event, n) in counts.iter().filter(|(_, n)| **n > 1) {
        let n_id = event.trim_start_matches("evt-").parse::<usize>().unwrap();
        let attempts: serde_json::Value = client
            .get(format!("{base}/v1/jobs/{}/attempts", ids[n_id]))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let unknown = attempts["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["outcome"] == "unknown");
        assert!(
            unknown,
            "{event} was sent {n} times without an unknown outcome"
        );
    }
}
