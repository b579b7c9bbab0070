//! The audit's checks on small synthetic runs: a clean run passes, each check fails a
//! run that breaks it, and a SIGSTOP or a PostgreSQL restart excuses what it may.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::super::history::{
    Ending, FaultKind, FaultWindow, History, Ms, Op, OpKind, OpOutcome, ReceiverKind, Request,
};
use super::super::store_view::{Gauges, StoreView, StoredAttempt, StoredJob};
use super::*;

/// When the job is created.
const T: Ms = 1_800_000_000_000;
const ID: Uuid = Uuid::from_u128(1);

fn settings() -> AuditSettings {
    AuditSettings {
        tolerance_ms: 50,
        overlap_ms: 20,
        workers_stopped_ms: T + 60_000,
        claim_slack_ms: 2_000,
        after_stop_ms: 1_000,
        after_db_ms: 2_000,
        quiet_after_fault_ms: 3_000,
        kind_of: |_| Some(ReceiverKind::Fast),
    }
}

fn create(job_id: Option<Uuid>, status: u16) -> Op {
    Op {
        kind: OpKind::Create {
            subscriber: "fast-0".into(),
            event_id: "e1".into(),
            deliver_at_ms: None,
            deadline_ms: T + 10_000,
            max_attempts: None,
            job_id,
        },
        instance: 0,
        sent_ms: T,
        answered_ms: T + 5,
        outcome: OpOutcome::Status {
            status,
            retry_after: false,
        },
    }
}

fn op(kind: OpKind, at: Ms, status: u16) -> Op {
    Op {
        kind,
        instance: 0,
        sent_ms: at,
        answered_ms: at + 5,
        outcome: OpOutcome::Status {
            status,
            retry_after: false,
        },
    }
}

fn request(start: Ms, end: Option<(Ms, Ending)>) -> Request {
    Request {
        subscriber: "fast-0".into(),
        webhook_id: "e1".into(),
        kind: ReceiverKind::Fast,
        started_ms: T + start,
        ended: end.map(|(at, ending)| (T + at, ending)),
    }
}

fn ok(start: Ms) -> Request {
    request(start, Some((start + 2, Ending::Answered(200))))
}

fn attempt(number: u32, outcome: &str, reason: Option<&str>) -> StoredAttempt {
    StoredAttempt {
        number,
        started_at_ms: T + 10,
        finished_at_ms: Some(T + 12),
        outcome: outcome.into(),
        status: (outcome == "delivered").then_some(200),
        error_class: None,
        reason: reason.map(str::to_owned),
        lease_owner: Some("host:1:abcd0123".into()),
        possible_duplicate: false,
    }
}

fn delivered_job() -> StoredJob {
    StoredJob {
        id: ID,
        subscriber_id: "fast-0".into(),
        event_id: "e1".into(),
        state: "delivered".into(),
        attempts: 1,
        max_attempts: None,
        deliver_at_ms: T + 3,
        next_attempt_at_ms: None,
        deadline_ms: T + 10_000,
        delivered_at_ms: Some(T + 12),
        dead_at_ms: None,
        dead_reason: None,
        waiting_reason: None,
        dead_detail: None,
    }
}

/// One job created, delivered by one request: a clean run.
fn clean() -> (History, StoreView) {
    let history = History {
        requests: vec![ok(10)],
        ops: vec![create(Some(ID), 201)],
        faults: Vec::new(),
        load_started_ms: T - 1_000,
        load_ended_ms: T + 1_000,
    };
    let store = StoreView {
        jobs: vec![delivered_job()],
        attempts: HashMap::from([(ID, vec![attempt(1, "delivered", None)])]),
        gauges: vec![Gauges {
            instance: 0,
            jobs: BTreeMap::from([("delivered".into(), 1), ("dead".into(), 0)]),
            dead_jobs: BTreeMap::from([("max_attempts".into(), 0)]),
        }],
        read_at_ms: T + 60_000,
    };
    (history, store)
}

