//! Destinations, for both backends (docs/DESIGN.md §15): the row they read, assigning a
//! subscriber to its destination, what a claim may take from each destination with due
//! work, an operator's change, and the circuit breaker fed by attempt results.
//!
//! A destination's row holds the operator's settings and its [`Circuit`]; the requests
//! open to it are the jobs `in_flight` under a live lease whose `destination` (written
//! by the claim from the subscriber's URL of that moment) is its key.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use url::Url;

use crate::domain::Timestamp;
use crate::domain::circuit::{
    AttemptRef, Circuit, CircuitPolicy, CircuitState, HostVerdict, Probe,
};
use crate::domain::destination::Destination;
use crate::domain::destination_state::{
    Admission, DestinationPolicy, DestinationState, long_running_room,
};
use crate::domain::endpoint::EndpointPolicy;
use crate::domain::policy::ErrorClass;
use crate::domain::waiting::WaitingReason;
use crate::store::StoreError;
use crate::store::decode;
use crate::store::dialect::{Query, Value};
use crate::store::records::{
    CircuitView, DestinationError, DestinationPut, DestinationView, OutcomeRecord, PageRequest,
};
use crate::store::transactions::Transactions;

crate::store::lite_rows::row! {
    /// The columns of `destinations`, as every statement here selects them (or as
    /// a JSON object of them).
    #[derive(Clone, Debug, serde::Deserialize)]
    pub struct DestinationRow {
        key: String,
        max_in_flight: Option<i64>,
        paused: bool,
        forced_circuit: Option<String>,
        circuit: String,
        failures: i64,
        cooldown_ms: i64,
        opened_at: Option<i64>,
        retry_at: Option<i64>,
        probe_job_id: Option<String>,
        probe_token: Option<i64>,
        changed_at: Option<i64>,
        last_error_at: Option<i64>,
        last_error_class: Option<String>,
        last_error_status: Option<i64>,
        last_error_reason: Option<String>,
        created_at: i64,
        updated_at: i64,
    }
}

crate::store::lite_rows::row! {
    /// A destination with its open requests (and, for views, its subscribers).
    pub struct CountedRow {
        #[sqlx(flatten)]
        row: DestinationRow,
        in_flight: i64,
        subscribers: i64,
    }
}

crate::store::lite_rows::row! {
    /// A destination of a job in an outcome batch (or a JSON object of its columns).
    #[derive(serde::Deserialize)]
    pub struct JobDestinationRow {
        job_id: String,
        #[sqlx(flatten)]
        #[serde(flatten)]
        row: DestinationRow,
    }
}

impl DestinationRow {
    /// The operator's settings and the breaker.
    pub fn state(&self) -> Result<DestinationState, StoreError> {
        let probe = match (&self.probe_job_id, self.probe_token) {
            (Some(job_id), Some(token)) => Some(Probe {
                job_id: job_id.clone(),
                token,
            }),
            _ => None,
        };
        Ok(DestinationState {
            max_in_flight: decode::opt_num("max_in_flight", self.max_in_flight)?,
            paused: self.paused,
            forced: decode::opt_named("forced_circuit", self.forced_circuit.as_deref())?,
            circuit: Circuit {
                state: decode::named("circuit", &self.circuit)?,
                failures: decode::num("failures", self.failures)?,
                cooldown_ms: decode::num("cooldown_ms", self.cooldown_ms)?,
                opened_at: decode::opt_ts(self.opened_at),
                retry_at: decode::opt_ts(self.retry_at),
                probe,
                changed_at: decode::opt_ts(self.changed_at),
            },
        })
    }

