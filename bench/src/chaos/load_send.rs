//! Sending one prepared operation and recording its answer as a [`Op`]: the
//! status and whether it carried `Retry-After`, the ids a 2xx answer names, or why no
//! answer came.

use std::time::Duration;

use reqwest::header;
use serde_json::Value;
use uuid::Uuid;

use super::super::clock::now_ms;
use super::super::load::request;
use super::history::{Op, OpKind, OpOutcome};
use super::load_ops::Prepared;

/// A request's whole time, from sending to the last byte of the answer: a stopped
/// instance holds it open.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The producer's client: keep-alive, [`REQUEST_TIMEOUT`] per request.
pub fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(REQUEST_TIMEOUT)
        .build()?)
}

/// Sends `op` to instance `instance` at `base` and records it; never fails (a failure
/// is the op's [`OpOutcome::NoAnswer`]).
pub async fn send(client: &reqwest::Client, instance: usize, base: &str, op: Prepared) -> Op {
    let Prepared {
        method,
        path,
        body,
        mut kind,
    } = op;
    let sent_ms = now_ms();
    let outcome = match request(client, base, method, &path, body.as_ref()) {
        Ok(request) => answer(request, &mut kind).await,
        Err(error) => OpOutcome::NoAnswer {
            error: format!("{error:#}"),
        },
    };
    Op {
        kind,
        instance,
        sent_ms,
        answered_ms: now_ms(),
        outcome,
    }
}

/// The answer's outcome; a 2xx answer's ids go into `kind`.
async fn answer(request: reqwest::RequestBuilder, kind: &mut OpKind) -> OpOutcome {
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return no_answer(&error),
    };
    let status = response.status();
    let retry_after = response.headers().contains_key(header::RETRY_AFTER);
    // The status is the answer even if its body is cut off: the ids then stay unknown.
    if status.is_success()
        && let Ok(bytes) = response.bytes().await
        && let Ok(json) = serde_json::from_slice::<Value>(&bytes)
    {
        record_ids(kind, &json);
    }
    OpOutcome::Status {
        status: status.as_u16(),
        retry_after,
    }
}

/// Why no answer came: the error with its causes (refused, reset, timed out).
fn no_answer(error: &reqwest::Error) -> OpOutcome {
    let mut text = if error.is_timeout() {
        format!("timed out: {error}")
    } else {
        error.to_string()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    OpOutcome::NoAnswer { error: text }
}

/// Fills the ids a 2xx answer names: a job's `id`, a fan-out's `items[*].id` (in
/// order), a replay's `id`.
pub fn record_ids(kind: &mut OpKind, answer: &Value) {
    let id = |value: &Value| value["id"].as_str().and_then(|s| Uuid::parse_str(s).ok());
    match kind {
        OpKind::Create { job_id, .. } => *job_id = id(answer),
        OpKind::FanOut { job_ids, .. } => {
            *job_ids = answer["items"]
                .as_array()
                .map(|items| items.iter().filter_map(id).collect())
                .unwrap_or_default();
        }
        OpKind::Replay { replay_id, .. } => *replay_id = id(answer),
        OpKind::Cancel { .. } | OpKind::Reschedule { .. } | OpKind::Resume { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ids_come_from_the_answers() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let mut fan_out = OpKind::FanOut {
            event_id: "e".into(),
            subscribers: vec!["x".into(), "y".into()],
            deliver_at_ms: None,
            deadline_ms: 0,
            job_ids: Vec::new(),
        };
        record_ids(
            &mut fan_out,
            &json!({"items": [{"id": a.to_string()}, {"id": b.to_string()}]}),
        );
        assert!(matches!(fan_out, OpKind::FanOut { job_ids, .. } if job_ids == vec![a, b]));
        let mut replay = OpKind::Replay {
            subscribers: vec![],
            replay_id: None,
        };
        record_ids(&mut replay, &json!({"id": a.to_string(), "state": "done"}));
        assert!(matches!(replay, OpKind::Replay { replay_id: Some(id), .. } if id == a));
    }
}
