//! Endpoint circuits and the time-fair share of a destination's places
//! (docs/DESIGN.md §15.1, §15.2): one subscriber's timeouts or back-pressure hold only
//! that subscriber, a host's circuit opens only on evidence about the host, its probe
//! goes to a healthy subscriber, and long-running endpoints never take the places the
//! quick ones on the same `host:port` need. Every store here runs the default policy:
//! a 60 s endpoint window, 5 results at 50 % failures, a 5 s cool-down, long-running
//! from 1 s, the destination breaker on 5 connection failures.

use deferhook::domain::attempt::AttemptOutcome;
use deferhook::domain::circuit::CircuitState;
use deferhook::domain::policy::ErrorClass;
use deferhook::domain::waiting::WaitingReason;
use deferhook::domain::{JobEvent, Timestamp};
use deferhook::store::{ClaimedJob, DestinationPut, SharedStore, SubscriberPut};

use super::destinations::{answer, refuse};
use crate::support::{at, claim, create, failed, lease, new_job, outcome, subscriber_put};

/// The destination every subscriber here sends to.
const HOST: &str = "hooks.example.test:443";

/// Creates subscriber `id` on [`HOST`] with `max_in_flight` 100.
async fn on_host(store: &SharedStore, id: &str) {
    let put = SubscriberPut {
        url: format!("https://hooks.example.test/{id}"),
        max_in_flight: Some(100),
        ..subscriber_put(id)
    };
    store.put_subscriber(put, at(0)).await.unwrap();
}

/// `n` jobs of `subscriber` due at `due` (one ms apart), an hour to their deadline.
async fn jobs_due(store: &SharedStore, subscriber: &str, n: i64, due: Timestamp) {
    let jobs = (0..n)
        .map(|k| {
            new_job(
                subscriber,
                &format!("{subscriber}-{}-{k}", due.as_millis()),
                due.plus_ms(k as u64),
                at(3_600_000),
            )
        })
        .collect();
    create(store, jobs).await;
}

/// Records that `claimed`'s attempt timed out at `now` (retried 1 s later).
async fn time_out(store: &SharedStore, claimed: &ClaimedJob, now: Timestamp) {
    let result = failed(
        AttemptOutcome::Retryable,
        ErrorClass::Timeout,
        None,
        "no answer within the attempt timeout",
        None,
    );
    let event = JobEvent::RetryableFailure {
        retry_at: now.plus_ms(1_000),
    };
    let record = outcome(claimed, event, result, now);
    store.record_outcomes(&[record], now).await.unwrap();
}

/// Why `subscriber`'s due jobs wait at `now` as the claim judges it, in the order the
/// job views read it.
async fn waits(store: &SharedStore, subscriber: &str, now: Timestamp) -> Option<WaitingReason> {
    let load = store
        .subscriber_load(subscriber, now)
        .await
        .unwrap()
        .expect("the subscriber exists");
    load.holds_back(now)
}

fn of<'a>(claimed: &'a [ClaimedJob], subscriber: &str) -> Vec<&'a ClaimedJob> {
    claimed
        .iter()
        .filter(|c| c.subscriber_id == subscriber)
        .collect()
}

