//! Creating jobs, for both backends: requests are group-committed (one transaction
//! for the requests that arrive while a write runs), each request all or nothing on its
//! own, and every transaction takes its row locks in key order.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use crate::domain::payload::same_json_value;
use crate::store::dialect::inserts::{
    INSERT_CHUNK, JobInsert, forget_payload, insert_new_jobs, insert_payload, payload_body,
};
use crate::store::dialect::{Query, Value};
use crate::store::group_commit::{GroupCommit, GroupLimits, GroupResults, same_kind};
use crate::store::jobs::StoredJobRow;
use crate::store::records::{CreateOutcome, Job, NewJob};
use crate::store::transactions::Transactions;
use crate::store::{StoreError, Wake};

/// The subscribers a group's requests name that exist, each with whether it is
/// enabled.
pub type KnownSubscribers = HashMap<String, bool>;

/// Most jobs one group commit of creates writes (a larger request is written alone).
pub const MAX_CREATE_GROUP: usize = 1_000;

/// One create request's outcomes.
pub type Created = Vec<CreateOutcome>;

/// The order to write `jobs` in: by (subscriber_id, event_id), whatever the request
/// order, so concurrent batches lock rows in the same order and cannot deadlock.
fn key_order(jobs: &[NewJob]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        (&jobs[a].subscriber_id, &jobs[a].event_id)
            .cmp(&(&jobs[b].subscriber_id, &jobs[b].event_id))
    });
    order
}

/// The order to write a group's requests in: by each one's smallest key, so that
/// concurrent groups (other instances) mostly take row locks in the same order.
fn request_order(requests: &[Vec<NewJob>]) -> Vec<usize> {
    fn first_key(jobs: &[NewJob]) -> Option<(&str, &str)> {
        jobs.iter()
            .map(|j| (j.subscriber_id.as_str(), j.event_id.as_str()))
            .min()
    }
    let mut order: Vec<usize> = (0..requests.len()).collect();
    order.sort_by(|&a, &b| first_key(&requests[a]).cmp(&first_key(&requests[b])));
    order
}

/// The distinct subscriber ids a group's requests name, sorted.
fn subscriber_ids(requests: &[Vec<NewJob>]) -> Vec<&str> {
    let ids: BTreeSet<&str> = requests
        .iter()
        .flatten()
        .map(|j| j.subscriber_id.as_str())
        .collect();
    ids.into_iter().collect()
}

/// The error for a request naming a subscriber that is not in `known` (the first such
/// id in sorted order), if any.
fn unknown_subscriber(jobs: &[NewJob], known: &KnownSubscribers) -> Option<StoreError> {
    jobs.iter()
        .map(|j| j.subscriber_id.as_str())
        .filter(|id| !known.contains_key(*id))
        .min()
        .map(|id| StoreError::UnknownSubscriber(id.to_owned()))
}

/// Whether a request needs a savepoint of its own inside a group: only one of several
/// jobs can fail after writing (a payload conflict on a later job); a lone job that
/// conflicts has written nothing.
fn needs_savepoint(jobs: &[NewJob]) -> bool {
    jobs.len() > 1
}

/// The statements of a group's transaction, in the backend's dialect.
pub(crate) trait CreateStatements: Transactions {
    /// Inserts job `$1` (subscriber `$2`, event `$3`, payload `$4`, `max_attempts`
    /// `$5`, due at `$6`, deadline `$7`, created at `$8`, event type `$9`, schedule
    /// `$10`, shared payload `$11`) as `scheduled`, unless its key exists.
    const INSERT: &'static str;
    /// The job of key (`$1`, `$2`) with its own payload text and its shared payload's
    /// id ([`StoredJobRow`]).
    const FIND: &'static str;

    /// Which of `ids` (sorted) name existing subscribers, each with whether it is
    /// enabled; each row is held until `tx` ends as the backend needs, so a subscriber
    /// cannot vanish before the jobs that name it commit.
    fn known_subscribers(
        tx: &mut Self::Tx,
        ids: &[&str],
    ) -> impl Future<Output = Result<KnownSubscribers, StoreError>> + Send;