fn checks(history: &History, store: &StoreView) -> Vec<&'static str> {
    let verdict = audit(history, store, &settings());
    let mut checks: Vec<_> = verdict.violations.iter().map(|v| v.check).collect();
    checks.dedup();
    checks
}

fn stop(start: Ms, end: Ms) -> FaultWindow {
    FaultWindow {
        kind: FaultKind::Stop,
        instance: Some(0),
        // The process of the test attempts' `lease_owner` (`host:1:abcd0123`).
        pid: Some(1),
        start_ms: T + start,
        end_ms: T + end,
    }
}

#[test]
fn a_clean_run_passes() {
    let (history, store) = clean();
    let verdict = audit(&history, &store, &settings());
    assert!(verdict.passed(), "{}", verdict.text());
    assert_eq!(verdict.counts.jobs_acknowledged, 1);
    assert_eq!(verdict.counts.accepted, 1);
    assert_eq!(verdict.counts.duplicates, 0);
}

#[test]
fn lost_an_acknowledged_job_missing() {
    let (history, mut store) = clean();
    store.jobs.clear();
    store.gauges.clear();
    assert_eq!(checks(&history, &store), ["lost", "unrecorded"]);
}

#[test]
fn lost_a_2xx_fan_out_that_lists_fewer_jobs() {
    let (mut history, store) = clean();
    history.ops.push(op(
        OpKind::FanOut {
            event_id: "e1".into(),
            subscribers: vec!["fast-0".into(), "fast-1".into()],
            deliver_at_ms: None,
            deadline_ms: T + 10_000,
            job_ids: vec![Uuid::from_u128(2)],
        },
        T,
        201,
    ));
    assert!(checks(&history, &store).contains(&"lost"));
}

#[test]
fn unasked_a_job_nobody_created() {
    let (mut history, store) = clean();
    history.ops.clear();
    assert_eq!(checks(&history, &store), ["unasked"]);
}

#[test]
fn half_written_an_unacknowledged_fan_out() {
    let (mut history, mut store) = clean();
    history.ops = vec![Op {
        kind: OpKind::FanOut {
            event_id: "e1".into(),
            subscribers: vec!["fast-0".into(), "fast-1".into()],
            deliver_at_ms: None,
            deadline_ms: T + 10_000,
            job_ids: Vec::new(),
        },
        outcome: OpOutcome::NoAnswer {
            error: "reset".into(),
        },
        ..create(None, 0)
    }];
    // The instance was killed while it wrote: no answer.
    history.faults.push(FaultWindow {
        kind: FaultKind::Kill,
        ..stop(-1, 10)
    });
    assert_eq!(checks(&history, &store), ["half_written"]);
    // Both written: all or nothing holds.
    let mut other = delivered_job();
    other.id = Uuid::from_u128(2);
    other.subscriber_id = "fast-1".into();
    other.state = "cancelled".into();
    other.attempts = 0;
    store.jobs.push(other);
    store.gauges.clear();
    assert_eq!(
        checks(&history, &store),
        ["unexplained"],
        "no cancel was sent"
    );
}

#[test]
fn unsettled_a_due_job_left_waiting() {
    let (history, mut store) = clean();
    store.jobs[0].state = "retrying".into();
    store.jobs[0].next_attempt_at_ms = Some(T + 100);
    store.gauges.clear();
    assert!(checks(&history, &store).contains(&"unsettled"));
    // A paused subscriber's job with its deadline ahead is held.
    store.jobs[0].waiting_reason = Some("subscriber_paused".into());
    store.jobs[0].deadline_ms = T + 120_000;
    assert!(!checks(&history, &store).contains(&"unsettled"));
}