    fn last_error(&self) -> Result<Option<DestinationError>, StoreError> {
        let (Some(at), Some(class)) = (self.last_error_at, &self.last_error_class) else {
            return Ok(None);
        };
        Ok(Some(DestinationError {
            at: Timestamp::from_millis(at),
            class: decode::named("last_error_class", class)?,
            status: decode::opt_num("last_error_status", self.last_error_status)?,
            reason: self.last_error_reason.clone(),
        }))
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl CountedRow {
    /// The view at `now` under `policy`.
    pub(crate) fn view(
        &self,
        now: Timestamp,
        policy: &DestinationPolicy,
    ) -> Result<DestinationView, StoreError> {
        let row = &self.row;
        let state = row.state()?;
        Ok(DestinationView {
            key: row.key.clone(),
            subscribers: decode::count(self.subscribers),
            in_flight: decode::count(self.in_flight),
            max_in_flight: state.limit(policy),
            max_in_flight_set: state.max_in_flight.is_some(),
            paused: state.paused,
            circuit: CircuitView {
                state: state.circuit.shown(state.forced, now),
                forced: state.forced,
                consecutive_failures: state.circuit.failures,
                opened_at: state.circuit.opened_at,
                retry_at: state.circuit.retry_at,
                cooldown_ms: state.circuit.cooldown_ms,
            },
            last_error: row.last_error()?,
            created_at: Timestamp::from_millis(row.created_at),
            updated_at: Timestamp::from_millis(row.updated_at),
        })
    }

    /// What a claim may take at `now` (see [`DestinationState::admission`]).
    pub fn admission(
        &self,
        now: Timestamp,
        policy: &DestinationPolicy,
    ) -> Result<Admission, StoreError> {
        let in_flight = u32::try_from(self.in_flight.max(0)).unwrap_or(u32::MAX);
        Ok(self.row.state()?.admission(in_flight, now, policy))
    }

    /// The key.
    pub fn key(&self) -> &str {
        self.row.key()
    }
}

/// The statements of destinations, in the backend's dialect.
pub(crate) trait DestinationStatements: Transactions {
    /// Creates destination `$1` at `$2` unless it exists.
    const ENSURE: &'static str;
    /// Sets subscriber `$1`'s destination to `$2`.
    const ASSIGN: &'static str;
    /// Subscribers without a destination (`id`, `url`), at most 1,000 in id order:
    /// written before destinations, or by an instance of an older version (never a
    /// deleted subscriber's tombstone, which has none).
    const UNASSIGNED: &'static str;
    /// Sets the destination of the jobs in flight that have none (from their
    /// subscriber's).
    const ASSIGN_IN_FLIGHT: &'static str;
    /// Destination `$1` ([`CountedRow`], requests open at `$2`).
    const VIEW: &'static str;
    /// Destinations after key `$1` in key order, at most `$2` ([`CountedRow`], requests
    /// open at `$3`).
    const LIST: &'static str;
    /// Destination `$1` ([`DestinationRow`]), held for this transaction (PostgreSQL:
    /// `FOR NO KEY UPDATE`).
    const HOLD: &'static str;
    /// The destinations of the jobs of batch `$1` (a JSON array of ids), as
    /// ([`JobDestinationRow`]), read without holding them.
    const OF_JOBS: &'static str;
    /// Destinations `$1` (a JSON array of keys) in key order ([`DestinationRow`]), held
    /// for this transaction.
    const HOLD_ALL: &'static str;
    /// Writes destination `$1`'s settings and breaker: `max_in_flight` `$2`, `paused`
    /// `$3`, `forced_circuit` `$4`, `circuit` `$5`, `failures` `$6`, `cooldown_ms` `$7`,
    /// `opened_at` `$8`, `retry_at` `$9`, `probe_job_id` `$10`, `probe_token` `$11`,
    /// `last_error_at` `$12`, `last_error_class` `$13`, `last_error_status` `$14`,
    /// `last_error_reason` `$15`, `updated_at` `$16`, `changed_at` `$17`.
    const WRITE: &'static str;
    /// Of destination `$1`'s enabled subscribers with an endpoint result since `$2` or
    /// work due at `$3` (waiting or in flight): how many (`served`) and how many of
    /// them have their endpoint circuit open (`failing`).
    const SPREAD: &'static str;
}

/// Assigns subscriber `id` with `url` to its destination in `tx` at `now`, creating
/// the destination when it is new.
pub(crate) async fn assign<S: DestinationStatements>(
    tx: &mut S::Tx,
    id: &str,
    url: &str,
    now: Timestamp,
) -> Result<(), StoreError> {
    let key = destination_of(url)?;
    S::execute(
        tx,
        Query::new(S::ENSURE)
            .text(key.as_str())
            .int(now.as_millis()),
    )
    .await?;
    S::execute(tx, Query::new(S::ASSIGN).text(id).text(key.as_str())).await?;
    Ok(())
}

fn destination_of(url: &str) -> Result<Destination, StoreError> {
    Url::parse(url)
        .ok()
        .as_ref()
        .and_then(Destination::of_url)
        .ok_or_else(|| StoreError::Internal(format!("subscriber URL without host:port: {url}")))
}

/// Gives every subscriber stored before destinations existed its destination, and the
/// jobs in flight theirs, in write transactions of 1,000 subscribers at `now`; returns
/// how many subscribers it assigned.
pub(crate) async fn backfill<S: DestinationStatements>(
    db: &S,
    now: Timestamp,
) -> Result<usize, StoreError> {
    let mut total = 0;
    loop {
        let assigned = db
            .transaction(move |tx| Box::pin(assign_missing::<S>(tx, now)))
            .await?;
        total += assigned;
        if assigned < UNASSIGNED_BATCH {
            return Ok(total);
        }
    }
}

/// Most subscribers [`DestinationStatements::UNASSIGNED`] returns.
const UNASSIGNED_BATCH: usize = 1_000;

/// In `tx` at `now`, gives each subscriber without a destination its own (one written
/// by an instance of a version before destinations, during a rolling upgrade) and the
/// jobs in flight theirs; returns how many subscribers it assigned. A claim runs it
/// first, so no subscriber's work waits for a restart: with none missing it costs one
/// index read.
pub(crate) async fn assign_missing<S: DestinationStatements>(
    tx: &mut S::Tx,
    now: Timestamp,
) -> Result<usize, StoreError> {
    let unassigned: Vec<(String, String)> = S::fetch_all(tx, Query::new(S::UNASSIGNED)).await?;
    if unassigned.is_empty() {
        return Ok(0);
    }
    for (id, url) in &unassigned {
        assign::<S>(tx, id, url, now).await?;
    }
    S::execute(tx, Query::new(S::ASSIGN_IN_FLIGHT)).await?;
    Ok(unassigned.len())
}

/// Destination `key` at `now`, or `None`.
pub(crate) async fn get<S: DestinationStatements>(
    db: &S,
    key: &str,
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<Option<DestinationView>, StoreError> {
    let query = Query::new(S::VIEW).text(key).int(now.as_millis());
    let row: Option<CountedRow> = db.read_optional(query).await?;
    row.map(|row| row.view(now, policy)).transpose()
}

/// Destinations in key order after `page.after`, at `now`.
pub(crate) async fn list<S: DestinationStatements>(
    db: &S,
    page: PageRequest<String>,
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<Vec<DestinationView>, StoreError> {
    let query = Query::new(S::LIST)
        .text(page.after.unwrap_or_default())
        .int(i64::from(page.limit))
        .int(now.as_millis());
    let rows: Vec<CountedRow> = db.read_all(query).await?;
    rows.iter().map(|row| row.view(now, policy)).collect()
}

/// Applies `put` to destination `key` at `now` (see
/// [`crate::store::Store::put_destination`]). The view is read in the change's own
/// transaction, so a change that committed always has its answer (a read after the
/// commit could fail and turn a change made into a 503, issue #34's second probe).
pub(crate) async fn put<S: DestinationStatements>(
    db: &S,
    key: &str,
    put: DestinationPut,
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<Option<DestinationView>, StoreError> {
    let held = key.to_owned();
    let policy = *policy;
    let changed = db
        .transaction(move |tx| Box::pin(put_in::<S>(tx, held, put, now, policy)))
        .await?;
    let Some((state, view)) = changed else {
        return Ok(None);
    };
    tracing::info!(
        destination = key,
        max_in_flight = state.max_in_flight,
        paused = state.paused,
        forced_circuit = state.forced.map(|f| f.as_str()),
        "destination changed by an operator"
    );
    Ok(view)
}

/// [`put`]'s write in `tx`: the destination's new state and its view as written
/// (`None` if the row went missing, which the hold rules out), `None` when it does not
/// exist.
async fn put_in<S: DestinationStatements>(
    tx: &mut S::Tx,
    key: String,
    put: DestinationPut,
    now: Timestamp,
    policy: DestinationPolicy,
) -> Result<Option<(DestinationState, Option<DestinationView>)>, StoreError> {
    let row: Option<DestinationRow> =
        S::fetch_optional(tx, Query::new(S::HOLD).text(key.clone())).await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let mut state = row.state()?;
    if let Some(limit) = put.max_in_flight {
        state.max_in_flight = limit;
    }
    if let Some(paused) = put.paused {
        state.paused = paused;
    }
    if let Some(forced) = put.circuit {
        state.forced = forced;
        if forced.is_none() {
            state.circuit = Circuit::closed_at(now);
        }
    }
    write::<S>(tx, &row, &state, now).await?;
    // Its due jobs may go now: every instance's worker claims (PostgreSQL `NOTIFY`).
    S::announce(tx).await?;
    let query = Query::new(S::VIEW).text(key).int(now.as_millis());
    let counted: Option<CountedRow> = S::fetch_optional(tx, query).await?;
    let view = counted.map(|row| row.view(now, &policy)).transpose()?;
    Ok(Some((state, view)))
}

/// Writes `state` over `row` (keeping its last error) at `now`.
async fn write<S: DestinationStatements>(
    tx: &mut S::Tx,
    row: &DestinationRow,
    state: &DestinationState,
    now: Timestamp,
) -> Result<(), StoreError> {
    let circuit = &state.circuit;
    let query = Query::new(S::WRITE)
        .text(row.key.as_str())
        .bind(Value::OptInt(state.max_in_flight.map(i64::from)))
        .bind(Value::Bool(state.paused))
        .bind(Value::OptText(state.forced.map(|f| f.as_str().to_owned())))
        .text(circuit.state.as_str())
        .int(i64::from(circuit.failures))
        .int(i64::try_from(circuit.cooldown_ms).unwrap_or(i64::MAX))
        .bind(Value::OptInt(circuit.opened_at.map(Timestamp::as_millis)))
        .bind(Value::OptInt(circuit.retry_at.map(Timestamp::as_millis)))
        .bind(Value::OptText(
            circuit.probe.as_ref().map(|p| p.job_id.clone()),
        ))
        .bind(Value::OptInt(circuit.probe.as_ref().map(|p| p.token)))
        .bind(Value::OptInt(row.last_error_at))
        .bind(Value::OptText(row.last_error_class.clone()))
        .bind(Value::OptInt(row.last_error_status))
        .bind(Value::OptText(row.last_error_reason.clone()))
        .int(now.as_millis())
        .bind(Value::OptInt(circuit.changed_at.map(Timestamp::as_millis)));
    S::execute(tx, query).await?;
    Ok(())
}

/// Records that a claim in `tx` sent `probe` (lease until `lease_until`) to the
/// destination of `row`: its circuit is half-open until the probe's result.
pub(crate) async fn start_probe<S: DestinationStatements>(
    tx: &mut S::Tx,
    row: &DestinationRow,
    probe: Probe,
    lease_until: Timestamp,
    now: Timestamp,
) -> Result<(), StoreError> {
    let mut state = row.state()?;
    tracing::info!(
        destination = row.key.as_str(),
        job_id = probe.job_id.as_str(),
        "circuit half-open: one probe sent"
    );
    state.circuit.probing(probe, lease_until);
    write::<S>(tx, row, &state, now).await
}

/// One attempt's result as the breaker reads it (`verdict` `None`: it reached no host).
struct Verdict<'a> {
    job_id: String,
    verdict: Option<HostVerdict>,
    record: &'a OutcomeRecord,
}

/// Feeds the results of `records` to their destinations' breakers in `tx` at `now`
/// (after their transitions were applied, and after their endpoint breakers, of which
/// those of the subscribers `opened` just opened). Results that change no breaker cost
/// one read; the destinations that change are then held (in key order) and written.
///
/// A destination where an endpoint breaker opened from closed is judged by the spread
/// of its failures: when at least two of the subscribers it served in the endpoint
/// window, and at least three quarters of them, have their endpoint circuit open, the
/// host itself is taken to be unwell and its circuit opens ([`Circuit::trip`]). Only a
/// fresh opening asks (a failed probe does not): endpoints failing from the start keep
/// probing after the host's healthy subscribers went quiet, and must not then look like
/// most of the host.
pub(crate) async fn record_results<S: DestinationStatements>(
    tx: &mut S::Tx,
    records: &[OutcomeRecord],
    of_jobs: Option<Vec<JobDestinationRow>>,
    opened: &BTreeSet<String>,
    now: Timestamp,
    policy: &CircuitPolicy,
    endpoint: &EndpointPolicy,
) -> Result<(), StoreError> {
    let verdicts: Vec<Verdict> = records
        .iter()
        .map(|record| Verdict {
            job_id: record.lease.job_id.to_string(),
            verdict: HostVerdict::of(record.result.error_class, record.result.status),
            record,
        })
        .collect();
    if verdicts.is_empty() {
        return Ok(());
    }
    let rows = match of_jobs {
        Some(rows) => rows,
        None => {
            let ids = json_array(verdicts.iter().map(|v| v.job_id.as_str()))?;
            S::fetch_all(tx, Query::new(S::OF_JOBS).text(ids)).await?
        }
    };
    let keys: HashMap<&str, &str> = rows
        .iter()
        .map(|r| (r.job_id.as_str(), r.row.key.as_str()))
        .collect();
    let trips = spread_trips::<S>(tx, &verdicts, &keys, opened, now, endpoint).await?;
    let seen: HashMap<&str, &DestinationRow> =
        rows.iter().map(|r| (r.row.key.as_str(), &r.row)).collect();
    let changed = apply(&verdicts, &keys, &seen, &trips, now, policy)?;
    if changed.is_empty() {
        return Ok(());
    }
    // Read again, held: another instance may have changed them meanwhile.
    let held_keys = json_array(changed.keys().copied())?;
    let held: Vec<DestinationRow> =
        S::fetch_all(tx, Query::new(S::HOLD_ALL).text(held_keys)).await?;
    let fresh: HashMap<&str, &DestinationRow> = held.iter().map(|r| (r.key.as_str(), r)).collect();
    for (key, (state, last_error)) in apply(&verdicts, &keys, &fresh, &trips, now, policy)? {
        let Some(row) = fresh.get(key) else {
            continue;
        };
        let mut row = (*row).clone();
        if let Some(error) = last_error {
            row.last_error_at = Some(error.at.as_millis());
            row.last_error_class = Some(error.class.as_str().to_owned());
            row.last_error_status = error.status.map(i64::from);
            row.last_error_reason = error.reason;
        }
        log_transition(key, &row.state()?.circuit, &state.circuit);
        write::<S>(tx, &row, &state, now).await?;
    }
    Ok(())
}

/// The destinations (of `keys`, by job) where a subscriber's endpoint breaker just
/// opened and whose failures are spread over most of the subscribers they served in
/// the endpoint window, each with the failure to record as its last error.
async fn spread_trips<'k, S: DestinationStatements>(
    tx: &mut S::Tx,
    verdicts: &[Verdict<'_>],
    keys: &HashMap<&str, &'k str>,
    opened: &BTreeSet<String>,
    now: Timestamp,
    endpoint: &EndpointPolicy,
) -> Result<BTreeMap<&'k str, DestinationError>, StoreError> {
    let mut candidates: BTreeMap<&'k str, &OutcomeRecord> = BTreeMap::new();
    for verdict in verdicts {
        if !opened.contains(&verdict.record.subscriber_id) {
            continue;
        }
        if let Some(&key) = keys.get(verdict.job_id.as_str()) {
            candidates.insert(key, verdict.record);
        }
    }
    let since = now.minus_ms(endpoint.window_ms);
    let mut trips = BTreeMap::new();
    for (key, record) in candidates {
        let query = Query::new(S::SPREAD)
            .text(key)
            .int(since.as_millis())
            .int(now.as_millis());
        let (served, failing): (i64, i64) = S::fetch_one(tx, query).await?;
        if failing < 2 || failing * 4 < served * 3 {
            continue;
        }
        let result = &record.result;
        trips.insert(
            key,
            DestinationError {
                at: record.finished_at,
                class: result.error_class.unwrap_or(ErrorClass::Http5xx),
                status: result.status,
                reason: Some(format!(
                    "failures spread over {failing} of the {served} subscribers served in the \
                     last {} s",
                    endpoint.window_ms / 1000
                )),
            },
        );
    }
    Ok(trips)
}

/// Logs a circuit opening (a warning: a host is down) or closing.
fn log_transition(key: &str, before: &Circuit, after: &Circuit) {
    match (before.state, after.state) {
        (CircuitState::Closed | CircuitState::HalfOpen, CircuitState::Open) => {
            tracing::warn!(
                destination = key,
                consecutive_failures = after.failures,
                cooldown_ms = after.cooldown_ms,
                "circuit opened: the destination's jobs wait until a probe succeeds"
            );
        }
        (CircuitState::HalfOpen | CircuitState::Open, CircuitState::Closed) => {
            tracing::info!(destination = key, "circuit closed: the probe succeeded");
        }
        _ => {}
    }
}

/// The destinations whose breaker (or last error) `verdicts` and `trips` change, from
/// `rows`.
fn apply<'k>(
    verdicts: &[Verdict],
    keys: &HashMap<&str, &'k str>,
    rows: &HashMap<&str, &DestinationRow>,
    trips: &BTreeMap<&'k str, DestinationError>,
    now: Timestamp,
    policy: &CircuitPolicy,
) -> Result<BTreeMap<&'k str, (DestinationState, Option<DestinationError>)>, StoreError> {
    let mut states: BTreeMap<&'k str, (DestinationState, Option<DestinationError>, bool)> =
        BTreeMap::new();
    for verdict in verdicts {
        let Some(&key) = keys.get(verdict.job_id.as_str()) else {
            continue;
        };
        let Some(row) = rows.get(key) else {
            continue;
        };
        if !states.contains_key(key) {
            states.insert(key, (row.state()?, None, false));
        }
        let entry = states.get_mut(key).expect("inserted above");
        let attempt = AttemptRef {
            job_id: verdict.job_id.as_str(),
            token: verdict.record.lease.token,
            started_at: verdict.record.started_at,
        };
        let changed = entry
            .0
            .circuit
            .record(verdict.verdict, attempt, now, policy);
        entry.2 |= changed;
        let reopened = changed && entry.0.circuit.state == CircuitState::Open;
        if reopened || verdict.verdict == Some(HostVerdict::Unwell) {
            let result = &verdict.record.result;
            entry.1 = Some(DestinationError {
                at: verdict.record.finished_at,
                class: result.error_class.unwrap_or(ErrorClass::Http5xx),
                status: result.status,
                reason: result.reason.clone(),
            });
            entry.2 = true;
        }
    }
    for (&key, error) in trips {
        let Some(row) = rows.get(key) else {
            continue;
        };
        if !states.contains_key(key) {
            states.insert(key, (row.state()?, None, false));
        }
        let entry = states.get_mut(key).expect("inserted above");
        if entry.0.circuit.trip(now, policy) {
            entry.1 = Some(error.clone());
            entry.2 = true;
        }
    }
    Ok(states
        .into_iter()
        .filter(|(_, (_, _, changed))| *changed)
        .map(|(key, (state, error, _))| (key, (state, error)))
        .collect())
}

/// `items` as a JSON array of strings.
pub(crate) fn json_array<'a>(items: impl Iterator<Item = &'a str>) -> Result<String, StoreError> {
    serde_json::to_string(&items.collect::<Vec<_>>())
        .map_err(|e| StoreError::Internal(e.to_string()))
}