    /// Writes lone jobs `jobs` (at most [`INSERT_CHUNK`], in key order) in one
    /// statement that commits on its own, where the backend gains by it (PostgreSQL:
    /// one round trip instead of `BEGIN`, four statements and `COMMIT`): their known
    /// subscribers held as [`Self::known_subscribers`] holds them, the jobs of known
    /// subscribers inserted unless their key exists, and the workers told when one
    /// was. `None`: the backend writes them in a group's transaction (SQLite, whose
    /// batch writer already shares one commit among all waiting writes).
    fn write_lone(
        &self,
        jobs: &[&NewJob],
    ) -> impl Future<Output = Option<Result<LoneWritten, StoreError>>> + Send {
        let _ = jobs;
        async { None }
    }
}

/// What [`CreateStatements::write_lone`] wrote.
#[derive(Debug, Default)]
pub(crate) struct LoneWritten {
    /// The subscribers named that exist, each with whether it is enabled.
    pub known: KnownSubscribers,
    /// The ids of the jobs inserted.
    pub inserted: HashSet<String>,
}

/// Inserts `jobs` (at most [`INSERT_CHUNK`]) in one statement (see
/// [`insert_new_jobs`]), skipping those whose key exists; returns the ids inserted.
async fn insert_new<S: CreateStatements>(
    tx: &mut S::Tx,
    jobs: &[JobInsert<'_>],
) -> Result<HashSet<String>, StoreError> {
    let query = Query::from(insert_new_jobs(S::DIALECT, jobs));
    let ids: Vec<(String,)> = S::fetch_all(tx, query).await?;
    Ok(ids.into_iter().map(|(id,)| id).collect())
}

/// Inserts `insert` unless its key exists, and reads the job of its key back: whether
/// it was inserted, and the stored job with its payload's place.
async fn insert_one<S: CreateStatements>(
    tx: &mut S::Tx,
    insert: JobInsert<'_>,
) -> Result<(bool, StoredJobRow), StoreError> {
    let job = insert.job;
    let own_payload = match insert.payload_id {
        Some(_) => String::new(),
        None => job.payload.to_string(),
    };
    let insert = Query::new(S::INSERT)
        .text(job.id.to_string())
        .text(&job.subscriber_id)
        .text(&job.event_id)
        .text(own_payload)
        .bind(Value::OptInt(job.max_attempts.map(i64::from)))
        .int(job.deliver_at.as_millis())
        .int(job.deadline.as_millis())
        .int(job.created_at.as_millis())
        .bind(Value::OptText(job.event_type.clone()))
        .bind(Value::OptText(job.schedule_id.clone()))
        .bind(Value::OptText(insert.payload_id.map(str::to_owned)));
    let inserted = S::execute(tx, insert).await? == 1;
    let find = Query::new(S::FIND)
        .text(&job.subscriber_id)
        .text(&job.event_id);
    Ok((inserted, S::fetch_one(tx, find).await?))
}

/// Writes each request of a group inside the group's open transaction, as if one
/// after the other: first the lone jobs of existing subscribers, all in one multi-row
/// insert (per [`INSERT_CHUNK`]); then, in [`request_order`], the rest: a request
/// naming an unknown subscriber (not in `known`) writes nothing; a lone job whose key
/// exists is a repeat or a conflict; a multi-job request is written inside its own
/// savepoint and rolled back to it on a conflict. Any other error fails the whole
/// group (the caller drops the transaction). Results are in the order of `requests`.
async fn write_requests<S: CreateStatements>(
    tx: &mut S::Tx,
    requests: &[Vec<NewJob>],
    known: &KnownSubscribers,
) -> Result<GroupResults<Created>, StoreError> {
    let mut results: Vec<Option<Result<Created, StoreError>>> =
        requests.iter().map(|_| None).collect();
    let order = request_order(requests);
    let lone: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| requests[i].len() == 1 && unknown_subscriber(&requests[i], known).is_none())
        .collect();
    for chunk in lone.chunks(INSERT_CHUNK) {
        let jobs: Vec<JobInsert<'_>> = chunk
            .iter()
            .map(|&i| JobInsert {
                job: &requests[i][0],
                payload_id: None,
            })
            .collect();
        let inserted = insert_new::<S>(tx, &jobs).await?;
        for (&index, job) in chunk.iter().zip(jobs.iter().map(|j| j.job)) {
            if inserted.contains(&job.id.to_string()) {
                let enabled = known.get(&job.subscriber_id).copied().unwrap_or(true);
                results[index] = Some(Ok(vec![CreateOutcome::Created(Job::scheduled(
                    job, enabled,
                ))]));
            }
        }
    }
    for index in order {
        if results[index].is_some() {
            continue;
        }
        let jobs = &requests[index];
        if let Some(unknown) = unknown_subscriber(jobs, known) {
            results[index] = Some(Err(unknown));
            continue;
        }
        let savepoint = needs_savepoint(jobs);
        if savepoint {
            S::execute(tx, Query::new("SAVEPOINT request")).await?;
        }
        let result = match write_request::<S>(tx, jobs, known, OtherPayload::Refuse).await {
            Ok(outcomes) => Ok(outcomes),
            Err(conflict @ StoreError::PayloadConflict { .. }) => Err(conflict),
            Err(other) => return Err(other),
        };
        if savepoint {
            if result.is_err() {
                S::execute(tx, Query::new("ROLLBACK TO SAVEPOINT request")).await?;
            }
            S::execute(tx, Query::new("RELEASE SAVEPOINT request")).await?;
        }
        results[index] = Some(result);
    }
    Ok(results.into_iter().flatten().collect())
}

