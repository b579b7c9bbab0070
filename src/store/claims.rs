//! Claims, for both backends: the rows a claim reads back and the claimed job they
//! make. Each backend claims with its own statements (SQLite on its one writer,
//! PostgreSQL with `SKIP LOCKED`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::domain::secret::SigningSecrets;
use crate::domain::{JobSnapshot, JobState, Timestamp};
use crate::store::records::ClaimedJob;
use crate::store::{Sealer, StoreError, UnreadableSecret, decode};

/// The reason recorded on the attempt of a lease that expired (by a claim that takes
/// the job over, or by the sweep).
pub const LEASE_EXPIRED_REASON: &str = "the lease expired before a result was recorded";

crate::store::lite_rows::row! {
    /// A job just marked in flight, as the marking statement returns it.
    pub struct MarkedRow {
        id: String,
        subscriber_id: String,
        event_id: String,
        payload: Option<String>,
        payload_id: Option<String>,
        attempts: i64,
        max_attempts: Option<i64>,
        deadline: i64,
        lease_token: i64,
        possible_duplicate: bool,
        event_type: Option<String>,
    }
}

impl MarkedRow {
    /// The job's id, as stored.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its subscriber.
    pub fn subscriber_id(&self) -> &str {
        &self.subscriber_id
    }

    /// The new lease's fencing token.
    pub fn lease_token(&self) -> i64 {
        self.lease_token
    }
}

/// The payloads of one claim's jobs: a job's own payload as it comes, and each shared
/// payload (docs/DESIGN.md §3, payloads stored once) read once per claim and held in
/// one `Arc` by every job of the claim that carries it, so a claim of 400 jobs of one
/// 256 KiB fan-out holds 256 KiB, not 100 MiB.
#[derive(Default)]
pub struct ClaimPayloads {
    shared: HashMap<String, Arc<str>>,
}

impl ClaimPayloads {
    /// The shared payloads whose text `rows` carry (a row may carry its shared
    /// payload's text, e.g. the first row of each in PostgreSQL's claim).
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a MarkedRow>) -> Self {
        let mut payloads = ClaimPayloads::default();
        for row in rows {
            if let (Some(id), Some(body)) = (&row.payload_id, &row.payload) {
                payloads.add(id.clone(), body.clone());
            }
        }
        payloads
    }

    /// The ids of the shared payloads `rows` reference that are not held yet, sorted.
    pub fn missing<'a>(&self, rows: impl IntoIterator<Item = &'a MarkedRow>) -> Vec<String> {
        let ids: std::collections::BTreeSet<&String> = rows
            .into_iter()
            .filter_map(|row| row.payload_id.as_ref())
            .filter(|id| !self.shared.contains_key(*id))
            .collect();
        ids.into_iter().cloned().collect()
    }

    /// Holds shared payload `id` with text `body`.
    pub fn add(&mut self, id: String, body: String) {
        self.shared.entry(id).or_insert_with(|| Arc::from(body));
    }

    /// The payload `row` is sent with.
    fn take(&self, row: &mut MarkedRow) -> Result<Arc<str>, StoreError> {
        match (&row.payload_id, row.payload.take()) {
            (None, Some(own)) => Ok(Arc::from(own)),
            (Some(id), _) => self.shared.get(id).cloned().ok_or_else(|| {
                StoreError::Internal(format!(
                    "the shared payload {id} of job {} is missing",
                    row.id
                ))
            }),
            (None, None) => Err(StoreError::Internal(format!(
                "job {} was claimed without its payload",
                row.id
            ))),
        }
    }
}

crate::store::lite_rows::row! {
    /// Where a subscriber's jobs go and what signs them.
    pub struct TargetRow {
        url: String,
        secret: String,
        previous_secret: Option<String>,
        previous_secret_expires_at: Option<i64>,
        attempt_timeout_ms: Option<i64>,
    }
}

/// A subscriber's URL, signing secrets and own attempt timeout, read (and opened) once
/// per claim.
#[derive(Clone)]
pub struct Target {
    url: String,
    secrets: Result<SigningSecrets, UnreadableSecret>,
    attempt_timeout_ms: Option<u64>,
}

impl TargetRow {
    /// The URL, and the secrets of `subscriber_id` opened by `sealer` at `now`.
    pub fn open(self, sealer: &Sealer, subscriber_id: &str, now: Timestamp) -> Target {
        let secrets = sealer.open_secrets(
            subscriber_id,
            &self.secret,
            self.previous_secret.as_deref(),
            decode::opt_ts(self.previous_secret_expires_at),
            now,
        );
        Target {
            url: self.url,
            secrets,
            attempt_timeout_ms: self
                .attempt_timeout_ms
                .and_then(|ms| u64::try_from(ms).ok()),
        }
    }
}

/// How a job came to be claimed.
#[derive(Clone, Copy, Debug)]
pub struct ClaimContext {
    /// When the lease expires.
    pub lease_until: Timestamp,
    /// True when the claim took over an expired lease.
    pub reclaimed: bool,
    /// When the job became due.
    pub due_since: Timestamp,
}

/// The claimed job of `row`, sent to `target`, its payload from `payloads`.
pub fn claimed_job(
    mut row: MarkedRow,
    target: Target,
    context: ClaimContext,
    payloads: &ClaimPayloads,
) -> Result<ClaimedJob, StoreError> {
    let payload = payloads.take(&mut row)?;
    let attempt = u32::try_from(row.attempts)
        .map_err(|_| StoreError::Internal(format!("attempts {}", row.attempts)))?;
    let Target {
        url,
        secrets,
        attempt_timeout_ms,
    } = target;
    Ok(ClaimedJob {
        job_id: decode::uuid(&row.id)?,
        subscriber_id: row.subscriber_id,
        event_id: row.event_id,
        payload,
        event_type: row.event_type,
        url,
        secrets,
        attempt_timeout: attempt_timeout_ms.map(std::time::Duration::from_millis),
        lease_token: row.lease_token,
        lease_expires_at: context.lease_until,
        attempt,
        possible_duplicate: row.possible_duplicate,
        reclaimed_expired_lease: context.reclaimed,
        due_since: context.due_since,
        snapshot: JobSnapshot {
            state: JobState::InFlight,
            attempts: attempt,
            max_attempts: row.max_attempts.and_then(|n| u32::try_from(n).ok()),
            due_at: Some(context.lease_until),
            deadline: Timestamp::from_millis(row.deadline),
        },
    })
}