#[test]
fn unexplained_states_and_attempt_rows() {
    let (history, mut store) = clean();
    store
        .attempts
        .insert(ID, vec![attempt(1, "retryable", None)]);
    assert_eq!(checks(&history, &store), ["unexplained"]);
    store
        .attempts
        .insert(ID, vec![attempt(2, "delivered", None)]);
    assert_eq!(checks(&history, &store), ["unexplained"]);
    // A dead job with max_attempts that has attempts left.
    store
        .attempts
        .insert(ID, vec![attempt(1, "retryable", None)]);
    store.jobs[0].state = "dead".into();
    store.jobs[0].dead_reason = Some("max_attempts".into());
    store.jobs[0].max_attempts = Some(3);
    store.gauges.clear();
    assert!(checks(&history, &store).contains(&"unexplained"));
    // deadline_exceeded after a retryable failure is explained.
    store.jobs[0].dead_reason = Some("deadline_exceeded".into());
    store.jobs[0].dead_at_ms = Some(T + 500);
    assert!(!checks(&history, &store).contains(&"unexplained"));
}

#[test]
fn not_received_a_delivered_job_without_a_2xx() {
    let (mut history, store) = clean();
    history.requests = vec![request(10, Some((12, Ending::Answered(500))))];
    assert_eq!(checks(&history, &store), ["not_received"]);
}

#[test]
fn after_cancel_unless_a_sigstop_explains_it() {
    let (mut history, mut store) = clean();
    store.jobs[0].state = "cancelled".into();
    store.jobs[0].delivered_at_ms = None;
    store.attempts.insert(ID, vec![attempt(1, "unknown", None)]);
    store.gauges.clear();
    history
        .ops
        .push(op(OpKind::Cancel { job_id: ID }, T + 5, 200));
    history.requests = vec![request(4_000, Some((4_002, Ending::Answered(200))))];
    assert_eq!(checks(&history, &store), ["after_cancel"]);
    // Another process stopped then does not explain it: none of the job's attempts
    // ran there.
    let mut elsewhere = stop(1_000, 3_500);
    elsewhere.pid = Some(2);
    history.faults.push(elsewhere);
    assert_eq!(checks(&history, &store), ["after_cancel"]);
    history.faults.clear();
    // The request came from the instance of its attempt, stopped from +1 s to +3.5 s.
    history.faults.push(stop(1_000, 3_500));
    let verdict = audit(&history, &store, &settings());
    assert!(verdict.passed(), "{}", verdict.text());
    assert_eq!(verdict.excused.len(), 1);
    assert_eq!(verdict.counts.excused["sigstop"], 1);
}

#[test]
fn a_cancel_answered_200_is_final() {
    // The clean job is delivered; a cancel that was answered 200 says it was not.
    let (mut history, store) = clean();
    history
        .ops
        .push(op(OpKind::Cancel { job_id: ID }, T + 5, 200));
    assert!(checks(&history, &store).contains(&"unexplained"));
    // A cancel refused (409) leaves the job to its delivery.
    history.ops.pop();
    history
        .ops
        .push(op(OpKind::Cancel { job_id: ID }, T + 5, 409));
    let verdict = audit(&history, &store, &settings());
    assert!(verdict.passed(), "{}", verdict.text());
}

#[test]
fn after_deadline() {
    let (mut history, mut store) = clean();
    history.requests = vec![ok(10_500)];
    store.attempts.get_mut(&ID).expect("rows")[0].started_at_ms = T + 10_400;
    assert_eq!(checks(&history, &store), ["after_deadline"]);
    // Two late requests: one violation that counts both.
    history.requests.push(ok(10_600));
    store.jobs[0].attempts = 2;
    let mut second = attempt(2, "delivered", None);
    second.started_at_ms = T + 10_600;
    store.attempts.get_mut(&ID).expect("rows")[0].outcome = "unknown".into();
    store.attempts.get_mut(&ID).expect("rows").push(second);
    let verdict = audit(&history, &store, &settings());
    assert_eq!(verdict.violations.len(), 1, "{}", verdict.text());
    assert!(verdict.violations[0].detail.ends_with("(and 1 more)"));
}

#[test]
fn overlap_unless_a_sigstop_explains_it() {
    let (mut history, mut store) = clean();
    history.requests = vec![request(10, Some((2_500, Ending::Abandoned))), ok(2_000)];
    store.jobs[0].attempts = 2;
    store.attempts.insert(
        ID,
        vec![attempt(1, "unknown", None), attempt(2, "delivered", None)],
    );
    assert_eq!(checks(&history, &store), ["overlap"]);
    history.faults.push(stop(100, 1_900));
    let verdict = audit(&history, &store, &settings());
    assert!(verdict.passed(), "{}", verdict.text());
}