// A subscriber whose attempts time out opens its own circuit (5 results, all failed),
// never its host's: the other subscriber there goes on. After the cool-down, one probe
// goes once none of its attempts is open; the probe's answer closes it.
store_case!(
    a_failure_rate_opens_the_endpoints_own_circuit_only,
    async |store: SharedStore| {
        on_host(&store, "slow").await;
        on_host(&store, "ok").await;
        jobs_due(&store, "slow", 6, at(-100)).await;
        jobs_due(&store, "ok", 3, at(-50)).await;
        let first = claim(&store, at(0), 100).await;
        assert_eq!(first.len(), 9);
        let slow = of(&first, "slow");
        for job in &slow[..4] {
            time_out(&store, job, at(5_000)).await;
        }
        assert_eq!(
            waits(&store, "slow", at(5_000)).await,
            None,
            "4 results: too few"
        );
        time_out(&store, slow[4], at(5_000)).await;
        assert_eq!(
            waits(&store, "slow", at(5_000)).await,
            Some(WaitingReason::SubscriberCircuitOpen)
        );
        let host = store
            .get_destination(HOST, at(5_000))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(host.circuit.state, CircuitState::Closed);
        assert_eq!(host.circuit.consecutive_failures, 0);
        // ok's jobs fail too (500) but three results are below the minimum volume.
        for job in of(&first, "ok") {
            answer(&store, job, 500, at(5_000)).await;
        }
        // The backoff is over for both; only ok's jobs go.
        let next = claim(&store, at(6_000), 100).await;
        assert_eq!((next.len(), of(&next, "ok").len()), (3, 3));
        // The worker sleeps until the cool-down's end, not on the 10 ms floor.
        assert_eq!(
            store.next_wake_at(at(6_000)).await.unwrap(),
            Some(at(10_000))
        );

        // Half-open, but its sixth attempt (sent before it opened) is still out.
        assert!(claim(&store, at(10_000), 100).await.is_empty());
        assert_eq!(
            waits(&store, "slow", at(10_000)).await,
            Some(WaitingReason::SubscriberCircuitOpen)
        );
        // That attempt's result is not the probe's: it changes nothing.
        time_out(&store, slow[5], at(10_500)).await;
        let probe = claim(&store, at(11_600), 100).await;
        assert_eq!(probe.len(), 1, "one probe though six are due");
        assert_eq!(probe[0].subscriber_id, "slow");
        assert!(claim(&store, at(11_700), 100).await.is_empty());
        answer(&store, &probe[0], 200, at(11_800)).await;
        assert_eq!(waits(&store, "slow", at(11_800)).await, None);
        assert_eq!(claim(&store, at(11_900), 100).await.len(), 5, "closed");
    }
);

// A failed probe opens the endpoint circuit again for twice the cool-down.
store_case!(
    a_failed_probe_doubles_the_endpoints_cool_down,
    async |store: SharedStore| {
        on_host(&store, "slow").await;
        jobs_due(&store, "slow", 5, at(-100)).await;
        for job in &claim(&store, at(0), 100).await {
            time_out(&store, job, at(5_000)).await;
        }
        let probe = claim(&store, at(10_000), 100).await;
        assert_eq!(probe.len(), 1);
        time_out(&store, &probe[0], at(15_000)).await;
        assert!(claim(&store, at(24_999), 100).await.is_empty());
        assert_eq!(
            store.next_wake_at(at(16_000)).await.unwrap(),
            Some(at(25_000))
        );
        assert_eq!(claim(&store, at(25_000), 100).await.len(), 1);
    }
);

// A 503 with Retry-After, or a 429, is back-pressure: it holds that subscriber until
// the time asked (no failure counted, nothing against the host); the others go on.
store_case!(
    back_pressure_holds_only_its_subscriber_until_its_time,
    async |store: SharedStore| {
        on_host(&store, "busy").await;
        on_host(&store, "ok").await;
        jobs_due(&store, "busy", 8, at(-100)).await;
        jobs_due(&store, "ok", 2, at(-50)).await;
        let first = claim(&store, at(0), 6).await;
        let busy = of(&first, "busy");
        let asked = at(4_000);
        for (n, job) in busy.iter().enumerate() {
            let (status, class) = if n % 2 == 0 {
                (503, ErrorClass::Http5xx)
            } else {
                (429, ErrorClass::Http429)
            };
            let result = failed(AttemptOutcome::Retryable, class, Some(status), "busy", None);
            let event = JobEvent::RetryableFailure { retry_at: asked };
            let mut record = outcome(job, event, result, at(10));
            record.retry_after = Some(asked);
            store.record_outcomes(&[record], at(10)).await.unwrap();
        }
        assert_eq!(
            waits(&store, "busy", at(20)).await,
            Some(WaitingReason::SubscriberRetryAfter)
        );
        let rest = claim(&store, at(20), 100).await;
        assert!(
            of(&rest, "busy").is_empty(),
            "busy's due jobs wait for its time"
        );
        assert_eq!(
            store
                .next_wake_at(at(20))
                .await
                .unwrap()
                .map(|t| t <= asked),
            Some(true)
        );
        let host = store.get_destination(HOST, at(20)).await.unwrap().unwrap();
        assert_eq!(host.circuit.state, CircuitState::Closed);
        // At its time it goes again, and its circuit never opened (4 back-pressures,
        // no failure).
        assert!(!of(&claim(&store, asked, 100).await, "busy").is_empty());
    }
);

