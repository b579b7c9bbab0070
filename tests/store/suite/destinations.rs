//! Destinations (docs/DESIGN.md §15): subscribers whose URLs share `host:port` share a
//! limit on the requests open to that server, claims are fair across destinations, and
//! a circuit breaker holds an unreachable host's jobs (no attempt spent) until one probe
//! says it answers again. Every store here runs the default policy: the default limit, a
//! breaker opening on the 5th consecutive connection failure, cooling down 5 s, then
//! 10 s. The endpoint breakers and the time-fair share are in `endpoints.rs`.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::circuit::{CircuitState, ForcedCircuit};
use deferhook::domain::destination_state::DEFAULT_DESTINATION_MAX_IN_FLIGHT;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::waiting::WaitingReason;
use deferhook::domain::{JobEvent, Timestamp};
use deferhook::store::{
    AttemptResult, ClaimedJob, DestinationPut, DestinationView, PageRequest, SharedStore,
    SubscriberPut,
};

use crate::support::{Backend, at, claim, create, failed, new_job, outcome, subscriber_put};

/// The destination every `on_shared` subscriber sends to.
const SHARED: &str = "shared.example.test:443";

/// Creates subscriber `id` on [`SHARED`] with `max_in_flight` 100.
async fn on_shared(store: &SharedStore, id: &str) {
    let put = SubscriberPut {
        url: format!("https://Shared.Example.TEST/{id}"),
        max_in_flight: Some(100),
        ..subscriber_put(id)
    };
    store.put_subscriber(put, at(0)).await.unwrap();
}

/// `n` jobs of `subscriber`, due before [`at`]`(0)`, with an hour to their deadline.
async fn due_jobs(store: &SharedStore, subscriber: &str, n: i64) {
    let jobs = (0..n)
        .map(|k| {
            new_job(
                subscriber,
                &format!("{subscriber}-{k}"),
                at(-1_000 + k),
                at(3_600_000),
            )
        })
        .collect();
    create(store, jobs).await;
}

async fn destination(store: &SharedStore, key: &str, now: Timestamp) -> DestinationView {
    store
        .get_destination(key, now)
        .await
        .unwrap()
        .expect("the destination exists")
}

async fn set(store: &SharedStore, key: &str, put: DestinationPut, now: Timestamp) {
    store
        .put_destination(key, put, now)
        .await
        .unwrap()
        .expect("the destination exists");
}

/// Why `subscriber`'s due jobs wait at `now`, as far as its destination goes.
async fn hold(store: &SharedStore, subscriber: &str, now: Timestamp) -> Option<WaitingReason> {
    let load = store
        .subscriber_load(subscriber, now)
        .await
        .unwrap()
        .unwrap();
    load.destination_hold
}

fn answered(status: u16) -> AttemptResult {
    AttemptResult {
        outcome: if status < 300 {
            AttemptOutcome::Delivered
        } else {
            AttemptOutcome::Retryable
        },
        status: Some(status),
        error_class: (status >= 300).then_some(ErrorClass::Http5xx),
        reason: Some(format!("HTTP {status}")),
        body_excerpt: None,
        resent: false,
    }
}

/// A connection that could not be made: evidence against the host.
pub fn unreachable() -> AttemptResult {
    AttemptResult {
        outcome: AttemptOutcome::Retryable,
        status: None,
        error_class: Some(ErrorClass::Connect),
        reason: Some("connection refused".into()),
        body_excerpt: None,
        resent: false,
    }
}

/// Records that `claimed`'s attempt could not connect at `now` (retried 1 s later).
pub async fn refuse(store: &SharedStore, claimed: &ClaimedJob, now: Timestamp) {
    let event = JobEvent::RetryableFailure {
        retry_at: now.plus_ms(1_000),
    };
    let record = outcome(claimed, event, unreachable(), now);
    store.record_outcomes(&[record], now).await.unwrap();
}

