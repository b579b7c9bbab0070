//! A small HTTP client for the operator commands: JSON in and out, the bearer token,
//! and errors an operator can act on (the server's problem details, an unreachable
//! server).

use std::fmt;
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use url::Url;

use super::args::{ClientArgs, Token};

/// The longest one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Most characters of a non-JSON error body that are shown.
const BODY_EXCERPT_CHARS: usize = 200;

/// What an operator command can fail with; each says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No connection could be made (refused, unknown host, timeout while connecting).
    #[error(
        "cannot reach the deferhook server at {server} ({cause}); is it running there? \
         Name another one with --server URL or DEFERHOOK_SERVER"
    )]
    Unreachable {
        /// The base URL that was tried.
        server: String,
        /// The innermost cause, e.g. `Connection refused (os error 111)`.
        cause: String,
    },
    /// The server answered with problem details (RFC 9457).
    #[error("{0}")]
    Problem(ProblemDetails),
    /// The server answered an error without problem details.
    #[error("the server answered {status}{}", excerpt_suffix(.excerpt))]
    Status {
        /// The HTTP status.
        status: StatusCode,
        /// The start of the body, if any.
        excerpt: String,
    },
    /// The request failed after connecting (timeout, connection reset, …).
    #[error("the request to {url} failed: {cause}")]
    Transport {
        /// The request's URL.
        url: String,
        /// What went wrong.
        cause: String,
    },
    /// Standard output was closed by its reader (`… | head`); the command ends quietly.
    #[error("standard output is closed")]
    OutputClosed,
    /// Standard output cannot be written.
    #[error("cannot write to standard output: {0}")]
    Output(std::io::Error),
    /// The answer is not the JSON this command expects.
    #[error("unexpected answer from {url}: {cause}")]
    Unexpected {
        /// The request's URL.
        url: String,
        /// What did not match.
        cause: String,
    },
}

fn excerpt_suffix(excerpt: &str) -> String {
    if excerpt.is_empty() {
        String::new()
    } else {
        format!(": {excerpt}")
    }
}

/// An RFC 9457 problem details body, as the server writes it.
#[derive(Debug, Clone, Deserialize)]
pub struct ProblemDetails {
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What happened in this occurrence.
    #[serde(default)]
    pub detail: Option<String>,
    /// The invalid fields, for validation errors.
    #[serde(default)]
    pub errors: Vec<FieldProblem>,
}

/// One invalid field of a request.
#[derive(Debug, Clone, Deserialize)]
pub struct FieldProblem {
    /// The field's name.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// `Title (status): detail`, then one `  field: message` line per invalid field. The
/// detail is left out when it only repeats the field errors.
impl fmt::Display for ProblemDetails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.title, self.status)?;
        let joined = self
            .errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ");
        match &self.detail {
            Some(detail) if !detail.is_empty() && *detail != joined => write!(f, ": {detail}")?,
            _ => {}
        }
        for error in &self.errors {
            write!(f, "\n  {}: {}", error.field, error.message)?;
        }
        if self.status == 401 {
            // The server reads DEFERHOOK_API_TOKENS; this client, one token, its own.
            write!(
                f,
                "\n  give the token with --token or DEFERHOOK_API_TOKEN (singular: \
                 the server's DEFERHOOK_API_TOKENS is not read by this command)"
            )?;
        }
        Ok(())
    }
}

/// A successful answer of [`ApiClient::call`].
#[derive(Debug)]
pub struct Answer {
    /// Its status (e.g. `201 Created` or `200 OK`).
    pub status: StatusCode,
    /// Its JSON body; `None` when it has none (`204 No Content`).
    pub body: Option<Value>,
}

/// Talks to one server.
#[derive(Debug, Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base: Url,
    token: Option<Token>,
}

impl ApiClient {
    /// A client for the server and token in `args`.
    pub fn new(args: &ClientArgs) -> anyhow::Result<Self> {
        // reqwest is built without a default crypto provider; use ring's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(concat!("deferhook-cli/", env!("CARGO_PKG_VERSION")))
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        Ok(ApiClient {
            http,
            base: args.server.clone(),
            token: args.token().cloned(),
        })
    }