// A host's circuit opens when failures spread over most of the subscribers it served
// in the endpoint window (here three of four endpoint circuits open), not before.
store_case!(
    failures_spread_over_most_subscribers_open_the_host_circuit,
    async |store: SharedStore| {
        for id in ["a", "b", "c", "d"] {
            on_host(&store, id).await;
            jobs_due(&store, id, 5, at(-100)).await;
        }
        let claimed = claim(&store, at(0), 100).await;
        assert_eq!(claimed.len(), 20);
        answer(&store, of(&claimed, "d")[0], 200, at(100)).await;
        for (n, id) in ["a", "b", "c"].into_iter().enumerate() {
            for job in of(&claimed, id) {
                time_out(&store, job, at(5_000)).await;
            }
            let host = store
                .get_destination(HOST, at(5_000))
                .await
                .unwrap()
                .unwrap();
            let want = if n < 2 {
                CircuitState::Closed
            } else {
                CircuitState::Open
            };
            assert_eq!(host.circuit.state, want, "after {} endpoints opened", n + 1);
        }
        let host = store
            .get_destination(HOST, at(5_000))
            .await
            .unwrap()
            .unwrap();
        let error = host.last_error.expect("the evidence is recorded");
        assert_eq!(error.class, ErrorClass::Timeout);
        let reason = error.reason.unwrap_or_default();
        assert!(reason.contains("3 of the 4 subscribers"), "{reason}");
        assert_eq!(
            waits(&store, "d", at(5_100)).await,
            Some(WaitingReason::DestinationCircuitOpen)
        );
    }
);

// Endpoints failing from the start keep probing after the host's healthy subscriber
// went quiet: their failed probes are no new evidence, so the host's circuit stays
// closed although, in the last window, only they had results (issue #33's on-call run).
store_case!(
    failed_probes_of_failing_endpoints_never_open_the_host_circuit,
    async |store: SharedStore| {
        for id in ["a", "b", "ok"] {
            on_host(&store, id).await;
        }
        jobs_due(&store, "a", 5, at(-100)).await;
        jobs_due(&store, "b", 5, at(-100)).await;
        jobs_due(&store, "ok", 1, at(-100)).await;
        let claimed = claim(&store, at(0), 100).await;
        assert_eq!(claimed.len(), 11);
        answer(&store, of(&claimed, "ok")[0], 200, at(100)).await;
        for id in ["a", "b"] {
            for job in of(&claimed, id) {
                time_out(&store, job, at(5_000)).await;
            }
        }
        let closed = |store: SharedStore, now| async move {
            let host = store.get_destination(HOST, now).await.unwrap().unwrap();
            host.circuit.state == CircuitState::Closed
        };
        assert!(closed(store.clone(), at(5_000)).await, "2 of 3 served");
        // A minute later: ok's result is out of the window; a's and b's probes fail.
        let probes = claim(&store, at(70_000), 100).await;
        assert_eq!((of(&probes, "a").len(), of(&probes, "b").len()), (1, 1));
        for job in &probes {
            time_out(&store, job, at(75_000)).await;
        }
        assert_eq!(
            waits(&store, "a", at(75_000)).await,
            Some(WaitingReason::SubscriberCircuitOpen)
        );
        assert!(closed(store.clone(), at(75_000)).await, "no new evidence");
        jobs_due(&store, "ok", 1, at(75_000)).await;
        let next = claim(&store, at(75_000), 100).await;
        assert_eq!(of(&next, "ok").len(), 1, "the healthy one goes at once");
    }
);

// When the host's circuit is half-open, its one probe goes to a subscriber whose own
// results are healthy, though another's due jobs are older.
store_case!(
    the_hosts_probe_goes_to_a_healthy_subscriber,
    async |store: SharedStore| {
        on_host(&store, "flaky").await;
        on_host(&store, "ok").await;
        jobs_due(&store, "flaky", 5, at(-1_000)).await;
        jobs_due(&store, "ok", 2, at(-500)).await;
        let claimed = claim(&store, at(0), 100).await;
        let (flaky, ok) = (of(&claimed, "flaky"), of(&claimed, "ok"));
        answer(&store, flaky[0], 500, at(10)).await;
        answer(&store, ok[0], 200, at(10)).await;
        for job in &flaky[1..] {
            refuse(&store, job, at(20)).await;
        }
        refuse(&store, ok[1], at(30)).await;
        let host = store.get_destination(HOST, at(30)).await.unwrap().unwrap();
        assert_eq!(host.circuit.state, CircuitState::Open);
        let probe = claim(&store, at(5_030), 100).await;
        assert_eq!(probe.len(), 1);
        assert_eq!(
            probe[0].subscriber_id, "ok",
            "flaky's jobs are older but it failed"
        );
    }
);

