use super::*;

const NOW: Timestamp = Timestamp::from_millis(1_000_000);
const POLICY: EndpointPolicy = EndpointPolicy {
    window_ms: 10_000,
    min_results: 4,
    failure_percent: 50,
    long_attempt_ms: 1_000,
};
const CIRCUIT: CircuitPolicy = CircuitPolicy {
    failure_threshold: 5,
    cooldown_ms: 1_000,
    max_cooldown_ms: 3_000,
};

/// A result of `verdict` for an attempt that started at `at` and took `took_ms`.
fn result(verdict: EndpointVerdict, at: Timestamp, took_ms: u64) -> EndpointResult {
    EndpointResult {
        verdict,
        started_at: at,
        finished_at: at.plus_ms(took_ms),
        timeout_ms: took_ms,
    }
}

const TIMEOUT: EndpointVerdict = EndpointVerdict::Failed { timeout: true };
const FAILED: EndpointVerdict = EndpointVerdict::Failed { timeout: false };

fn record(
    circuit: &mut EndpointCircuit,
    verdict: EndpointVerdict,
    at: Timestamp,
) -> EndpointChange {
    circuit.record(result(verdict, at, 10), at.plus_ms(10), &POLICY, &CIRCUIT)
}

#[test]
fn results_are_told_apart_by_what_they_say_about_the_endpoint() {
    use ErrorClass::*;
    let later = Some(NOW.plus_ms(3_000));
    let of = EndpointVerdict::of;
    assert_eq!(of(None, Some(204), None), Some(EndpointVerdict::Delivered));
    assert_eq!(of(Some(Timeout), None, None), Some(TIMEOUT));
    for status in [500, 502, 503, 504, 599] {
        assert_eq!(
            of(Some(Http5xx), Some(status), None),
            Some(FAILED),
            "{status}"
        );
    }
    assert_eq!(of(Some(Http4xx), Some(408), None), Some(FAILED));
    assert_eq!(of(Some(Http4xx), Some(425), None), Some(FAILED));
    assert_eq!(of(Some(Protocol), None, None), Some(FAILED));
    // Back-pressure: a 429 with or without a time, a 503 with one.
    assert_eq!(
        of(Some(Http429), Some(429), None),
        Some(EndpointVerdict::BackPressure(None))
    );
    assert_eq!(
        of(Some(Http429), Some(429), later),
        Some(EndpointVerdict::BackPressure(later))
    );
    assert_eq!(
        of(Some(Http5xx), Some(503), later),
        Some(EndpointVerdict::BackPressure(later))
    );
    // A 500 with Retry-After is still a failure.
    assert_eq!(of(Some(Http5xx), Some(500), later), Some(FAILED));
    for status in [301, 400, 404, 410] {
        let class = if status < 400 { Http3xx } else { Http4xx };
        assert_eq!(
            of(Some(class), Some(status), None),
            Some(EndpointVerdict::Answered)
        );
    }
    // Nothing about the endpoint: the host's failures, nothing sent, unknown.
    assert_eq!(of(Some(Connect), None, None), None);
    assert_eq!(of(Some(Blocked), None, None), None);
    assert_eq!(of(Some(SecretUnreadable), None, None), None);
    assert_eq!(of(None, None, None), None);
}

#[test]
fn the_failure_rate_opens_it_only_with_the_minimum_volume() {
    let mut circuit = EndpointCircuit::new(NOW);
    // Three failures in a row: under the minimum of four results, still closed.
    for _ in 0..3 {
        assert_eq!(record(&mut circuit, TIMEOUT, NOW), EndpointChange::None);
    }
    assert_eq!(circuit.passage(NOW), EndpointPassage::Open);
    // Four results, three failed: 75 % ≥ 50 %, but a success cannot open it.
    assert_eq!(
        record(&mut circuit, EndpointVerdict::Delivered, NOW),
        EndpointChange::None
    );
    assert!(circuit.failing(NOW, &POLICY));
    assert_eq!(record(&mut circuit, TIMEOUT, NOW), EndpointChange::Opened);
    let until = NOW.plus_ms(10 + 1_000);
    assert_eq!(
        circuit.passage(NOW.plus_ms(10)),
        EndpointPassage::Held(WaitingReason::SubscriberCircuitOpen, until)
    );
    assert_eq!(circuit.shown(NOW.plus_ms(10)), CircuitState::Open);
    assert_eq!(circuit.shown(until), CircuitState::HalfOpen);
    assert_eq!(circuit.passage(until), EndpointPassage::Probe);
    assert_eq!(circuit.window(NOW, &POLICY).timeouts, 4);
}

