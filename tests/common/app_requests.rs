//! The HTTP calls of [`TestApp`] the tests share, and what they answer.

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};

use super::TestApp;

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, self.url(path))
    }

    /// Sends and reads the whole response; every response must carry an `x-request-id`
    /// and the server's own id, a UUID, in `x-server-request-id`.
    pub async fn send(&self, request: RequestBuilder) -> Reply {
        let response = request.send().await.expect("request failed");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("read body");
        let reply = Reply {
            status,
            headers,
            text,
        };
        let id = reply.header("x-request-id");
        assert!(
            id.is_some_and(|id| !id.is_empty()),
            "no x-request-id: {reply:?}"
        );
        let server_id = reply.header("x-server-request-id");
        assert!(
            server_id.is_some_and(|id| uuid::Uuid::parse_str(id).is_ok()),
            "no x-server-request-id: {reply:?}"
        );
        reply
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(Method::GET, path)).await
    }

    /// GETs `path`, expects 200 and returns the JSON body.
    pub async fn get_json(&self, path: &str) -> Value {
        let reply = self.get(path).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
        reply.json()
    }

    pub async fn put_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::PUT, path).json(body)).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::POST, path).json(body)).await
    }

    pub async fn patch_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.request(Method::PATCH, path).json(body))
            .await
    }

    /// POSTs `body` as given, with `content-type: application/json`.
    pub async fn post_raw(&self, path: &str, body: impl Into<String>) -> Reply {
        let request = self
            .request(Method::POST, path)
            .header("content-type", "application/json")
            .body(body.into());
        self.send(request).await
    }

    /// Registers subscriber `id` at a public URL; returns the 201 body.
    pub async fn create_subscriber(&self, id: &str) -> Value {
        let url = format!("https://example.com/hooks/{id}");
        self.put_subscriber(id, &json!({ "url": url })).await
    }

    /// Registers subscriber `id` at `url` with `secret` (or a generated one); returns
    /// the secret.
    pub async fn subscriber(&self, id: &str, url: &str, secret: Option<&str>) -> String {
        let mut body = json!({ "url": url });
        if let Some(secret) = secret {
            body["secret"] = json!(secret);
        }
        let created = self.put_subscriber(id, &body).await;
        created["secret"].as_str().unwrap().to_owned()
    }

    /// PUTs subscriber `id` as `body`; expects 201 (created) and returns the body.
    pub async fn put_subscriber(&self, id: &str, body: &Value) -> Value {
        let reply = self.put_json(&format!("/v1/subscribers/{id}"), body).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.json()
    }

    /// POSTs a job; expects 201 and returns the job.
    pub async fn create_job(&self, body: &Value) -> Value {
        self.job_raw(&body.to_string()).await
    }

    /// Creates a job from raw JSON text; expects 201 and returns the job.
    pub async fn job_raw(&self, body: &str) -> Value {
        let reply = self.post_raw("/v1/jobs", body).await;
        assert_eq!(reply.status, 201, "{body}: {}", reply.text);
        reply.json()
    }

    /// Creates a job for `subscriber` and `event` with payload `{"n": 1}`; `extra` adds
    /// fields (`delay_ms`, `ttl_ms`, …). Returns the job.
    pub async fn job(&self, subscriber: &str, event: &str, extra: Value) -> Value {
        self.create_job(&job(subscriber, event, extra)).await
    }

    /// The job as the API shows it now.
    pub async fn job_now(&self, job: &Value) -> Value {
        let id = job["id"].as_str().unwrap();
        self.get_json(&format!("/v1/jobs/{id}")).await
    }

    /// The job's attempts, oldest first.
    pub async fn attempts(&self, job: &Value) -> Vec<Value> {
        let id = job["id"].as_str().unwrap();
        self.get_json(&format!("/v1/jobs/{id}/attempts")).await["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Polls the job until `done` holds, within `within`; returns it.
    pub async fn wait_job(
        &self,
        job: &Value,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let current = self.job_now(job).await;
            if done(&current) {
                return current;
            }
            assert!(
                Instant::now() < deadline,
                "job did not reach the expected state within {within:?}: {current}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls until the job is in `state`.
    pub async fn wait_state(&self, job: &Value, state: &str, within: Duration) -> Value {
        self.wait_job(job, within, |j| j["state"] == state).await
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        let reply = self.get("/metrics").await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.text
    }
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ASCII header"))
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

/// A minimal job body for `subscriber` and `event` with payload `{"n": 1}`, plus `extra`
/// fields.
pub fn job(subscriber: &str, event: &str, extra: Value) -> Value {
    let mut body = json!({
        "subscriber_id": subscriber,
        "event_id": event,
        "payload": {"n": 1},
    });
    let fields = body.as_object_mut().unwrap();
    for (key, value) in extra.as_object().expect("extra is an object") {
        fields.insert(key.clone(), value.clone());
    }
    body
}

/// The value of a counter or gauge line `series` (with its labels) in Prometheus text.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in /metrics"))
}
