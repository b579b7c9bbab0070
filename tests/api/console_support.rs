//! A browser's part in the console tests: a client that keeps the console's cookies,
//! follows no redirect (the tests look at each answer), and sends each form with the
//! CSRF token of the last page it read.

use std::collections::HashMap;

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::{DeadReason, JobEvent};
use reqwest::Method;
use reqwest::header::{COOKIE, SET_COOKIE};
use serde_json::json;

use crate::app::answer;
use crate::support::{Reply, TestApp};

/// A console user's browser.
pub struct Browser<'a> {
    app: &'a TestApp,
    client: reqwest::Client,
    /// Cookie name → value, as the server last set them.
    pub cookies: HashMap<String, String>,
    /// The CSRF token of the last page read that had forms.
    pub csrf: Option<String>,
}

/// The value of `<input … name="{name}" value="…">` in `html`.
pub fn field(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')?;
    Some(html[start..start + end].to_owned())
}

impl<'a> Browser<'a> {
    /// A browser with no cookie yet.
    pub fn new(app: &'a TestApp) -> Self {
        Browser {
            app,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: HashMap::new(),
            csrf: None,
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Sends `request` with the cookies; keeps the cookies set and the page's CSRF token.
    pub async fn send(&mut self, request: reqwest::RequestBuilder) -> Reply {
        let request = if self.cookies.is_empty() {
            request
        } else {
            request.header(COOKIE, self.cookie_header())
        };
        let response = request.send().await.expect("request failed");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        for set in headers.get_all(SET_COOKIE) {
            let text = set.to_str().unwrap();
            let (pair, _) = text.split_once(';').unwrap_or((text, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if text.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        let text = response.text().await.expect("read body");
        if let Some(csrf) = field(&text, "csrf") {
            self.csrf = Some(csrf);
        }
        Reply {
            status,
            headers,
            text,
        }
    }

    /// GETs `path`.
    pub async fn get(&mut self, path: &str) -> Reply {
        let request = self.client.get(self.app.url(path));
        self.send(request).await
    }

    /// GETs `path` and expects a 200 page.
    pub async fn page(&mut self, path: &str) -> String {
        let reply = self.get(path).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
        assert!(
            reply
                .header("content-type")
                .is_some_and(|t| t.starts_with("text/html")),
            "{path}: {:?}",
            reply.headers
        );
        reply.text
    }

    /// POSTs the form `fields` to `path`, with the CSRF token of the last page read.
    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Reply {
        let csrf = self.csrf.clone().expect("read a page with a form first");
        let mut all: Vec<(&str, &str)> = vec![("csrf", csrf.as_str())];
        all.extend_from_slice(fields);
        self.post_exactly(path, &all, &[]).await
    }

    /// POSTs exactly `fields` (no CSRF token added) with extra `headers`.
    pub async fn post_exactly(
        &mut self,
        path: &str,
        fields: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Reply {
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let mut request = self
            .client
            .request(Method::POST, self.app.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request).await
    }

    /// GETs the login form at `form` (`/console/login?next=…`), then posts it with
    /// `token` and extra `headers`; returns the answer to the post.
    pub async fn login_with(&mut self, form: &str, token: &str, headers: &[(&str, &str)]) -> Reply {
        let page = self.page(form).await;
        let nonce = field(&page, "nonce").expect("a nonce");
        let next = field(&page, "next").expect("next");
        self.post_exactly(
            "/console/login",
            &[("nonce", &nonce), ("next", &next), ("token", token)],
            headers,
        )
        .await
    }

    /// Logs in with `token` through the login form; returns the form's answer.
    pub async fn login(&mut self, token: &str) -> Reply {
        self.login_with("/console/login?next=/console/subscribers", token, &[])
            .await
    }
}

/// The `Set-Cookie` line of `reply` that sets cookie `name`.
pub fn set_cookie_line(reply: &Reply, name: &str) -> String {
    reply
        .headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie: {:?}", reply.headers))
}

/// Asserts a redirect (303) to `location`.
pub fn expect_redirect(reply: &Reply, location: &str) {
    assert_eq!(reply.status, 303, "{}", reply.text);
    assert_eq!(
        reply.header("location"),
        Some(location),
        "{:?}",
        reply.headers
    );
}

/// Creates a job of `subscriber` for `event`, due now, claims it and ends its attempt
/// as a receiver would: a 400 (`dead`: the job is a dead letter) or a 503 answering
/// `body` (the job is retried in 10 minutes); returns the job's id.
pub async fn attempted(
    app: &TestApp,
    subscriber: &str,
    event: &str,
    dead: bool,
    body: Option<&str>,
) -> String {
    let job = app.job(subscriber, event, json!({})).await;
    let claimed = app.claim().await;
    let (event, mut result) = if dead {
        let reason = DeadReason::NonRetryableResponse;
        let result = answer(
            AttemptOutcome::Terminal,
            Some(400),
            Some(ErrorClass::Http4xx),
        );
        (JobEvent::TerminalFailure { reason }, result)
    } else {
        let retry_at = app.now().plus_ms(600_000);
        let result = answer(
            AttemptOutcome::Retryable,
            Some(503),
            Some(ErrorClass::Http5xx),
        );
        (JobEvent::RetryableFailure { retry_at }, result)
    };
    result.body_excerpt = body.map(str::to_owned);
    app.record(&claimed[0], event, result).await;
    job["id"].as_str().unwrap().to_owned()
}