/// Records `claimed`'s attempt as answered `status` at `now` (a failure retries 1 s
/// later).
pub async fn answer(store: &SharedStore, claimed: &ClaimedJob, status: u16, now: Timestamp) {
    let event = if status < 300 {
        JobEvent::Delivered
    } else {
        JobEvent::RetryableFailure {
            retry_at: now.plus_ms(1_000),
        }
    };
    let record = outcome(claimed, event, answered(status), now);
    store.record_outcomes(&[record], now).await.unwrap();
}

store_case!(
    subscribers_on_one_host_and_port_share_a_destination,
    async |store: SharedStore| {
        on_shared(&store, "a").await;
        on_shared(&store, "b").await;
        let other_port = SubscriberPut {
            url: "https://shared.example.test:8443/c".into(),
            ..subscriber_put("c")
        };
        store.put_subscriber(other_port, at(0)).await.unwrap();

        let page = PageRequest {
            after: None,
            limit: 10,
        };
        let all = store.list_destinations(page, at(0)).await.unwrap();
        let keys: Vec<(&str, u64)> = all
            .iter()
            .map(|d| (d.key.as_str(), d.subscribers))
            .collect();
        assert_eq!(keys, [(SHARED, 2), ("shared.example.test:8443", 1)]);
        let shared = &all[0];
        assert_eq!(
            (shared.max_in_flight, shared.max_in_flight_set),
            (DEFAULT_DESTINATION_MAX_IN_FLIGHT, false)
        );
        assert_eq!((shared.in_flight, shared.paused), (0, false));
        assert_eq!(shared.circuit.state, CircuitState::Closed);
        assert_eq!(shared.last_error, None);

        // The cursor walks them in key order.
        let after = PageRequest {
            after: Some(SHARED.to_owned()),
            limit: 10,
        };
        let rest = store.list_destinations(after, at(0)).await.unwrap();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].key, "shared.example.test:8443");
        assert!(
            store
                .get_destination("nowhere.example.test:443", at(0))
                .await
                .unwrap()
                .is_none()
        );
        let unknown =
            store.put_destination("nowhere.example.test:443", DestinationPut::default(), at(0));
        assert!(unknown.await.unwrap().is_none());

        // A new URL moves the subscriber.
        let moved = SubscriberPut {
            url: "https://shared.example.test:8443/b".into(),
            ..subscriber_put("b")
        };
        store.put_subscriber(moved, at(1)).await.unwrap();
        assert_eq!(destination(&store, SHARED, at(1)).await.subscribers, 1);
        assert_eq!(
            destination(&store, "shared.example.test:8443", at(1))
                .await
                .subscribers,
            2
        );
    }
);

// A destination's limit counts the requests of all its subscribers; a finished
// attempt frees its place.
store_case!(
    a_destinations_limit_holds_across_its_subscribers,
    async |store: SharedStore| {
        for id in ["a", "b", "c", "d"] {
            on_shared(&store, id).await;
            due_jobs(&store, id, 2).await;
        }
        let three = DestinationPut {
            max_in_flight: Some(Some(3)),
            ..DestinationPut::default()
        };
        set(&store, SHARED, three, at(0)).await;

        let claimed = claim(&store, at(0), 100).await;
        assert_eq!(claimed.len(), 3);
        assert!(claim(&store, at(1), 100).await.is_empty());
        let view = destination(&store, SHARED, at(1)).await;
        assert_eq!(
            (view.in_flight, view.max_in_flight, view.max_in_flight_set),
            (3, 3, true)
        );
        assert_eq!(
            hold(&store, "d", at(1)).await,
            Some(WaitingReason::DestinationAtLimit)
        );

        answer(&store, &claimed[0], 200, at(2)).await;
        assert_eq!(claim(&store, at(3), 100).await.len(), 1);

        // Back to the default.
        let default = DestinationPut {
            max_in_flight: Some(None),
            ..DestinationPut::default()
        };
        set(&store, SHARED, default, at(4)).await;
        assert_eq!(claim(&store, at(5), 100).await.len(), 4);
    }
);

