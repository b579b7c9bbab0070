//! [`BlockingApp`]: a [`TestApp`] for a synchronous test.

use std::future::Future;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{AppBuilder, TestApp};

/// A [`TestApp`] served by a runtime of its own while a synchronous test blocks (on
/// a CLI process, say): the same instance, with blocking calls.
pub struct BlockingApp {
    /// `http://127.0.0.1:port`.
    pub base_url: String,
    app: Option<TestApp>,
    runtime: tokio::runtime::Runtime,
}

impl BlockingApp {
    /// Starts what `builder` describes on a runtime of its own (two worker threads).
    pub(super) fn start(builder: AppBuilder) -> BlockingApp {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let app = runtime.block_on(builder.start());
        BlockingApp {
            base_url: app.base_url.clone(),
            app: Some(app),
            runtime,
        }
    }

    /// The instance, for its async calls (run them with [`BlockingApp::block_on`]).
    pub fn app(&self) -> &TestApp {
        self.app.as_ref().expect("running")
    }

    /// Runs `future` to its end on the instance's runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Calls the API; answers the status and the JSON body (`null` when there is none).
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.app().request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let reply = self.block_on(self.app().send(request));
        let json = serde_json::from_str(&reply.text).unwrap_or(Value::Null);
        (reply.status, json)
    }

    /// Registers subscriber `id` receiving at `url`.
    pub fn subscriber(&self, id: &str, url: &str) {
        self.block_on(self.app().subscriber(id, url, None));
    }

    /// Creates a job delivered after `delay_ms`; answers its id.
    pub fn job(&self, subscriber: &str, event: &str, delay_ms: u64) -> String {
        let extra = json!({ "delay_ms": delay_ms });
        let job = self.block_on(self.app().job(subscriber, event, extra));
        job["id"].as_str().unwrap().to_owned()
    }

    /// Polls (bounded: 15 s) until the job `id` is in `state`; answers it.
    pub fn wait_state(&self, id: &str, state: &str) -> Value {
        let job = json!({ "id": id });
        self.block_on(self.app().wait_state(&job, state, Duration::from_secs(15)))
    }
}

impl Drop for BlockingApp {
    fn drop(&mut self) {
        // The server's tasks belong to this runtime: stop them inside it.
        let _inside = self.runtime.enter();
        drop(self.app.take());
    }
}