#[test]
fn a_low_failure_rate_never_opens_it() {
    let mut circuit = EndpointCircuit::new(NOW);
    for k in 0..100 {
        let verdict = if k % 4 == 3 {
            FAILED
        } else {
            EndpointVerdict::Delivered
        };
        assert_eq!(record(&mut circuit, verdict, NOW), EndpointChange::None);
    }
    assert_eq!(circuit.state, CircuitState::Closed);
}

#[test]
fn the_window_slides_and_old_results_fade() {
    let mut circuit = EndpointCircuit::new(NOW);
    for _ in 0..3 {
        record(&mut circuit, FAILED, NOW);
    }
    // Half a window into the next bucket, half of the previous one still counts.
    let later = NOW.plus_ms(15_000);
    let counts = circuit.window(later, &POLICY);
    assert_eq!((counts.results, counts.failures), (1, 1));
    // Two windows on, nothing is left.
    assert_eq!(
        circuit.window(NOW.plus_ms(20_000), &POLICY),
        Counts::default()
    );
    // Old failures plus one new one are not enough volume.
    assert_eq!(record(&mut circuit, FAILED, later), EndpointChange::None);
    assert_eq!(circuit.window(later, &POLICY).results, 2);
}

#[test]
fn the_probe_decides_and_earlier_attempts_count_for_nothing() {
    let mut circuit = EndpointCircuit::new(NOW);
    for _ in 0..4 {
        record(&mut circuit, FAILED, NOW);
    }
    let opened = NOW.plus_ms(10);
    assert_eq!(circuit.opened_at, Some(opened));
    let probe_at = opened.plus_ms(1_000);
    // A result of an attempt started before the cool-down ended is not the probe's.
    assert_eq!(
        record(&mut circuit, EndpointVerdict::Delivered, opened),
        EndpointChange::None
    );
    assert_eq!(circuit.state, CircuitState::Open);
    // A failed probe doubles the cool-down, up to the cap.
    assert_eq!(
        record(&mut circuit, TIMEOUT, probe_at),
        EndpointChange::Reopened
    );
    assert_eq!(circuit.cooldown_ms, 2_000);
    let next = probe_at.plus_ms(10 + 2_000);
    assert_eq!(
        record(&mut circuit, TIMEOUT, next),
        EndpointChange::Reopened
    );
    assert_eq!(circuit.cooldown_ms, 3_000);
    // An answer that is no failure (here a 404) closes it with an empty window.
    let last = next.plus_ms(10 + 3_000);
    assert_eq!(
        record(&mut circuit, EndpointVerdict::Answered, last),
        EndpointChange::Closed
    );
    assert_eq!(circuit.state, CircuitState::Closed);
    assert_eq!(circuit.window(last, &POLICY), Counts::default());
    // Results of attempts started before it closed count for nothing.
    for _ in 0..4 {
        assert_eq!(record(&mut circuit, FAILED, next), EndpointChange::None);
    }
    assert_eq!(circuit.passage(last.plus_ms(20)), EndpointPassage::Open);
}

#[test]
fn back_pressure_holds_the_subscriber_and_counts_for_nothing_else() {
    let mut circuit = EndpointCircuit::new(NOW);
    let asked = NOW.plus_ms(2_000);
    for _ in 0..10 {
        let verdict = EndpointVerdict::BackPressure(Some(asked));
        assert_eq!(record(&mut circuit, verdict, NOW), EndpointChange::None);
    }
    assert_eq!(circuit.window(NOW, &POLICY), Counts::default());
    assert_eq!(
        circuit.passage(NOW),
        EndpointPassage::Held(WaitingReason::SubscriberRetryAfter, asked)
    );
    assert_eq!(circuit.passage(asked), EndpointPassage::Open);
    // An earlier time does not shorten the hold; a far one is capped at the longest
    // cool-down.
    record(&mut circuit, EndpointVerdict::BackPressure(Some(NOW)), NOW);
    assert_eq!(circuit.hold_until, Some(asked));
    let far = NOW.plus_ms(86_400_000);
    record(&mut circuit, EndpointVerdict::BackPressure(Some(far)), NOW);
    assert_eq!(circuit.hold_until, Some(NOW.plus_ms(10 + 3_000)));
    // A 429 without a time holds nothing beyond the job's own backoff.
    let mut plain = EndpointCircuit::new(NOW);
    record(&mut plain, EndpointVerdict::BackPressure(None), NOW);
    assert_eq!(plain.passage(NOW), EndpointPassage::Open);
}

#[test]
fn the_typical_duration_tells_long_running_endpoints() {
    let mut circuit = EndpointCircuit::new(NOW);
    assert!(!circuit.long_running(&POLICY));
    let at = |ms| circuit_result(ms);
    circuit.record(at(5_000), NOW, &POLICY, &CIRCUIT);
    assert_eq!(circuit.duration_ms, Some(5_000));
    assert!(circuit.long_running(&POLICY));
    // Fast answers bring it down: (5000·3 + 20)/4 = 3755, then 2821, 2120, 1595, 1201,
    // 905.
    for _ in 0..6 {
        circuit.record(at(20), NOW, &POLICY, &CIRCUIT);
    }
    assert_eq!(circuit.duration_ms, Some(905));
    assert!(!circuit.long_running(&POLICY));
    // Back-pressure is not a measurement.
    circuit.record(
        result(EndpointVerdict::BackPressure(None), NOW, 60_000),
        NOW,
        &POLICY,
        &CIRCUIT,
    );
    assert_eq!(circuit.duration_ms, Some(905));
}