/// What a write makes of a job whose key exists with another payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OtherPayload {
    /// A [`StoreError::PayloadConflict`]: the request is refused (a posted job).
    Refuse,
    /// The stored job counts as the new one's (a schedule's period made before its
    /// payload changed).
    Keep,
}

/// Writes the jobs of one period of a schedule inside `tx`, as one request (see
/// [`write_request`]), the jobs of subscribers not in `known` left out: a job whose
/// key exists counts as the period's, whatever its payload. Outcomes in the order of
/// the jobs written.
pub(crate) async fn write_period_jobs<S: CreateStatements>(
    tx: &mut S::Tx,
    jobs: &[NewJob],
    known: &KnownSubscribers,
) -> Result<Created, StoreError> {
    let jobs: Vec<NewJob> = jobs
        .iter()
        .filter(|job| known.contains_key(&job.subscriber_id))
        .cloned()
        .collect();
    write_request::<S>(tx, &jobs, known, OtherPayload::Keep).await
}

/// The distinct subscriber ids of one request's jobs, sorted.
pub(crate) fn request_subscribers(jobs: &[NewJob]) -> Vec<&str> {
    let ids: BTreeSet<&str> = jobs.iter().map(|j| j.subscriber_id.as_str()).collect();
    ids.into_iter().collect()
}

/// Writes one request's jobs in key order: the payloads several of them carry once
/// each (see [`SharedPayloads`]), then all the jobs in multi-row inserts (per
/// [`INSERT_CHUNK`]), then, one by one, those whose key already existed (a repeat, or
/// a job of another payload, which `other` decides). A shared payload no job was
/// written with (every job a repeat) is deleted again. Outcomes in request order.
async fn write_request<S: CreateStatements>(
    tx: &mut S::Tx,
    jobs: &[NewJob],
    known: &KnownSubscribers,
    other: OtherPayload,
) -> Result<Created, StoreError> {
    let order = key_order(jobs);
    let shared = SharedPayloads::of(jobs, &order);
    for (id, job) in shared.first_carriers(jobs) {
        let insert = insert_payload(S::DIALECT, id, &job.payload, job.created_at.as_millis());
        S::execute(tx, Query::from(insert)).await?;
    }
    let insert_of = |index: usize| JobInsert {
        job: &jobs[index],
        payload_id: shared.id_of(&jobs[index]),
    };
    let mut used: HashSet<&str> = HashSet::new();
    let mut outcomes: Vec<Option<CreateOutcome>> = vec![None; jobs.len()];
    for chunk in order.chunks(INSERT_CHUNK) {
        let batch: Vec<JobInsert<'_>> = chunk.iter().map(|&i| insert_of(i)).collect();
        let inserted = insert_new::<S>(tx, &batch).await?;
        for (&index, insert) in chunk.iter().zip(batch) {
            let job = insert.job;
            if inserted.contains(&job.id.to_string()) {
                used.extend(insert.payload_id);
                let enabled = known.get(&job.subscriber_id).copied().unwrap_or(true);
                outcomes[index] = Some(CreateOutcome::Created(Job::scheduled(job, enabled)));
            }
        }
    }
    let mut stored_payloads = StoredPayloads::default();
    for index in order {
        if outcomes[index].is_none() {
            let insert = insert_of(index);
            let (inserted, stored) = insert_one::<S>(tx, insert).await?;
            let outcome = if inserted {
                used.extend(insert.payload_id);
                CreateOutcome::Created(stored.job.try_into()?)
            } else {
                let same = stored_payloads
                    .same::<S>(tx, &stored, insert.job, other)
                    .await?;
                repeat(stored.job.try_into()?, same, insert.job)?
            };
            outcomes[index] = Some(outcome);
        }
    }
    for id in shared.ids().filter(|id| !used.contains(id)) {
        S::execute(tx, Query::from(forget_payload(S::DIALECT, id))).await?;
    }
    in_request_order(outcomes)
}