// The next wake-up read right after a claim counts that claim's own requests: a
// destination it filled holds its backlog, so the worker sleeps until a lease expires
// rather than waking at once to claim nothing (issue #36 tried reusing the claim's
// loads for this read; without its own requests counted, the backlog looked free).
store_case!(
    the_next_wake_after_a_claim_counts_what_it_claimed,
    async |store: SharedStore| {
        for id in ["a", "b"] {
            on_shared(&store, id).await;
            due_jobs(&store, id, 2).await;
        }
        let three = DestinationPut {
            max_in_flight: Some(Some(3)),
            ..DestinationPut::default()
        };
        set(&store, SHARED, three, at(0)).await;
        let claimed = claim(&store, at(10), 100).await;
        assert_eq!(claimed.len(), 3);
        let first_expiry = claimed.iter().map(|c| c.lease_expires_at).min();
        assert_eq!(store.next_wake_at(at(10)).await.unwrap(), first_expiry);
        // Read again (nothing of the claim left to reuse): the same answer.
        assert_eq!(store.next_wake_at(at(11)).await.unwrap(), first_expiry);
    }
);

// Round-robin across destinations: a destination with many subscribers and older work
// does not take a claim's whole batch.
store_case!(
    claims_are_fair_across_destinations,
    async |store: SharedStore| {
        for id in ["a", "b", "c", "d", "e"] {
            on_shared(&store, id).await;
            due_jobs(&store, id, 10).await;
        }
        let alone = SubscriberPut {
            url: "https://alone.example.test/".into(),
            max_in_flight: Some(100),
            ..subscriber_put("alone")
        };
        store.put_subscriber(alone, at(0)).await.unwrap();
        let late = (0..10)
            .map(|k| new_job("alone", &format!("alone-{k}"), at(-10 + k), at(3_600_000)))
            .collect();
        create(&store, late).await;

        let claimed = claim(&store, at(0), 6).await;
        let alone_count = claimed
            .iter()
            .filter(|c| c.subscriber_id == "alone")
            .count();
        assert_eq!(
            alone_count, 3,
            "every other place goes to the other destination"
        );
    }
);

store_case!(
    a_paused_destination_sends_nothing,
    async |store: SharedStore| {
        on_shared(&store, "a").await;
        due_jobs(&store, "a", 3).await;
        let pause = DestinationPut {
            paused: Some(true),
            ..DestinationPut::default()
        };
        set(&store, SHARED, pause, at(0)).await;
        assert!(claim(&store, at(1), 10).await.is_empty());
        assert_eq!(
            hold(&store, "a", at(1)).await,
            Some(WaitingReason::DestinationPaused)
        );
        assert!(destination(&store, SHARED, at(1)).await.paused);

        let resume = DestinationPut {
            paused: Some(false),
            ..DestinationPut::default()
        };
        set(&store, SHARED, resume, at(2)).await;
        assert_eq!(claim(&store, at(3), 10).await.len(), 3);
    }
);