/// Why destination `row` holds its due work back at `now`, if it does, with when the
/// hold ends by itself when that is known (an open circuit's cool-down).
pub(crate) fn hold_until(
    row: &CountedRow,
    now: Timestamp,
    policy: &DestinationPolicy,
) -> Result<Option<(WaitingReason, Option<Timestamp>)>, StoreError> {
    Ok(match row.admission(now, policy)? {
        Admission::Held(reason, until) => Some((reason, until)),
        Admission::Take(_) | Admission::Probe => None,
    })
}

crate::store::lite_rows::row! {
    /// A destination with due work, as a claim (and the next wake-up) reads it: its
    /// [`CountedRow`], and what the time-fair share needs (docs/DESIGN.md §15.2): the
    /// requests open to it for long-running endpoints, and whether a quick endpoint had a
    /// result there within the endpoint window.
    pub struct LoadedRow {
        #[sqlx(flatten)]
        counted: CountedRow,
        long_in_flight: i64,
        quick_active: bool,
    }
}

/// What a claim may take from one destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Opening {
    /// The destination.
    pub key: String,
    /// How many jobs (a probe takes 1).
    pub room: u32,
    /// Of those, how many may go to long-running endpoints.
    pub long_room: u32,
    /// The one job is its circuit's probe.
    pub probe: bool,
}