/// The payloads that two or more jobs of one request carry (the same shared text, as a
/// fan-out's or a schedule period's jobs do), each stored once in `payloads` under the
/// id of the first job (in key order) that carries it; a job ids are fresh, so is the
/// payload's. A payload carried by one job stays in that job's row.
struct SharedPayloads {
    /// The payload's address in memory → its id.
    ids: HashMap<usize, String>,
}

impl SharedPayloads {
    /// The shared payloads of `jobs`, named in key `order`.
    fn of(jobs: &[NewJob], order: &[usize]) -> Self {
        let address = |job: &NewJob| Arc::as_ptr(&job.payload).cast::<u8>() as usize;
        let mut carriers: HashMap<usize, usize> = HashMap::new();
        for job in jobs {
            *carriers.entry(address(job)).or_default() += 1;
        }
        let mut ids = HashMap::new();
        for &index in order {
            let at = address(&jobs[index]);
            if carriers.get(&at).copied().unwrap_or(0) > 1 {
                ids.entry(at).or_insert_with(|| jobs[index].id.to_string());
            }
        }
        SharedPayloads { ids }
    }

    /// The shared payload `job` references, if any.
    fn id_of(&self, job: &NewJob) -> Option<&str> {
        let at = Arc::as_ptr(&job.payload).cast::<u8>() as usize;
        self.ids.get(&at).map(String::as_str)
    }

    /// Each shared payload's id with a job that carries it.
    fn first_carriers<'a>(&'a self, jobs: &'a [NewJob]) -> Vec<(&'a str, &'a NewJob)> {
        let mut seen = HashSet::new();
        let mut first: Vec<(&str, &NewJob)> = jobs
            .iter()
            .filter_map(|job| self.id_of(job).map(|id| (id, job)))
            .filter(|(id, _)| seen.insert(*id))
            .collect();
        first.sort_by(|a, b| a.0.cmp(b.0));
        first
    }

    /// Every shared payload's id.
    fn ids(&self) -> impl Iterator<Item = &str> {
        self.ids.values().map(String::as_str)
    }
}

/// Whether stored jobs' payloads equal new ones, for repeats: a stored job's own
/// payload is compared as it comes; a shared one is read once per request (a repeated
/// fan-out of 10,000 jobs reads its stored payload once, not 10,000 times).
#[derive(Default)]
struct StoredPayloads {
    /// (stored payload id, new payload's address) → the same JSON value.
    compared: HashMap<(String, usize), bool>,
}

impl StoredPayloads {
    /// Whether `stored`'s payload counts as `new`'s: the same JSON value, or any
    /// payload when `other` keeps it.
    async fn same<S: CreateStatements>(
        &mut self,
        tx: &mut S::Tx,
        stored: &StoredJobRow,
        new: &NewJob,
        other: OtherPayload,
    ) -> Result<bool, StoreError> {
        if other == OtherPayload::Keep {
            return Ok(true);
        }
        let Some(id) = &stored.payload_id else {
            return Ok(same_json_value(&stored.payload, &new.payload));
        };
        let key = (id.clone(), Arc::as_ptr(&new.payload).cast::<u8>() as usize);
        if let Some(&same) = self.compared.get(&key) {
            return Ok(same);
        }
        let (body,): (String,) =
            S::fetch_one(tx, Query::from(payload_body(S::DIALECT, id))).await?;
        let same = same_json_value(&body, &new.payload);
        self.compared.insert(key, same);
        Ok(same)
    }
}