// Five connection failures in a row open the circuit; while open nothing is claimed (no
// attempt spent); after 5 s one probe goes; a failed probe reopens it for 10 s; a good
// one closes it and the backlog drains.
store_case!(
    a_circuit_opens_on_host_failures_and_one_probe_decides,
    async |store: SharedStore| {
        on_shared(&store, "a").await;
        on_shared(&store, "b").await;
        due_jobs(&store, "a", 4).await;
        due_jobs(&store, "b", 4).await;

        let first = claim(&store, at(0), 100).await;
        assert_eq!(first.len(), 8);
        for job in &first[..5] {
            refuse(&store, job, at(10)).await;
        }
        let open = destination(&store, SHARED, at(10)).await;
        assert_eq!(open.circuit.state, CircuitState::Open);
        assert_eq!(open.circuit.consecutive_failures, 5);
        assert_eq!(open.circuit.retry_at, Some(at(5_010)));
        let gauges = store.gauges(at(10), 60_000).await.unwrap();
        assert_eq!((gauges.circuits_open, gauges.circuits_half_open), (1, 0));
        let error = open.last_error.expect("the last host failure");
        assert_eq!((error.class, error.status), (ErrorClass::Connect, None));
        // Results of attempts sent before it opened change nothing.
        for job in &first[5..] {
            refuse(&store, job, at(20)).await;
        }
        assert_eq!(
            destination(&store, SHARED, at(20)).await.circuit.retry_at,
            Some(at(5_010))
        );

        // Backoff over (1 s), cool-down not: nothing goes, no attempt is spent.
        assert!(claim(&store, at(2_000), 100).await.is_empty());
        assert_eq!(
            hold(&store, "a", at(2_000)).await,
            Some(WaitingReason::DestinationCircuitOpen)
        );

        // Cool-down over: one probe, however many are due and however many claim.
        let probe = claim(&store, at(5_010), 100).await;
        assert_eq!(probe.len(), 1);
        assert!(claim(&store, at(5_020), 100).await.is_empty());
        assert_eq!(
            destination(&store, SHARED, at(5_020)).await.circuit.state,
            CircuitState::HalfOpen
        );

        refuse(&store, &probe[0], at(5_100)).await;
        let reopened = destination(&store, SHARED, at(5_100)).await;
        assert_eq!(reopened.circuit.state, CircuitState::Open);
        assert_eq!(reopened.circuit.cooldown_ms, 10_000);
        assert!(claim(&store, at(10_100), 100).await.is_empty());

        let probe = claim(&store, at(15_100), 100).await;
        assert_eq!(probe.len(), 1);
        answer(&store, &probe[0], 200, at(15_200)).await;
        let closed = destination(&store, SHARED, at(15_200)).await;
        assert_eq!(closed.circuit.state, CircuitState::Closed);
        assert_eq!(closed.circuit.consecutive_failures, 0);
        assert_eq!(
            claim(&store, at(15_300), 100).await.len(),
            7,
            "the backlog drains"
        );
    }
);

// An answer is the subscriber's own business, whatever it says: 5xx, 502–504 included.
// It never counts against the host, and resets the count of connection failures; a
// timeout neither counts nor resets it.
store_case!(
    other_failures_do_not_open_the_circuit,
    async |store: SharedStore| {
        for id in ["a", "b", "c", "d"] {
            on_shared(&store, id).await;
            due_jobs(&store, id, 3).await;
        }
        let claimed = claim(&store, at(0), 100).await;
        assert_eq!(claimed.len(), 12);
        for (n, job) in claimed.iter().take(8).enumerate() {
            let status = [500, 502, 503, 504][n % 4];
            answer(&store, job, status, at(10)).await;
        }
        let view = destination(&store, SHARED, at(10)).await;
        assert_eq!(view.circuit.state, CircuitState::Closed);
        assert_eq!(view.circuit.consecutive_failures, 0);
        assert_eq!(view.last_error, None, "no failure of the host");
        refuse(&store, &claimed[8], at(20)).await;
        refuse(&store, &claimed[9], at(20)).await;
        let timeout = failed(
            AttemptOutcome::Retryable,
            ErrorClass::Timeout,
            None,
            "timed out",
            None,
        );
        let retry = JobEvent::RetryableFailure {
            retry_at: at(2_000),
        };
        let record = outcome(&claimed[10], retry, timeout, at(30));
        store.record_outcomes(&[record], at(30)).await.unwrap();
        let view = destination(&store, SHARED, at(30)).await;
        assert_eq!(view.circuit.consecutive_failures, 2);
        answer(&store, &claimed[11], 500, at(40)).await;
        let view = destination(&store, SHARED, at(40)).await;
        assert_eq!(view.circuit.consecutive_failures, 0);
    }
);