#[test]
fn overlap_with_a_long_request_beyond_the_next_one() {
    // Request 1 stays open to +5 s; request 2 opens and ends inside it, and request 3
    // starts at +3 s, after request 2 ended but while request 1 is still open: both
    // overlap request 1 (comparing neighbours only would miss the second).
    let (mut history, mut store) = clean();
    history.requests = vec![
        request(10, Some((5_000, Ending::Abandoned))),
        request(1_000, Some((1_010, Ending::Abandoned))),
        ok(3_000),
    ];
    store.jobs[0].attempts = 3;
    store.attempts.insert(
        ID,
        vec![
            attempt(1, "unknown", None),
            attempt(2, "unknown", None),
            attempt(3, "delivered", None),
        ],
    );
    let verdict = audit(&history, &store, &settings());
    let overlaps = verdict
        .violations
        .iter()
        .filter(|v| v.check == "overlap")
        .count();
    assert_eq!(overlaps, 1, "{}", verdict.text());
    assert!(
        verdict.violations[0].detail.contains("(and 1 more)"),
        "{}",
        verdict.text()
    );
}

#[test]
fn duplicates_beyond_unknown_attempts_and_resends() {
    let (mut history, mut store) = clean();
    history.requests = vec![ok(10), ok(500)];
    store.jobs[0].attempts = 2;
    store.attempts.insert(
        ID,
        vec![attempt(1, "delivered", None), attempt(2, "delivered", None)],
    );
    assert_eq!(checks(&history, &store), ["duplicates"]);
    // One resend on a fresh connection explains one duplicate.
    store.jobs[0].attempts = 1;
    let note = "resent once on a fresh connection: the first closed before an answer (x)";
    store
        .attempts
        .insert(ID, vec![attempt(1, "delivered", Some(note))]);
    let verdict = audit(&history, &store, &settings());
    assert!(verdict.passed(), "{}", verdict.text());
    assert_eq!((verdict.counts.duplicates, verdict.counts.resends), (1, 1));
}

#[test]
fn a_late_result_that_filled_in_an_unknown_attempt_still_explains_a_duplicate() {
    // Attempt 1's lease was lost (the next attempt is marked a possible duplicate),
    // then its late result replaced `unknown` on its own row (DESIGN §2.2).
    let (mut history, mut store) = clean();
    history.requests = vec![ok(10), ok(500)];
    store.jobs[0].attempts = 2;
    let mut second = attempt(2, "delivered", None);
    second.possible_duplicate = true;
    store
        .attempts
        .insert(ID, vec![attempt(1, "delivered", None), second]);
    let verdict = audit(&history, &store, &settings());
    assert!(verdict.passed(), "{}", verdict.text());
    // A mark that attempt 1's own resend explains does not count twice.
    let note = "resent once on a fresh connection: the first closed before an answer (x)";
    history.requests = vec![ok(10), ok(300), ok(500)];
    store.attempts.get_mut(&ID).expect("rows")[0].reason = Some(note.into());
    assert_eq!(checks(&history, &store), ["duplicates"]);
}

#[test]
fn an_answer_a_stopped_process_never_read_excuses_its_duplicate() {
    let (mut history, mut store) = clean();
    history.requests = vec![ok(10), ok(5_000)];
    store.jobs[0].attempts = 2;
    let mut first = attempt(1, "retryable", None);
    first.reason = Some("no answer within 2000 ms".into());
    store
        .attempts
        .insert(ID, vec![first, attempt(2, "delivered", None)]);
    assert_eq!(checks(&history, &store), ["duplicates"]);
    history.faults.push(stop(0, 3_000));
    let verdict = audit(&history, &store, &settings());
    assert!(verdict.passed(), "{}", verdict.text());
    assert_eq!(verdict.excused.len(), 1);
}