    /// The URL of `segments` under the base URL, each segment percent-encoded.
    pub fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// `GET` a JSON resource.
    pub async fn get(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<Value, CliError> {
        self.send(Method::GET, self.url(segments, query), None)
            .await
    }

    /// `POST` a JSON body (or none) and read the JSON answer.
    pub async fn post(&self, segments: &[&str], body: Option<&Value>) -> Result<Value, CliError> {
        self.send(Method::POST, self.url(segments, &[]), body).await
    }

    /// `PUT` a JSON body and read the JSON answer.
    pub async fn put(&self, segments: &[&str], body: &Value) -> Result<Value, CliError> {
        self.send(Method::PUT, self.url(segments, &[]), Some(body))
            .await
    }

    /// `DELETE` a resource and read the JSON answer.
    pub async fn delete(&self, segments: &[&str]) -> Result<Value, CliError> {
        self.send(Method::DELETE, self.url(segments, &[]), None)
            .await
    }

    /// Sends `body` (JSON text, sent byte for byte) with `method` to `segments` and
    /// answers the status and the JSON body, if any: for the answers whose status
    /// matters (`201` or `200`) or that may have no body (`204`).
    pub async fn call(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<String>,
    ) -> Result<Answer, CliError> {
        let url = self.url(segments, &[]);
        let (status, bytes) = self.exchange(method, &url, body).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Answer { status, body: None });
        }
        let body = serde_json::from_slice(&bytes).map_err(|e| CliError::Unexpected {
            url: url.to_string(),
            cause: format!("not JSON ({e})"),
        })?;
        Ok(Answer {
            status,
            body: Some(body),
        })
    }

    async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<Value, CliError> {
        let (_, bytes) = self
            .exchange(method, &url, body.map(Value::to_string))
            .await?;
        serde_json::from_slice(&bytes).map_err(|e| CliError::Unexpected {
            url: url.to_string(),
            cause: format!("not JSON ({e})"),
        })
    }

    /// One request; a non-2xx answer is its error.
    async fn exchange(
        &self,
        method: Method,
        url: &Url,
        body: Option<String>,
    ) -> Result<(StatusCode, bytes::Bytes), CliError> {
        let mut request = self
            .http
            .request(method, url.clone())
            .header(ACCEPT, "application/json, application/problem+json");
        if let Some(token) = &self.token {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                    CliError::Transport {
                        url: url.to_string(),
                        cause: "the token is not a valid header value".into(),
                    }
                })?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        if let Some(body) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        let response = request.send().await.map_err(|e| self.failed(url, &e))?;
        let status = response.status();
        let is_problem = response
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
        let bytes = response.bytes().await.map_err(|e| self.failed(url, &e))?;
        if !status.is_success() {
            return Err(error_answer(status, is_problem, &bytes));
        }
        Ok((status, bytes))
    }

    fn failed(&self, url: &Url, error: &reqwest::Error) -> CliError {
        let cause = innermost_cause(error);
        if error.is_connect() {
            CliError::Unreachable {
                server: self.base.as_str().trim_end_matches('/').to_owned(),
                cause,
            }
        } else if error.is_timeout() {
            CliError::Transport {
                url: url.to_string(),
                cause: format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()),
            }
        } else {
            CliError::Transport {
                url: url.to_string(),
                cause,
            }
        }
    }
}

/// The error for a non-2xx answer: its problem details when it has them.
fn error_answer(status: StatusCode, is_problem: bool, body: &[u8]) -> CliError {
    if is_problem && let Ok(problem) = serde_json::from_slice::<ProblemDetails>(body) {
        return CliError::Problem(problem);
    }
    let text = String::from_utf8_lossy(body);
    let excerpt: String = text.trim().chars().take(BODY_EXCERPT_CHARS).collect();
    CliError::Status { status, excerpt }
}

/// The last error in the source chain, which names the actual failure (e.g.
/// `Connection refused (os error 111)`) rather than reqwest's wrapper.
fn innermost_cause(error: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// `result`, with a closed standard output counted as success: the reader has what it
/// wanted.
pub fn quiet_when_closed(result: Result<(), CliError>) -> Result<(), CliError> {
    match result {
        Err(CliError::OutputClosed) => Ok(()),
        other => other,
    }
}

/// Decodes a JSON answer into the shape a command renders.
pub fn decode<T: serde::de::DeserializeOwned>(value: &Value, what: &str) -> Result<T, CliError> {
    T::deserialize(value).map_err(|e| CliError::Unexpected {
        url: what.to_owned(),
        cause: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(base: &str) -> ApiClient {
        let _ = rustls::crypto::ring::default_provider().install_default();
        ApiClient {
            http: reqwest::Client::new(),
            base: Url::parse(base).unwrap(),
            token: None,
        }
    }

    #[test]
    fn urls_keep_a_path_prefix_and_encode_segments() {
        let c = client("http://h:1/prefix/");
        assert_eq!(
            c.url(&["v1", "jobs", "a/b c"], &[]).as_str(),
            "http://h:1/prefix/v1/jobs/a%2Fb%20c"
        );
        let c = client("http://h:1");
        assert_eq!(
            c.url(
                &["v1", "jobs"],
                &[("state", "dead".into()), ("event_id", "a&b".into())]
            )
            .as_str(),
            "http://h:1/v1/jobs?state=dead&event_id=a%26b"
        );
    }

    #[test]
    fn a_validation_problem_names_each_field_once() {
        let body = br#"{"type":"about:blank","title":"Unprocessable Entity","status":422,
            "detail":"limit: must be small; state: must be known",
            "errors":[{"field":"limit","message":"must be small"},
                      {"field":"state","message":"must be known"}]}"#;
        let text = error_answer(StatusCode::UNPROCESSABLE_ENTITY, true, body).to_string();
        assert_eq!(
            text,
            "Unprocessable Entity (422)\n  limit: must be small\n  state: must be known"
        );
    }

    #[test]
    fn a_problem_without_fields_shows_its_detail() {
        let body = br#"{"type":"about:blank","title":"Not Found","status":404,"detail":"job x does not exist"}"#;
        let text = error_answer(StatusCode::NOT_FOUND, true, body).to_string();
        assert_eq!(text, "Not Found (404): job x does not exist");
    }

    /// A newcomer who exported the server's `DEFERHOOK_API_TOKENS` is told which
    /// variable this command reads.
    #[test]
    fn an_unauthorized_answer_says_how_to_give_the_token() {
        let body = br#"{"type":"about:blank","title":"Unauthorized","status":401,"detail":"send Authorization: Bearer <token>"}"#;
        let text = error_answer(StatusCode::UNAUTHORIZED, true, body).to_string();
        assert!(
            text.starts_with("Unauthorized (401): send Authorization: Bearer <token>\n"),
            "{text}"
        );
        assert!(
            text.contains("--token or DEFERHOOK_API_TOKEN (singular"),
            "{text}"
        );
    }

    #[test]
    fn a_bare_error_shows_the_status_and_the_start_of_the_body() {
        let body = "<html>bad gateway</html>".repeat(50);
        let text = error_answer(StatusCode::BAD_GATEWAY, false, body.as_bytes()).to_string();
        assert!(
            text.starts_with("the server answered 502 Bad Gateway: <html>"),
            "{text}"
        );
        assert!(text.len() < 300, "{text}");
    }
}