// An operator holds the circuit open or closed, and "auto" starts it afresh.
store_case!(
    an_operator_forces_the_circuit,
    async |store: SharedStore| {
        on_shared(&store, "a").await;
        due_jobs(&store, "a", 3).await;
        let force = |forced| DestinationPut {
            circuit: Some(forced),
            ..DestinationPut::default()
        };
        set(&store, SHARED, force(Some(ForcedCircuit::Open)), at(0)).await;
        assert!(claim(&store, at(1), 10).await.is_empty());
        let view = destination(&store, SHARED, at(1)).await;
        assert_eq!(
            (view.circuit.state, view.circuit.forced),
            (CircuitState::Open, Some(ForcedCircuit::Open))
        );

        set(&store, SHARED, force(Some(ForcedCircuit::Closed)), at(2)).await;
        let claimed = claim(&store, at(3), 10).await;
        assert_eq!(claimed.len(), 3);
        for job in &claimed {
            refuse(&store, job, at(4)).await;
        }
        // Held closed: failures never stop it (6 in a row here).
        let claimed_again = claim(&store, at(1_004), 10).await;
        assert_eq!(claimed_again.len(), 3);
        for job in &claimed_again {
            refuse(&store, job, at(1_005)).await;
        }
        assert_eq!(claim(&store, at(2_005), 10).await.len(), 3);

        set(&store, SHARED, force(None), at(2_006)).await;
        let view = destination(&store, SHARED, at(2_006)).await;
        assert_eq!(view.circuit.state, CircuitState::Closed);
        assert_eq!(
            (view.circuit.forced, view.circuit.consecutive_failures),
            (None, 0)
        );
    }
);

// Two instances claiming at once on one database never pass a destination's limit
// together, and take all of it between them.
store_case!(
    the_limit_holds_across_instances_claiming_at_once,
    async |backend: Backend| {
        let store = backend.store.clone();
        for n in 0..20 {
            let id = format!("s{n}");
            on_shared(&store, &id).await;
            due_jobs(&store, &id, 5).await;
        }
        let ten = DestinationPut {
            max_in_flight: Some(Some(10)),
            ..DestinationPut::default()
        };
        set(&store, SHARED, ten, at(0)).await;
        let other = deferhook::store::open(&backend.url).await.unwrap();
        let mut total = 0;
        for round in 0..20 {
            let now = at(round);
            let (a, b) = tokio::join!(
                crate::support::claim_as(&store, "worker-a", now, 7),
                crate::support::claim_as(&other, "worker-b", now, 7),
            );
            total += a.len() + b.len();
            assert!(total <= 10, "round {round}: {total} requests open");
        }
        assert_eq!(total, 10);
        assert_eq!(destination(&store, SHARED, at(20)).await.in_flight, 10);
    }
);

// An expired lease at a paused destination goes back to waiting: no claim would take
// it over, and it must not look in flight.
store_case!(
    an_expired_lease_at_a_paused_destination_waits,
    async |store: SharedStore| {
        on_shared(&store, "a").await;
        due_jobs(&store, "a", 1).await;
        let claimed = claim(&store, at(0), 10).await;
        let pause = DestinationPut {
            paused: Some(true),
            ..DestinationPut::default()
        };
        set(&store, SHARED, pause, at(1)).await;
        let expired = store
            .expire_deadlines(at(crate::support::LEASE_MS as i64 + 1), 10)
            .await
            .unwrap();
        assert_eq!(expired.released, 1);
        let job = crate::support::job(&store, claimed[0].job_id).await;
        assert_eq!(job.state, deferhook::domain::JobState::Retrying);
    }
);

// Answers of requests sent before the circuit closed describe the host as it was:
// they neither count towards opening it again nor reset it.
store_case!(
    results_from_before_a_recovery_do_not_reopen_it,
    async |store: SharedStore| {
        on_shared(&store, "a").await;
        due_jobs(&store, "a", 9).await;
        let first = claim(&store, at(0), 100).await;
        assert_eq!(first.len(), 9);
        for job in &first[..5] {
            refuse(&store, job, at(10)).await;
        }
        // Three old requests stay out; one job waits for the probe.
        let probe = claim(&store, at(5_010), 100).await;
        assert_eq!(probe.len(), 1);
        answer(&store, &probe[0], 200, at(5_100)).await;
        for job in &first[5..8] {
            refuse(&store, job, at(6_000)).await;
        }
        let view = destination(&store, SHARED, at(6_000)).await;
        assert_eq!(view.circuit.state, CircuitState::Closed);
        assert_eq!(view.circuit.consecutive_failures, 0);
    }
);