/// Sets [`HOST`]'s limit to `n`.
async fn limit(store: &SharedStore, n: u32) {
    let put = DestinationPut {
        max_in_flight: Some(Some(n)),
        ..DestinationPut::default()
    };
    store.put_destination(HOST, put, at(0)).await.unwrap();
}

/// Subscribers `slow` and `quick` on [`HOST`], limited to 4 places, each with one job
/// claimed at 0; quick's is answered at 20 ms (a quick endpoint uses the host). Returns
/// the claim.
async fn slow_and_quick_on_a_host_of_4(store: &SharedStore) -> Vec<ClaimedJob> {
    on_host(store, "slow").await;
    on_host(store, "quick").await;
    limit(store, 4).await;
    jobs_due(store, "slow", 1, at(-100)).await;
    jobs_due(store, "quick", 1, at(-100)).await;
    let first = claim(store, at(0), 100).await;
    assert_eq!(first.len(), 2);
    answer(store, of(&first, "quick")[0], 200, at(20)).await;
    first
}

// While a quick endpoint uses the host, long-running endpoints together hold at most
// half of its places: the quick one's due jobs find the rest free. Without a quick one
// there, a long-running endpoint may use all of them.
store_case!(
    long_running_endpoints_hold_at_most_half_the_places,
    async |store: SharedStore| {
        let first = slow_and_quick_on_a_host_of_4(&store).await;
        // 5 s for an answer: slow is long-running from now on.
        answer(&store, of(&first, "slow")[0], 200, at(5_000)).await;

        jobs_due(&store, "slow", 10, at(5_000)).await;
        let slow = claim(&store, at(6_000), 100).await;
        assert_eq!((slow.len(), of(&slow, "slow").len()), (2, 2), "half of 4");
        assert!(claim(&store, at(6_001), 100).await.is_empty());
        // Nothing to take until an attempt ends: the worker is not woken "now" for the
        // capped work (it spun every 10 ms before), but at the next lease's end.
        let wake = store.next_wake_at(at(6_001)).await.unwrap();
        assert!(wake.is_some_and(|t| t > at(6_001)), "{wake:?}");
        jobs_due(&store, "quick", 3, at(6_002)).await;
        let quick = claim(&store, at(6_003), 100).await;
        assert_eq!((quick.len(), of(&quick, "quick").len()), (2, 2));

        // Alone on a host of its own, a long-running endpoint uses every place.
        let lone = SubscriberPut {
            url: "https://lone.example.test/".into(),
            max_in_flight: Some(100),
            ..subscriber_put("lone")
        };
        store.put_subscriber(lone, at(0)).await.unwrap();
        let four = DestinationPut {
            max_in_flight: Some(Some(4)),
            ..DestinationPut::default()
        };
        store
            .put_destination("lone.example.test:443", four, at(0))
            .await
            .unwrap();
        jobs_due(&store, "lone", 1, at(6_000)).await;
        let once = claim(&store, at(6_004), 100).await;
        answer(&store, &once[0], 200, at(9_000)).await;
        jobs_due(&store, "lone", 6, at(9_000)).await;
        assert_eq!(claim(&store, at(9_010), 100).await.len(), 4);
    }
);

// Issue #33: a new slow endpoint counted as quick until its first result (a timeout,
// 5 s on) and took every place of its shared host meanwhile. The worker notes an
// attempt still open after `--long-attempt-ms`: from that note the endpoint holds at
// most the long-running share, before any result.
store_case!(
    an_attempt_open_past_the_long_attempt_time_caps_its_endpoint_before_any_result,
    async |store: SharedStore| {
        let first = slow_and_quick_on_a_host_of_4(&store).await;
        // slow's attempt is still open 1 s in: no result yet, only the worker's note.
        let open = lease(of(&first, "slow")[0]);
        store.note_long_attempt(open, at(1_000)).await.unwrap();
        jobs_due(&store, "slow", 5, at(100)).await;
        let slow = claim(&store, at(1_500), 100).await;
        assert_eq!(
            (slow.len(), of(&slow, "slow").len()),
            (1, 1),
            "half of 4, one of them open already (without the note: 3)"
        );
        assert!(claim(&store, at(1_501), 100).await.is_empty());
        let wake = store.next_wake_at(at(1_501)).await.unwrap();
        assert!(wake.is_some_and(|t| t > at(1_501)), "{wake:?}");
        jobs_due(&store, "quick", 3, at(1_502)).await;
        let quick = claim(&store, at(1_503), 100).await;
        assert_eq!((quick.len(), of(&quick, "quick").len()), (2, 2));
    }
);

