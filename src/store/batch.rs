//! Rules both stores apply when creating a batch of jobs.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::domain::payload::same_json_value;
use crate::store::StoreError;
use crate::store::group_commit::{GroupCommit, GroupLimits, GroupResults, same_kind};
use crate::store::records::{CreateOutcome, Job, NewJob};
use crate::store::rows::INSERT_CHUNK;

/// The subscribers a group's requests name that exist, each with whether it is
/// enabled.
pub type KnownSubscribers = HashMap<String, bool>;

/// Most jobs one group commit of creates writes (a larger request is written alone).
pub const MAX_CREATE_GROUP: usize = 1_000;

/// One create request's outcomes.
pub type Created = Vec<CreateOutcome>;

/// The order to write `jobs` in: by (subscriber_id, event_id), whatever the request
/// order, so concurrent batches lock rows in the same order and cannot deadlock.
pub fn key_order(jobs: &[NewJob]) -> Vec<usize> {
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
pub fn subscriber_ids(requests: &[Vec<NewJob>]) -> Vec<&str> {
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

/// The statements of one group's transaction that [`write_requests`] needs.
pub trait GroupWriter {
    /// Runs a statement without parameters (the savepoint commands).
    async fn execute(&mut self, sql: &'static str) -> Result<(), StoreError>;
    /// Inserts one request's jobs and reads them back (outcomes in request order); a
    /// repeat of a stored job with another payload is a [`StoreError::PayloadConflict`].
    async fn insert(&mut self, jobs: &[NewJob]) -> Result<Created, StoreError>;
    /// Inserts `jobs` (at most [`INSERT_CHUNK`]) in one statement (see
    /// [`crate::store::rows::insert_new_jobs`]), skipping those whose key exists;
    /// returns the ids inserted.
    async fn insert_new(&mut self, jobs: &[&NewJob]) -> Result<HashSet<String>, StoreError>;
}

/// Writes each request of a group inside the group's open transaction, as if one
/// after the other: first the lone jobs of existing subscribers, all in one multi-row
/// insert (per [`INSERT_CHUNK`]); then, in [`request_order`], the rest: a request
/// naming an unknown subscriber (not in `known`) writes nothing; a lone job whose key
/// exists is a repeat or a conflict; a multi-job request is written inside its own
/// savepoint and rolled back to it on a conflict. Any other error fails the whole
/// group (the caller drops the transaction). Results are in the order of `requests`.
pub async fn write_requests(
    group: &mut impl GroupWriter,
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
        let jobs: Vec<&NewJob> = chunk.iter().map(|&i| &requests[i][0]).collect();
        let inserted = group.insert_new(&jobs).await?;
        for (&index, job) in chunk.iter().zip(jobs) {
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
            group.execute("SAVEPOINT request").await?;
        }
        let result = match write_request(group, jobs, known).await {
            Ok(outcomes) => Ok(outcomes),
            Err(conflict @ StoreError::PayloadConflict { .. }) => Err(conflict),
            Err(other) => return Err(other),
        };
        if savepoint {
            if result.is_err() {
                group.execute("ROLLBACK TO SAVEPOINT request").await?;
            }
            group.execute("RELEASE SAVEPOINT request").await?;
        }
        results[index] = Some(result);
    }
    Ok(results.into_iter().flatten().collect())
}

/// Writes one request's jobs in key order: all of them in multi-row inserts (per
/// [`INSERT_CHUNK`]), then, one by one, those whose key already existed (a repeat, or
/// a [`StoreError::PayloadConflict`]). Outcomes in request order.
async fn write_request(
    group: &mut impl GroupWriter,
    jobs: &[NewJob],
    known: &KnownSubscribers,
) -> Result<Created, StoreError> {
    let order = key_order(jobs);
    let mut outcomes: Vec<Option<CreateOutcome>> = vec![None; jobs.len()];
    for chunk in order.chunks(INSERT_CHUNK) {
        let batch: Vec<&NewJob> = chunk.iter().map(|&i| &jobs[i]).collect();
        let inserted = group.insert_new(&batch).await?;
        for (&index, job) in chunk.iter().zip(batch) {
            if inserted.contains(&job.id.to_string()) {
                let enabled = known.get(&job.subscriber_id).copied().unwrap_or(true);
                outcomes[index] = Some(CreateOutcome::Created(Job::scheduled(job, enabled)));
            }
        }
    }
    for index in order {
        if outcomes[index].is_none() {
            let mut existing = group.insert(std::slice::from_ref(&jobs[index])).await?;
            outcomes[index] = existing.pop();
        }
    }
    in_request_order(outcomes)
}

/// A store that writes a group of create requests in one transaction (each request
/// all or nothing on its own, see [`write_requests`]).
pub trait CreateGroups: Clone + Send + Sync + 'static {
    /// Writes `requests` in one transaction; one result per request, in order.
    fn create_group(
        &self,
        requests: &[Vec<NewJob>],
    ) -> impl std::future::Future<Output = Result<GroupResults<Created>, StoreError>> + Send;
}

/// Starts the group commit of `store`'s creates: groups of at most
/// [`MAX_CREATE_GROUP`] jobs, `parallel` of them written at once, each written with
/// [`write_in_key_order`].
pub fn spawn_creates(
    store: impl CreateGroups,
    parallel: usize,
) -> GroupCommit<Vec<NewJob>, Created> {
    let limits = GroupLimits {
        max_weight: MAX_CREATE_GROUP,
        parallel,
    };
    GroupCommit::spawn(limits, Vec::len, move |requests| {
        let store = store.clone();
        async move { write_in_key_order(requests, &store).await }
    })
}

/// Writes a group of create requests so that every transaction takes its row locks in
/// ascending key order, and concurrent transactions (other groups, other instances)
/// cannot deadlock: the lone-job requests together in one transaction (one multi-row
/// insert in key order), and each multi-job request in its own (its jobs in key
/// order). Mixing them let one group hold a lone key while waiting for a key of a
/// multi-job request that another group held the other way round. Results in the
/// order of `requests`.
pub async fn write_in_key_order(
    requests: Vec<Vec<NewJob>>,
    store: &impl CreateGroups,
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
        for (index, result) in lone_at.into_iter().zip(alone_on_failure(lone, store).await) {
            results[index] = Some(result);
        }
    }
    for (index, request) in several {
        results[index] = alone_on_failure(vec![request], store).await.pop();
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
pub async fn alone_on_failure(
    requests: Vec<Vec<NewJob>>,
    store: &impl CreateGroups,
) -> GroupResults<Created> {
    let error = match store.create_group(&requests).await {
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
        let result = match store.create_group(request).await {
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

/// The outcome for `new` when a job with its key was already `stored` with
/// `stored_payload`: the same payload (as a JSON value) is a repeat; a different one a
/// [`StoreError::PayloadConflict`], on which the caller rolls back.
pub fn repeat(
    stored: Job,
    stored_payload: String,
    new: &NewJob,
) -> Result<CreateOutcome, StoreError> {
    if same_json_value(&stored_payload, &new.payload) {
        Ok(CreateOutcome::Existing {
            job: stored,
            payload: stored_payload,
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
pub fn in_request_order(
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
            payload: "{}".into(),
            deliver_at: Timestamp::from_millis(0),
            deadline: Timestamp::from_millis(1),
            max_attempts: None,
            created_at: Timestamp::from_millis(0),
        }
    }

    #[test]
    fn batches_are_written_in_key_order() {
        let jobs = [new("b", "e"), new("a", "z"), new("a", "e")];
        assert_eq!(key_order(&jobs), [2, 1, 0]);
    }
}