#[test]
fn unrecorded_a_request_without_an_attempt() {
    let (mut history, store) = clean();
    history.requests = vec![request(5, Some((6, Ending::Closed))), ok(10)];
    assert_eq!(checks(&history, &store), ["unrecorded"]);
}

#[test]
fn producer_5xx_unless_a_503_during_a_postgres_restart() {
    let (mut history, store) = clean();
    let mut failed = create(None, 503);
    failed.sent_ms = T + 20_000;
    failed.answered_ms = T + 20_010;
    failed.outcome = OpOutcome::Status {
        status: 503,
        retry_after: true,
    };
    history.ops.push(failed);
    assert_eq!(checks(&history, &store), ["producer_5xx"]);
    history.faults.push(FaultWindow {
        kind: FaultKind::PostgresRestart,
        instance: None,
        pid: None,
        start_ms: T + 15_000,
        end_ms: T + 19_000,
    });
    let verdict = audit(&history, &store, &settings());
    assert!(verdict.passed(), "{}", verdict.text());
    assert_eq!(verdict.counts.ops["create"].unavailable, 1);
    // A 500 is never excused.
    if let OpOutcome::Status { status, .. } = &mut history.ops[1].outcome {
        *status = 500;
    }
    assert_eq!(checks(&history, &store), ["producer_5xx"]);
}

#[test]
fn producer_unanswered_unless_a_fault_hit_its_instance() {
    let (mut history, store) = clean();
    let mut lost = create(None, 0);
    lost.instance = 1;
    lost.sent_ms = T + 20_000;
    lost.answered_ms = T + 25_000;
    lost.outcome = OpOutcome::NoAnswer {
        error: "timed out".into(),
    };
    history.ops.push(lost);
    assert_eq!(checks(&history, &store), ["producer_unanswered"]);
    // A stop of another instance explains nothing.
    history.faults.push(stop(18_000, 22_000));
    assert_eq!(checks(&history, &store), ["producer_unanswered"]);
    // A stop of its own does, and so does one that ended just before it was sent.
    history.faults[0].instance = Some(1);
    assert!(checks(&history, &store).is_empty());
    history.faults[0].end_ms = T + 19_500;
    assert!(checks(&history, &store).is_empty());
    history.faults[0].end_ms = T + 18_500;
    assert_eq!(checks(&history, &store), ["producer_unanswered"]);
    // So does a PostgreSQL restart.
    history.faults.push(FaultWindow {
        kind: FaultKind::PostgresRestart,
        instance: None,
        pid: None,
        start_ms: T + 21_000,
        end_ms: T + 24_000,
    });
    assert!(checks(&history, &store).is_empty());
}

#[test]
fn starved_a_due_job_dead_without_an_attempt_and_no_fault() {
    let (history, mut store) = clean();
    let job = &mut store.jobs[0];
    job.state = "dead".into();
    job.dead_reason = Some("deadline_exceeded".into());
    job.attempts = 0;
    job.delivered_at_ms = None;
    job.dead_at_ms = Some(job.deadline_ms);
    store.attempts.clear();
    store.gauges[0].jobs = BTreeMap::from([("dead".into(), 1)]);
    store.gauges[0].dead_jobs = BTreeMap::from([("deadline_exceeded".into(), 1)]);
    let mut history = History {
        requests: Vec::new(),
        ..history
    };
    assert_eq!(checks(&history, &store), ["starved"]);
    // Held by an open circuit at its death: explained.
    store.jobs[0].dead_detail = Some("destination_circuit_open".into());
    assert!(checks(&history, &store).is_empty());
    store.jobs[0].dead_detail = None;
    // A fault whose aftermath reaches its due time: explained.
    history.faults.push(FaultWindow {
        kind: FaultKind::ReceiverDown,
        instance: None,
        pid: None,
        start_ms: T - 5_000,
        end_ms: T - 2_000,
    });
    assert!(checks(&history, &store).is_empty());
    // One long over is not.
    history.faults[0].end_ms = T - 3_100;
    assert_eq!(checks(&history, &store), ["starved"]);
    // Due for less than a claim takes: not judged.
    store.jobs[0].deadline_ms = store.jobs[0].deliver_at_ms + 2_000;
    store.jobs[0].dead_at_ms = Some(store.jobs[0].deadline_ms);
    assert!(checks(&history, &store).is_empty());
}