// A note is fenced by its attempt's lease: one that arrives after the attempt's
// outcome (quick's), or after its subscriber was deleted and the id registered again
// (a new endpoint, judged by its own results), marks nothing, and is no error.
store_case!(
    a_note_after_its_attempt_ended_marks_nothing,
    async |store: SharedStore| {
        let first = slow_and_quick_on_a_host_of_4(&store).await;
        let (old_slow, quick) = (of(&first, "slow")[0], of(&first, "quick")[0]);
        store.delete_subscriber("slow", at(500)).await.unwrap();
        on_host(&store, "slow").await;
        store
            .note_long_attempt(lease(old_slow), at(1_000))
            .await
            .unwrap();
        store
            .note_long_attempt(lease(quick), at(1_000))
            .await
            .unwrap();
        jobs_due(&store, "slow", 5, at(1_000)).await;
        let again = claim(&store, at(1_100), 100).await;
        assert_eq!(
            (again.len(), of(&again, "slow").len()),
            (4, 4),
            "the new slow is no long-running endpoint: every place (marked: 2)"
        );
        jobs_due(&store, "quick", 4, at(1_100)).await;
        for job in &again {
            answer(&store, job, 200, at(1_150)).await;
        }
        let next = claim(&store, at(1_200), 100).await;
        assert_eq!(
            (next.len(), of(&next, "quick").len()),
            (4, 3),
            "levels 1 (slow's last, quick's first), 2, 3: quick is no long-running \
             endpoint (marked, it would hold at most 2 and 3 would go)"
        );
    }
);

// Within a destination's room, places go first to the subscribers holding fewest: one
// that already holds two places waits while another holds none (a round-robin by
// count would have split them).
store_case!(
    scarce_places_go_to_the_subscriber_holding_fewest,
    async |store: SharedStore| {
        on_host(&store, "busy").await;
        on_host(&store, "idle").await;
        limit(&store, 4).await;
        jobs_due(&store, "busy", 2, at(-200)).await;
        assert_eq!(claim(&store, at(0), 100).await.len(), 2);
        jobs_due(&store, "busy", 5, at(-100)).await;
        jobs_due(&store, "idle", 5, at(0)).await;
        let next = claim(&store, at(10), 100).await;
        assert_eq!(next.len(), 2);
        assert_eq!(
            of(&next, "idle").len(),
            2,
            "busy's jobs are older, but it holds 2"
        );
    }
);

// A claim reads only the jobs that can be placed: with as many subscribers able to
// take a job as the destination has room, their next jobs' levels bound what it takes
// (issue #33's fan-outs: each subscriber's first due job only). The places are the
// same as a full ranking gives: the lowest levels, then the oldest.
store_case!(
    a_claim_places_by_level_when_the_room_bounds_it,
    async |store: SharedStore| {
        for id in ["a", "b", "c"] {
            on_host(&store, id).await;
        }
        limit(&store, 5).await;
        jobs_due(&store, "c", 2, at(-300)).await;
        assert_eq!(claim(&store, at(0), 100).await.len(), 2, "c holds 2");
        jobs_due(&store, "a", 4, at(-200)).await;
        jobs_due(&store, "b", 4, at(-100)).await;
        jobs_due(&store, "c", 4, at(-400)).await;
        let next = claim(&store, at(10), 100).await;
        let held = |id| of(&next, id).len();
        assert_eq!(
            (next.len(), held("a"), held("b"), held("c")),
            (3, 2, 1, 0),
            "levels 1, 1, 2 (a's older); c's oldest jobs are at level 3"
        );
    }
);