/// Writes a group of create requests in one transaction (one fsync): each request is
/// all or nothing on its own (a savepoint around a multi-job request), and a request
/// that fails (unknown subscriber, payload conflict) leaves the others written. An
/// error of the database itself fails the whole group (see [`alone_on_failure`]).
/// When it created a job, the workers of every instance are told (see
/// [`Transactions::announce`]).
async fn create_group<S: CreateStatements>(
    db: &S,
    requests: Arc<Vec<Vec<NewJob>>>,
) -> Result<GroupResults<Created>, StoreError> {
    db.transaction(move |tx| {
        Box::pin(async move {
            let known = S::known_subscribers(tx, &subscriber_ids(&requests)).await?;
            let results = write_requests::<S>(tx, &requests, &known).await?;
            if created(&results).next().is_some() {
                S::announce(tx).await?;
            }
            Ok(results)
        })
    })
    .await
}

/// The jobs `results` created.
fn created(results: &GroupResults<Created>) -> impl Iterator<Item = &Job> {
    results
        .iter()
        .flatten()
        .flatten()
        .filter_map(|outcome| match outcome {
            CreateOutcome::Created(job) => Some(job),
            CreateOutcome::Existing { .. } => None,
        })
}

/// Starts the group commit of `db`'s creates: groups of at most
/// [`MAX_CREATE_GROUP`] jobs, `parallel` of them written at once, each written with
/// [`write_in_key_order`]. Once a group has committed, `wake` learns each created
/// job's due time (so this instance's worker claims it in time).
pub(crate) fn spawn<S: CreateStatements>(
    db: S,
    parallel: usize,
    wake: Arc<Wake>,
) -> GroupCommit<Vec<NewJob>, Created> {
    let limits = GroupLimits {
        max_weight: MAX_CREATE_GROUP,
        parallel,
    };
    GroupCommit::spawn(limits, Vec::len, move |requests| {
        let (db, wake) = (db.clone(), wake.clone());
        async move {
            let results = write_in_key_order(requests, &db).await;
            for job in created(&results) {
                wake.job_due_at(job.deliver_at);
            }
            results
        }
    })
}

/// Writes a group of create requests so that every transaction takes its row locks in
/// ascending key order, and concurrent transactions (other groups, other instances)
/// cannot deadlock: the lone-job requests together in one transaction (one multi-row
/// insert in key order), and each multi-job request in its own (its jobs in key
/// order). Mixing them let one group hold a lone key while waiting for a key of a
/// multi-job request that another group held the other way round. Results in the
/// order of `requests`.
async fn write_in_key_order<S: CreateStatements>(
    requests: Vec<Vec<NewJob>>,
    db: &S,
) -> GroupResults<Created> {
    let count = requests.len();
    let (mut lone, mut lone_at) = (Vec::new(), Vec::new());
    let mut results: Vec<Option<Result<Created, StoreError>>> = (0..count).map(|_| None).collect();
    let mut several = Vec::new();
    for (index, request) in requests.into_iter().enumerate() {
        if request.len() == 1 {
            lone.push(request);
            lone_at.push(index);
        } else {
            several.push((index, request));
        }
    }
    if !lone.is_empty() {
        for (index, result) in lone_at.into_iter().zip(write_lone(lone, db).await) {
            results[index] = Some(result);
        }
    }
    for (index, request) in several {
        results[index] = alone_on_failure(vec![request], db).await.pop();
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(StoreError::Internal("a create without a result".into()))))
        .collect()
}

