//! A PostgreSQL restart while jobs are in flight loses nothing: `/readyz` answers 503
//! while the server is down and 200 after, the instance reconnects by itself, and
//! outcomes recorded during the outage are stored once it is back.
//!
//! The test runs a private, throwaway cluster of the installed PostgreSQL server (so
//! stopping it disturbs nobody). Without the server binaries it is skipped with one
//! line, except under `CI=true`.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::Connection;

use crate::receiver::{Receiver, Reply};

struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

fn as_postgres(program: PathBuf) -> Command {
    // initdb refuses to run as root: run the server tools as `postgres` then.
    if nix_is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Cluster {
    fn create() -> Option<Cluster> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
            .filter(|bin| bin.join("initdb").exists())
            .max()?;
        let dir = tempfile::tempdir().ok()?;
        if nix_is_root() {
            let owned = Command::new("chown")
                .arg("postgres")
                .arg(dir.path())
                .status()
                .is_ok_and(|s| s.success());
            if !owned {
                return None;
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let initialised = as_postgres(bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(dir.path().join("data"))
            .output()
            .is_ok_and(|o| o.status.success());
        if !initialised {
            return None;
        }
        let cluster = Cluster { bin, dir, port };
        cluster.start();
        Some(cluster)
    }

    fn pg_ctl(&self, args: &[&str]) {
        let status = as_postgres(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(args)
            .output()
            .expect("pg_ctl runs");
        assert!(status.status.success(), "pg_ctl {args:?}: {status:?}");
    }

    fn start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        self.pg_ctl(&["-w", "-o", &options, "start"]);
    }

    fn stop(&self) {
        self.pg_ctl(&["-w", "-m", "fast", "stop"]);
    }

    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = as_postgres(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

async fn status(client: &reqwest::Client, url: String) -> u16 {
    match client.get(url).send().await {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_mid_delivery_loses_nothing() {
    let Some(cluster) = Cluster::create() else {
        let message = "no PostgreSQL server binaries to run a private cluster";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{message}");
        }
        let _ = writeln!(
            std::io::stderr(),
            "skipping the PostgreSQL restart test: {message}"
        );
        return;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut admin = sqlx::PgConnection::connect(&cluster.url("postgres"))
        .await
        .unwrap();
    sqlx::query("CREATE DATABASE dh")
        .execute(&mut admin)
        .await
        .unwrap();
    drop(admin);
    let receiver =
        Receiver::start(vec![Reply::status(200).after(Duration::from_millis(400))]).await;
    let process = crate::process::spawn(
        &cluster.url("dh"),
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

    cluster.stop();
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
    cluster.start();

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