// What the retry advice reads (issue #33): the endpoint's timeouts in a row and the
// attempt timeout they hit. Three timeouts and no answer between make it
// timeout-bound; one answer ends it.
store_case!(
    three_timeouts_in_a_row_make_an_endpoint_timeout_bound,
    async |store: SharedStore| {
        on_host(&store, "slow").await;
        jobs_due(&store, "slow", 4, at(-100)).await;
        let claimed = claim(&store, at(0), 100).await;
        assert_eq!(claimed.len(), 4);
        let recent = async |now| {
            let load = store.subscriber_load("slow", now).await.unwrap().unwrap();
            load.recent
        };
        assert_eq!(recent(at(0)).await.timeout_bound(), None, "no result yet");
        for job in &claimed[..2] {
            time_out(&store, job, at(5_000)).await;
        }
        assert_eq!(recent(at(5_000)).await.timeout_bound(), None, "two: a blip");
        time_out(&store, &claimed[2], at(5_000)).await;
        let bound = recent(at(5_000)).await.timeout_bound().expect("bound");
        // The support's outcomes record a 10 s attempt timeout.
        assert_eq!((bound.attempts, bound.timeout_ms), (3, 10_000));
        answer(&store, &claimed[3], 200, at(5_000)).await;
        let after = recent(at(5_000)).await;
        assert_eq!(after.consecutive_timeouts, 0, "an answer resets the run");
        assert_eq!(after.timeout_bound(), None);
    }
);

// A replay is the operator saying the receiver recovered: the subscriber's open
// endpoint circuit ends its cool-down there, so the first replayed job is the probe at
// once rather than after the cool-down (issue #33's on-call replay ran at a third of
// its rate behind 100 open circuits).
store_case!(
    a_replay_cuts_the_endpoints_cool_down_short,
    async |store: SharedStore| {
        on_host(&store, "s").await;
        jobs_due(&store, "s", 5, at(-100)).await;
        for job in &claim(&store, at(0), 100).await {
            let result = failed(
                AttemptOutcome::Terminal,
                ErrorClass::Http5xx,
                Some(500),
                "500",
                None,
            );
            let event = JobEvent::TerminalFailure {
                reason: deferhook::domain::DeadReason::MaxAttempts,
            };
            let record = outcome(job, event, result, at(5_000));
            store.record_outcomes(&[record], at(5_000)).await.unwrap();
        }
        assert_eq!(
            waits(&store, "s", at(5_000)).await,
            Some(WaitingReason::SubscriberCircuitOpen)
        );
        let filter = deferhook::domain::replay::ReplayFilter {
            subscriber_id: Some("s".to_owned()),
            ..Default::default()
        };
        let replay = deferhook::store::NewReplay {
            id: uuid::Uuid::now_v7(),
            filter,
            max_jobs: 100,
            rate_per_second: 100,
            ttl_ms: 3_600_000,
            rate_budget: 10_000,
            created_at: at(6_000),
        };
        let created = store.create_replay(replay).await.unwrap();
        assert_eq!(created.matched, 5);
        store.advance_replays(at(6_000)).await.unwrap();
        let probe = claim(&store, at(6_000), 100).await;
        assert_eq!(probe.len(), 1, "the probe at once, not at 10 s");
        answer(&store, &probe[0], 200, at(6_050)).await;
        store.advance_replays(at(6_100)).await.unwrap();
        let rest = claim(&store, at(6_100), 100).await;
        assert_eq!(rest.len(), 4, "closed: the other four go");
    }
);

// A deleted subscriber's endpoint breaker goes with it: the id registered again is a
// new endpoint, not held by the old one's open circuit.
store_case!(
    a_deleted_subscribers_endpoint_circuit_goes_with_it,
    async |store: SharedStore| {
        on_host(&store, "s").await;
        jobs_due(&store, "s", 5, at(-100)).await;
        for job in &claim(&store, at(0), 100).await {
            time_out(&store, job, at(5_000)).await;
        }
        assert_eq!(
            waits(&store, "s", at(5_000)).await,
            Some(WaitingReason::SubscriberCircuitOpen)
        );
        store.delete_subscriber("s", at(6_000)).await.unwrap();
        on_host(&store, "s").await;
        jobs_due(&store, "s", 1, at(6_000)).await;
        assert_eq!(waits(&store, "s", at(6_000)).await, None);
        assert_eq!(claim(&store, at(6_000), 100).await.len(), 1);
    }
);