#[test]
fn producer_4xx_unless_the_request_earned_it() {
    let (mut history, store) = clean();
    // A create answered 422 after its deadline had passed in transit: expected.
    let mut late = create(None, 422);
    late.answered_ms = T + 10_000;
    history.ops.push(late);
    assert!(checks(&history, &store).is_empty());
    // The same 422 well before the deadline: the API refused a good body.
    history.ops[1].answered_ms = T + 5;
    assert_eq!(checks(&history, &store), ["producer_4xx"]);
    history.ops.pop();
    // A cancel that found the job moved on: expected; one that found no job: not.
    history
        .ops
        .push(op(OpKind::Cancel { job_id: ID }, T + 20, 409));
    assert!(checks(&history, &store).is_empty());
    history
        .ops
        .push(op(OpKind::Cancel { job_id: ID }, T + 30, 404));
    assert_eq!(checks(&history, &store), ["producer_4xx"]);
}

#[test]
fn gauges_that_disagree_with_the_listing() {
    let (history, mut store) = clean();
    store.gauges[0].jobs.insert("retrying".into(), 1);
    assert_eq!(checks(&history, &store), ["gauges"]);
    store.gauges[0].jobs.remove("retrying");
    store.gauges[0].dead_jobs.insert("max_attempts".into(), 1);
    assert_eq!(checks(&history, &store), ["gauges"]);
}

#[test]
fn early_unless_rescheduled() {
    let (mut history, store) = clean();
    if let OpKind::Create { deliver_at_ms, .. } = &mut history.ops[0].kind {
        *deliver_at_ms = Some(T + 5_000);
    }
    assert_eq!(checks(&history, &store), ["early"]);
    // A replay of its subscriber sent after the request does not excuse it.
    history.ops.push(op(
        OpKind::Replay {
            subscribers: vec![store.jobs[0].subscriber_id.clone()],
            replay_id: None,
        },
        T + 1_000,
        202,
    ));
    assert_eq!(checks(&history, &store), ["early"]);
    history.ops.push(op(
        OpKind::Reschedule {
            job_id: ID,
            deliver_at_ms: T,
            deadline_ms: T + 10_000,
        },
        T + 6,
        200,
    ));
    assert!(checks(&history, &store).is_empty());
}

#[test]
fn after_the_deadline_in_force_before_a_replay_moved_it() {
    // Created with a deadline at +10 s, replayed at +20 s with one at +30 s: a request
    // at +15 s was after the deadline of its time, though before the final one.
    let (mut history, mut store) = clean();
    store.jobs[0].deadline_ms = T + 30_000;
    history.requests = vec![ok(15_000)];
    store.attempts.get_mut(&ID).expect("rows")[0].started_at_ms = T + 14_990;
    history.ops.push(op(
        OpKind::Replay {
            subscribers: vec![store.jobs[0].subscriber_id.clone()],
            replay_id: None,
        },
        T + 20_000,
        202,
    ));
    assert_eq!(checks(&history, &store), ["after_deadline"]);
    // The same request after the replay is within the final deadline.
    history.requests = vec![ok(21_000)];
    assert!(checks(&history, &store).is_empty());
}

#[test]
fn a_violation_carries_the_history() {
    let (mut history, store) = clean();
    history.requests = vec![request(10, Some((12, Ending::Answered(500))))];
    let verdict = audit(&history, &store, &settings());
    let history = &verdict.violations[0].history;
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("attempt #1 +10..+12 ms by") && l.ends_with("delivered 200")),
        "{history:?}"
    );
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("request +10..+12 ms Answered(500)")),
        "{history:?}"
    );
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("op create +0..+5 ms instance 0 → 201")),
        "{history:?}"
    );
}