// While a circuit is open, an expired lease at its destination is no reason to wake
// the worker (no claim can take it over before the cool-down ends), and the sweep puts
// it back to waiting, where it says why.
store_case!(
    an_open_circuit_holds_an_expired_lease_quietly,
    async |store: SharedStore| {
        on_shared(&store, "a").await;
        due_jobs(&store, "a", 6).await;
        let claimed = claim(&store, at(0), 100).await;
        assert_eq!(claimed.len(), 6);
        for job in &claimed[..5] {
            refuse(&store, job, at(29_000)).await;
        }
        // The sixth lease expired at 30 s; the circuit stays open until 34 s.
        let now = at(crate::support::LEASE_MS as i64 + 1);
        assert_eq!(store.next_wake_at(now).await.unwrap(), Some(at(34_000)));
        let expired = store.expire_deadlines(now, 10).await.unwrap();
        assert_eq!(expired.released, 1);
        assert_eq!(store.next_wake_at(now).await.unwrap(), Some(at(34_000)));
        assert_eq!(
            hold(&store, "a", now).await,
            Some(WaitingReason::DestinationCircuitOpen)
        );
        assert_eq!(claim(&store, at(34_000), 100).await.len(), 1, "the probe");
    }
);

/// Writes `sql` (no parameters) straight to the database, as another program would.
async fn write_directly(backend: &Backend, sql: &'static str) {
    use sqlx::Connection;
    if backend.url.starts_with("sqlite:") {
        let mut connection = sqlx::SqliteConnection::connect(&backend.url).await.unwrap();
        sqlx::query(sql).execute(&mut connection).await.unwrap();
    } else {
        let mut connection = sqlx::PgConnection::connect(&backend.url).await.unwrap();
        sqlx::query(sql).execute(&mut connection).await.unwrap();
    }
}

// A subscriber written without a destination (by an instance of the version before
// destinations, during a rolling upgrade) is given its destination by the next claim:
// its work does not wait for a restart.
store_case!(
    a_subscriber_written_by_an_older_version_is_delivered,
    async |backend: Backend| {
        let store = backend.store.clone();
        on_shared(&store, "old").await;
        due_jobs(&store, "old", 2).await;
        write_directly(&backend, "UPDATE subscribers SET destination = NULL").await;
        write_directly(&backend, "DELETE FROM destinations").await;
        assert_eq!(claim(&store, at(0), 10).await.len(), 2);
        assert_eq!(destination(&store, SHARED, at(1)).await.in_flight, 2);
    }
);

// When a claim has few places (the instance's slots nearly all taken), the destination
// with more room gets them, not the one with the oldest backlog: a busy destination
// cannot keep a quiet one waiting behind its queue.
store_case!(
    scarce_places_go_to_the_least_busy_destination,
    async |store: SharedStore| {
        for id in ["a", "b", "c"] {
            on_shared(&store, id).await;
            due_jobs(&store, id, 10).await;
        }
        let five = DestinationPut {
            max_in_flight: Some(Some(5)),
            ..DestinationPut::default()
        };
        set(&store, SHARED, five, at(0)).await;
        assert_eq!(claim(&store, at(0), 4).await.len(), 4);
        let quiet = SubscriberPut {
            url: "https://quiet.example.test/".into(),
            ..subscriber_put("quiet")
        };
        store.put_subscriber(quiet, at(0)).await.unwrap();
        create(&store, vec![new_job("quiet", "q", at(1), at(3_600_000))]).await;
        // One place: the quiet destination (room 512) before the busy one (room 1), whose
        // jobs are older.
        let one = claim(&store, at(2), 1).await;
        assert_eq!(one[0].subscriber_id, "quiet");
    }
);