fn circuit_result(took_ms: u64) -> EndpointResult {
    result(EndpointVerdict::Delivered, NOW, took_ms)
}

#[test]
fn a_hold_reads_as_the_claim_judges_it() {
    let later = Some(NOW.plus_ms(1_000));
    let past = Some(NOW.minus_ms(1));
    let retry_after = (WaitingReason::SubscriberRetryAfter, later);
    assert_eq!(endpoint_hold(false, None, later, 0, NOW), Some(retry_after));
    assert_eq!(endpoint_hold(true, later, later, 0, NOW), Some(retry_after));
    assert_eq!(
        endpoint_hold(true, later, past, 0, NOW),
        Some((WaitingReason::SubscriberCircuitOpen, later))
    );
    // Half-open: its probe (or an older attempt) out holds it, none out lets one go.
    assert_eq!(
        endpoint_hold(true, past, None, 1, NOW),
        Some((WaitingReason::SubscriberCircuitOpen, None))
    );
    assert_eq!(endpoint_hold(true, past, None, 0, NOW), None);
    assert_eq!(endpoint_hold(false, None, past, 3, NOW), None);
}

#[test]
fn three_timeouts_in_a_row_make_an_endpoint_timeout_bound_and_probes_keep_it_so() {
    let mut circuit = EndpointCircuit::new(NOW);
    let timed_out = |at: Timestamp| result(TIMEOUT, at, 5_000);
    let recent = |circuit: &EndpointCircuit| RecentResults::of(circuit, None).timeout_bound();
    circuit.record(timed_out(NOW), NOW.plus_ms(5_000), &POLICY, &CIRCUIT);
    circuit.record(timed_out(NOW), NOW.plus_ms(5_000), &POLICY, &CIRCUIT);
    assert_eq!(recent(&circuit), None, "two may be a blip");
    assert_eq!(circuit.timeout_ms, Some(5_000));
    circuit.record(timed_out(NOW), NOW.plus_ms(5_000), &POLICY, &CIRCUIT);
    assert_eq!(
        recent(&circuit),
        Some(TimeoutBound {
            attempts: 3,
            timeout_ms: 5_000
        })
    );
    // Open now (4 of 4 failed). Its probes, minutes apart (the window long gone),
    // keep the evidence: the advice stays as it is while nothing answers.
    circuit.record(timed_out(NOW), NOW.plus_ms(5_000), &POLICY, &CIRCUIT);
    assert_eq!(circuit.state, CircuitState::Open);
    let mut probe_at = circuit.retry_at.unwrap();
    for _ in 0..4 {
        let later = probe_at.plus_ms(10 * POLICY.window_ms);
        circuit.record(timed_out(later), later.plus_ms(5_000), &POLICY, &CIRCUIT);
        probe_at = circuit.retry_at.unwrap();
    }
    assert_eq!(recent(&circuit).map(|b| b.attempts), Some(8));
    // Its own timeout raised above the one hit: the next attempt will tell.
    let raised = RecentResults::of(&circuit, Some(8_000));
    assert_eq!(raised.timeout_bound(), None);
    assert!(
        RecentResults::of(&circuit, Some(5_000))
            .timeout_bound()
            .is_some()
    );
    // One answer (here the probe's, which closes it): not bound any more.
    let answered = result(EndpointVerdict::Delivered, probe_at, 4_000);
    circuit.record(answered, probe_at.plus_ms(4_000), &POLICY, &CIRCUIT);
    assert_eq!(recent(&circuit), None);
    let mut mixed = EndpointCircuit::new(NOW);
    for verdict in [TIMEOUT, TIMEOUT, FAILED, TIMEOUT, TIMEOUT] {
        mixed.record(result(verdict, NOW, 10), NOW, &POLICY, &CIRCUIT);
    }
    assert_eq!(RecentResults::of(&mixed, None).timeout_bound(), None);
    // Back-pressure neither counts nor resets.
    let mut pressed = EndpointCircuit::new(NOW);
    for verdict in [
        TIMEOUT,
        TIMEOUT,
        EndpointVerdict::BackPressure(None),
        TIMEOUT,
    ] {
        pressed.record(result(verdict, NOW, 10), NOW, &POLICY, &CIRCUIT);
    }
    assert_eq!(pressed.consecutive_timeouts, 3);
}
