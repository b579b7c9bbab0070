//! `drive` and `register` against a stub API on 127.0.0.1:0 (and a closed port).

use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use uuid::Uuid;

use super::super::super::server::TOKEN;
use super::super::history::{OpKind, OpOutcome};
use super::*;

/// Every `SHED`th operation answers 503 with `Retry-After`.
const SHED: u64 = 4;

/// The stub's answers: 201 with an `id` for creates (`items` for fan-outs), 202 for
/// replays, 200 for the rest; 401 without the token; 422 for the subscriber `bad`.
async fn stub(
    State(count): State<Arc<AtomicU64>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let bearer = format!("Bearer {TOKEN}");
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(&bearer)
    {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let path = uri.path();
    if method == Method::PUT {
        let status = if path.ends_with("/bad") {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::CREATED
        };
        return (status, "{}").into_response();
    }
    if count.fetch_add(1, Ordering::Relaxed) % SHED == SHED - 1 {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
        )
            .into_response();
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = || json!({ "id": Uuid::now_v7() });
    let (status, answer) = match (method.as_str(), path) {
        ("POST", "/v1/jobs") => (StatusCode::CREATED, id()),
        ("POST", "/v1/events") => {
            let count = request["subscriber_ids"].as_array().map_or(0, Vec::len);
            let items: Vec<Value> = (0..count).map(|_| id()).collect();
            (StatusCode::CREATED, json!({ "items": items }))
        }
        ("POST", "/v1/replays") => (StatusCode::ACCEPTED, id()),
        _ => (StatusCode::OK, json!({})),
    };
    (status, serde_json::to_vec(&answer).unwrap()).into_response()
}

/// The stub's `http://addr`.
async fn start_stub() -> String {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .fallback(stub)
        .with_state(Arc::new(AtomicU64::new(0)));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// `http://addr` of a port nothing listens on.
async fn closed_port() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

#[tokio::test]
async fn the_load_records_every_kind_and_answer() {
    let (stub, closed) = (start_stub().await, closed_port().await);
    let targets: Targets = Arc::new(move || vec![(0, stub.clone()), (3, closed.clone())]);
    let quick = Mix {
        fan_out: Duration::from_millis(300),
        cancel: Duration::from_millis(150),
        reschedule: Duration::from_millis(150),
        replay: Duration::from_millis(400),
        resume: Duration::from_millis(400),
    };
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        stopper.cancel();
    });
    let subscribers = super::super::plan::subscribers();
    let ops = drive_with(targets, subscribers, 5, 20, quick, stop).await;

    assert!(ops.len() > 40, "{} ops", ops.len());
    assert!(ops.windows(2).all(|w| w[0].sent_ms <= w[1].sent_ms));
    let mut kinds = [0; 6];
    let (mut shed, mut refused) = (0, 0);
    for op in &ops {
        assert!(op.answered_ms >= op.sent_ms);
        let slot = match &op.kind {
            OpKind::Create { .. } => 0,
            OpKind::FanOut { .. } => 1,
            OpKind::Cancel { .. } => 2,
            OpKind::Reschedule { .. } => 3,
            OpKind::Replay { .. } => 4,
            OpKind::Resume { .. } => 5,
        };
        kinds[slot] += 1;
        match (&op.outcome, op.instance) {
            (OpOutcome::NoAnswer { error }, 3) => {
                assert!(!error.is_empty());
                refused += 1;
            }
            (
                OpOutcome::Status {
                    status,
                    retry_after,
                },
                0,
            ) => {
                assert_ne!(*status, 401, "the token");
                assert_eq!(*retry_after, *status == 503);
                shed += usize::from(*status == 503);
            }
            (outcome, instance) => panic!("{outcome:?} from instance {instance}"),
        }
        if !op.acknowledged() {
            continue;
        }
        match &op.kind {
            OpKind::Create { job_id, .. } => assert!(job_id.is_some()),
            OpKind::FanOut {
                subscribers,
                job_ids,
                ..
            } => {
                assert!((3..=14).contains(&subscribers.len()));
                assert_eq!(job_ids.len(), subscribers.len());
            }
            OpKind::Replay {
                replay_id,
                subscribers,
            } => {
                assert!(replay_id.is_some());
                assert_eq!(subscribers.len(), 7, "flaky, closing and hanging");
            }
            OpKind::Resume { subscribers } => assert_eq!(subscribers, &["gone-0"]),
            _ => {}
        }
    }
    assert!(kinds.iter().all(|&n| n > 0), "every kind: {kinds:?}");
    assert!(kinds[0] >= 20, "creates: {kinds:?}");
    assert!(shed > 0 && refused > 0, "{shed} shed, {refused} refused");
    let events: std::collections::HashSet<&String> = ops
        .iter()
        .filter_map(|op| match &op.kind {
            OpKind::Create { event_id, .. } | OpKind::FanOut { event_id, .. } => Some(event_id),
            _ => None,
        })
        .collect();
    assert_eq!(events.len(), kinds[0] + kinds[1], "event ids are unique");
    assert!(events.iter().all(|id| id.starts_with("chaos-5-")));
}

#[tokio::test]
async fn no_live_instance_no_op() {
    let targets: Targets = Arc::new(Vec::new);
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        stopper.cancel();
    });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ops = drive(targets, super::super::plan::subscribers(), 1, 50, stop).await;
    assert!(ops.is_empty());
}

#[tokio::test]
async fn register_names_the_subscriber_it_could_not_put() {
    let stub = start_stub().await;
    let good = vec![("fast-0".to_owned(), "http://127.0.0.1:9/fast-0".to_owned())];
    register(&stub, &good).await.expect("registered");
    let bad = vec![("bad".to_owned(), "http://127.0.0.1:9/bad".to_owned())];
    let error = register(&stub, &bad)
        .await
        .expect_err("refused")
        .to_string();
    assert!(error.contains("bad") && error.contains("422"), "{error}");
}

#[tokio::test]
async fn a_stopped_instance_times_out_without_slowing_the_pace() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Connections complete in the backlog, but nothing ever answers: a SIGSTOPped server.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", silent.local_addr().unwrap());
    let targets: Targets = Arc::new(move || vec![(1, base.clone())]);
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        stopper.cancel();
    });
    let started = std::time::Instant::now();
    let ops = drive(targets, super::super::plan::subscribers(), 2, 20, stop).await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(7_500), "{took:?}");
    assert!(ops.len() >= 12, "the pace held: {} ops", ops.len());
    for op in &ops {
        let OpOutcome::NoAnswer { error } = &op.outcome else {
            panic!("{:?}", op.outcome);
        };
        assert!(error.contains("timed out"), "{error}");
        assert!(op.answered_ms - op.sent_ms >= 4_900, "{op:?}");
    }
    drop(silent);
}