/// Writes lone-job requests: first in one statement each chunk where the backend can
/// ([`CreateStatements::write_lone`]), which answers a request whose subscriber is
/// unknown or whose job it inserted; the rest (a key that existed: a repeat or a
/// conflict; or every request, when that statement failed or the backend has none) in
/// a group's transaction ([`alone_on_failure`]). Results in the order of `requests`.
async fn write_lone<S: CreateStatements>(
    requests: Vec<Vec<NewJob>>,
    db: &S,
) -> GroupResults<Created> {
    let mut results: Vec<Option<Result<Created, StoreError>>> =
        requests.iter().map(|_| None).collect();
    let mut order: Vec<usize> = (0..requests.len()).collect();
    order.sort_by(|&a, &b| {
        let key = |i: usize| (&requests[i][0].subscriber_id, &requests[i][0].event_id);
        key(a).cmp(&key(b))
    });
    for chunk in order.chunks(INSERT_CHUNK) {
        let jobs: Vec<&NewJob> = chunk.iter().map(|&i| &requests[i][0]).collect();
        let written = match db.write_lone(&jobs).await {
            Some(Ok(written)) => written,
            Some(Err(error)) => {
                tracing::debug!(%error, jobs = jobs.len(),
                    "a one-statement create failed; writing its jobs in a transaction");
                continue;
            }
            None => continue,
        };
        for (&index, job) in chunk.iter().zip(jobs) {
            let result =
                match written.known.get(&job.subscriber_id) {
                    None => Some(Err(StoreError::UnknownSubscriber(
                        job.subscriber_id.clone(),
                    ))),
                    Some(&enabled) if written.inserted.contains(&job.id.to_string()) => Some(Ok(
                        vec![CreateOutcome::Created(Job::scheduled(job, enabled))],
                    )),
                    Some(_) => None,
                };
            results[index] = result;
        }
    }
    let (rest_at, rest): (Vec<usize>, Vec<Vec<NewJob>>) = requests
        .into_iter()
        .enumerate()
        .filter(|(index, _)| results[*index].is_none())
        .unzip();
    if !rest.is_empty() {
        for (index, result) in rest_at.into_iter().zip(alone_on_failure(rest, db).await) {
            results[index] = Some(result);
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(StoreError::Internal("a create without a result".into()))))
        .collect()
}

/// Writes a group of create requests with `store` (one transaction for all);
/// when that fails as a whole, writes each request alone, so one request's failure
/// (or a deadlock between instances) never fails the others. Once a lone write finds
/// the store unavailable, the requests left get that error without trying.
async fn alone_on_failure<S: CreateStatements>(
    requests: Vec<Vec<NewJob>>,
    db: &S,
) -> GroupResults<Created> {
    let requests = Arc::new(requests);
    let error = match create_group(db, requests.clone()).await {
        Ok(results) => return results,
        Err(error) if requests.len() == 1 => return vec![Err(error)],
        Err(error) => error,
    };
    tracing::debug!(%error, requests = requests.len(),
        "a group of creates failed; writing its requests one by one");
    let mut results = Vec::with_capacity(requests.len());
    let mut unavailable: Option<StoreError> = None;
    for request in requests.chunks(1) {
        if let Some(error) = &unavailable {
            results.push(Err(same_kind(error)));
            continue;
        }
        let result = match create_group(db, Arc::new(request.to_vec())).await {
            Ok(mut alone) => alone
                .pop()
                .unwrap_or_else(|| Err(StoreError::Internal("a create without a result".into()))),
            Err(error) => Err(error),
        };
        if let Err(error) = &result
            && matches!(error, StoreError::Unavailable(_))
        {
            unavailable = Some(same_kind(error));
        }
        results.push(result);
    }
    results
}

/// The outcome for `new` when a job with its key was already `stored`: a repeat when
/// its payload counts as the same (`same`, see [`StoredPayloads::same`]); otherwise a
/// [`StoreError::PayloadConflict`], on which the caller rolls back.
fn repeat(stored: Job, same: bool, new: &NewJob) -> Result<CreateOutcome, StoreError> {
    if same {
        Ok(CreateOutcome::Existing {
            // As read when the repeat was made: an expired lease is `retrying`.
            job: stored.as_of(new.created_at),
        })
    } else {
        Err(StoreError::PayloadConflict {
            job_id: stored.id,
            subscriber_id: stored.subscriber_id,
            event_id: stored.event_id,
        })
    }
}

/// The outcomes back in request order.
fn in_request_order(
    outcomes: Vec<Option<CreateOutcome>>,
) -> Result<Vec<CreateOutcome>, StoreError> {
    outcomes
        .into_iter()
        .map(|outcome| {
            outcome.ok_or_else(|| StoreError::Internal("a job without an outcome".into()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Timestamp;

    fn new(subscriber: &str, event: &str) -> NewJob {
        NewJob {
            id: uuid::Uuid::nil(),
            subscriber_id: subscriber.into(),
            event_id: event.into(),
            payload: Arc::from("{}"),
            deliver_at: Timestamp::from_millis(0),
            deadline: Timestamp::from_millis(1),
            max_attempts: None,
            created_at: Timestamp::from_millis(0),
            event_type: None,
            schedule_id: None,
        }
    }

    #[test]
    fn batches_are_written_in_key_order() {
        let jobs = [new("b", "e"), new("a", "z"), new("a", "e")];
        assert_eq!(key_order(&jobs), [2, 1, 0]);
    }
}