/// The admissions of destinations with due work at `now`: each one's key and what a
/// claim may take, and the earliest instant a held one lets work go by itself (a
/// cool-down ending).
pub(crate) struct Admissions {
    /// The destinations that let work go.
    pub open: Vec<Opening>,
    /// The earliest end of a cool-down among the held.
    pub next_change: Option<Timestamp>,
}

impl Admissions {
    /// Reads `rows` at `now`.
    pub fn of(
        rows: &[LoadedRow],
        now: Timestamp,
        policy: &DestinationPolicy,
    ) -> Result<Admissions, StoreError> {
        let mut admissions = Admissions {
            open: Vec::new(),
            next_change: None,
        };
        for loaded in rows {
            let row = &loaded.counted;
            let (room, probe) = match row.admission(now, policy)? {
                Admission::Take(n) => (n, false),
                Admission::Probe => (1, true),
                Admission::Held(_, until) => {
                    admissions.next_change = admissions.next_change.into_iter().chain(until).min();
                    continue;
                }
            };
            let limit = row.row.state()?.limit(policy);
            let long_in_flight = u32::try_from(loaded.long_in_flight.max(0)).unwrap_or(u32::MAX);
            let long_room = long_running_room(limit, long_in_flight, loaded.quick_active);
            admissions.open.push(Opening {
                key: row.key().to_owned(),
                room,
                long_room: long_room.min(room),
                probe,
            });
        }
        Ok(admissions)
    }

    /// The rows (from `rows`) of the destinations whose next claim sends a probe.
    pub fn probes<'r>(&self, rows: &'r [LoadedRow]) -> HashMap<&'r str, &'r DestinationRow> {
        let probing: Vec<&str> = self
            .open
            .iter()
            .filter(|open| open.probe)
            .map(|open| open.key.as_str())
            .collect();
        rows.iter()
            .filter(|row| probing.contains(&row.counted.key()))
            .map(|row| (row.counted.key(), &row.counted.row))
            .collect()
    }

    /// The open destinations as a JSON object `{key: [room, long_room]}` (SQLite's
    /// `json_each`).
    pub fn json_object(&self) -> Result<String, StoreError> {
        let map: serde_json::Map<String, serde_json::Value> = self
            .open
            .iter()
            .map(|open| {
                (
                    open.key.clone(),
                    serde_json::json!([open.room, open.long_room]),
                )
            })
            .collect();
        serde_json::to_string(&map).map_err(|e| StoreError::Internal(e.to_string()))
    }
}
