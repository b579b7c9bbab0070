//! Claims in PostgreSQL.
//!
//! The claim is one statement: it locks the due rows with `FOR UPDATE SKIP LOCKED`
//! (concurrent claims take disjoint sets without waiting), marks them `in_flight` under
//! a new fencing token, records the unknown outcome of an expired lease, inserts the
//! new attempt rows and returns the batch with each subscriber's target.

use sqlx::PgPool;

use super::destinations::{HELD_LOADS, HOLD_DUE};
use crate::domain::circuit::Probe;
use crate::domain::destination_state::DestinationPolicy;
use crate::domain::{JobState, Timestamp};
use crate::store::claims::{self, ClaimContext, LEASE_EXPIRED_REASON, MarkedRow, TargetRow};
use crate::store::destinations::{self, Admissions, LoadedRow};
use crate::store::records::{ClaimRequest, ClaimedJob};
use crate::store::{Sealer, StoreError};

/// Picks and locks (`FOR NO KEY UPDATE SKIP LOCKED`) the enabled subscribers with due
/// work and room under their limits, not held by their endpoint circuit (open, or the
/// receiver's `Retry-After`; half-open only with none of their attempts open), among
/// those of the destinations `$3` that let work go (`$4`: how many each may take, `$5`:
/// how many of those long-running endpoints may take): within each destination in the
/// order of the time-fair share (fewest open requests first, then quick before
/// long-running, healthy before failing, oldest due), never more of them than its
/// room and never more long-running ones than their room (none of theirs is read when
/// that room is 0); round-robin across
/// destinations, the destination with more room first. So a destination with an old
/// backlog and little room cannot fill a claim's `$2` places with subscribers it may
/// not use, and when places are scarce the least busy destination goes first. Holding
/// these locks, a claim's count of a subscriber's open attempts cannot race another
/// instance's claim: a subscriber locked elsewhere is skipped this time. Each
/// subscriber costs a few index probes (its oldest due job from `jobs_subscriber_due`,
/// its open leases, its endpoint circuit, and its last second of attempts only when it
/// has a rate limit), whatever the backlog.
pub(super) const LOCK_SUBSCRIBERS: &str = "\
    SELECT s.id FROM subscribers s JOIN ( \
      SELECT f.id, f.room, f.oldest, ROW_NUMBER() OVER (PARTITION BY f.destination \
        ORDER BY f.open, f.long_running, f.health, f.oldest, f.id) AS rank \
      FROM ( \
        SELECT g.*, ROW_NUMBER() OVER (PARTITION BY g.destination, g.long_running \
          ORDER BY g.open, g.health, g.oldest, g.id) AS ln \
        FROM ( \
          SELECT c.id, c.destination, a.room, a.long_room, d.oldest, o.open, \
            COALESCE(e.long_running, false) AS long_running, \
            CASE WHEN e.circuit = 'open' THEN 2 \
                 WHEN e.failures + e.previous_failures > 0 THEN 1 ELSE 0 END AS health \
          FROM subscribers c \
          JOIN UNNEST($3::text[], $4::bigint[], $5::bigint[]) AS a(destination, room, long_room) \
            ON a.destination = c.destination \
          LEFT JOIN endpoint_circuits e ON e.subscriber_id = c.id \
          CROSS JOIN LATERAL ( \
            SELECT j.due_at AS oldest FROM jobs j \
            WHERE j.subscriber_id = c.id AND j.state IN ('scheduled', 'retrying', 'in_flight') \
              AND j.due_at <= $1 AND j.deadline > $1 \
              AND NOT (j.state = 'in_flight' AND j.max_attempts IS NOT NULL \
                       AND j.attempts >= j.max_attempts) \
            ORDER BY j.due_at LIMIT 1 \
          ) d \
          CROSS JOIN LATERAL ( \
            SELECT COUNT(*) AS open FROM jobs o WHERE o.subscriber_id = c.id \
              AND o.state = 'in_flight' AND o.due_at > $1 \
          ) o \
          WHERE c.enabled AND c.max_in_flight > o.open \
            AND (NOT COALESCE(e.long_running, false) OR a.long_room > 0) \
            AND (e.hold_until IS NULL OR e.hold_until <= $1) \
            AND (e.circuit IS NULL OR e.circuit = 'closed' OR (e.retry_at <= $1 AND o.open = 0)) \
            AND CASE WHEN c.rate_limit_per_second IS NULL THEN true ELSE ( \
              SELECT c.rate_limit_per_second > COUNT(*) \
                AND (MAX(a.started_at) IS NULL OR MAX(a.started_at) <= $1 - 1000 \
                     * GREATEST(1, c.rate_limit_per_second / 10) / c.rate_limit_per_second) \
              FROM attempts a WHERE a.subscriber_id = c.id AND a.started_at > $1 - 1000) END \
        ) g \
      ) f WHERE NOT f.long_running OR f.ln <= f.long_room \
    ) p ON p.id = s.id \
    WHERE p.rank <= p.room \
    ORDER BY p.rank, p.room DESC, p.oldest, s.id LIMIT $2 \
    FOR NO KEY UPDATE OF s SKIP LOCKED";

/// Claims, among the locked subscribers `$6`, the due jobs within each one's allowance
/// (`max_in_flight` minus its live leases; for `rate_limit_per_second` r, bursts of
/// max(1, r/10) at most every max(1, r/10)/r s and never more than r in the last
/// second, as the SQLite store; nothing while its endpoint circuit holds it, one probe
/// while half-open) and within each destination's room (`$7` keys, `$8` how many each
/// may take, `$9` how many of those may go to long-running endpoints), placed by the
/// time-fair share of docs/DESIGN.md §15.2 within a destination (the lowest `open + n`
/// first, as the SQLite store) and round-robin across destinations, at most `$2`;
/// marks them in flight at their destination, records an expired lease's attempt as
/// unknown, starts the new attempts, and returns the batch with each subscriber's
/// target. A job's own payload comes with its row; a shared payload's text comes once
/// per claim, with the first of its jobs (by id), and `NULL` with the others.
///
/// `load` and `allowance` are `MATERIALIZED`: inlined, each subscriber's counts were
/// computed again for every candidate row of it (10,000 times for a claim of 100 jobs
/// over 100 subscribers, `auto_explain`), not once per subscriber.
///
/// The row it locks must still be as read (`j.state`, `j.due_at`): under READ
/// COMMITTED, PostgreSQL re-checks a row committed by another transaction after this
/// statement's snapshot against the conditions on the locked table only, so without
/// them a job cancelled (or rescheduled, or claimed) in that instant was taken anyway
/// and its cancel's 200 followed by a delivery (found by the chaos soak, seed 1802).
pub(super) const CLAIM: &str = "\
    WITH load AS MATERIALIZED ( \
      SELECT s.id, s.destination, s.max_in_flight, s.rate_limit_per_second AS rate, \
        COALESCE(e.long_running, false) AS long_running, \
        CASE WHEN e.circuit = 'open' THEN 2 \
             WHEN e.failures + e.previous_failures > 0 THEN 1 ELSE 0 END AS health, \
        COALESCE(e.circuit = 'open', false) AS probing, \
        COALESCE(e.hold_until > $1 OR (e.circuit = 'open' AND e.retry_at > $1), false) AS held, \
        (SELECT COUNT(*) FROM jobs o WHERE o.subscriber_id = s.id \
         AND o.state = 'in_flight' AND o.due_at > $1) AS open, \
        CASE WHEN s.rate_limit_per_second IS NULL THEN 0 ELSE \
        (SELECT COUNT(*) FROM attempts a WHERE a.subscriber_id = s.id \
         AND a.started_at > $1 - 1000) END AS recent, \
        CASE WHEN s.rate_limit_per_second IS NULL THEN NULL ELSE \
        (SELECT MAX(a.started_at) FROM attempts a WHERE a.subscriber_id = s.id \
         AND a.started_at > $1 - 1000) END AS last \
      FROM subscribers s LEFT JOIN endpoint_circuits e ON e.subscriber_id = s.id \
      WHERE s.id = ANY($6) \
    ), admitted AS ( \
      SELECT * FROM UNNEST($7::text[], $8::bigint[], $9::bigint[]) \
        AS a(destination, room, long_room) \
    ), allowance AS MATERIALIZED ( \
      SELECT l.id AS subscriber_id, a.destination, a.room, a.long_room, l.long_running, \
        l.health, l.open, \
        CASE WHEN l.held THEN 0 ELSE GREATEST(0, LEAST(l.max_in_flight - l.open, \
        CASE WHEN l.probing THEN 1 - l.open ELSE 2147483647 END, \
        CASE WHEN l.rate IS NULL THEN 2147483647 \
             WHEN l.last > $1 - 1000 * GREATEST(1, l.rate / 10) / l.rate THEN 0 \
             ELSE LEAST(GREATEST(1, l.rate / 10), l.rate - l.recent) END)) END AS allowed \
      FROM load l JOIN admitted a ON a.destination = l.destination \
    ), ranked AS ( \
      SELECT j.id, j.old_state, j.due_since, al.allowed, al.destination, al.room, \
        al.long_room, al.long_running, al.health, al.open, \
        ROW_NUMBER() OVER (PARTITION BY al.subscriber_id ORDER BY j.due_since, j.id) AS rn \
      FROM allowance al CROSS JOIN LATERAL ( \
        SELECT d.id, d.state AS old_state, d.due_at AS due_since FROM jobs d \
        WHERE d.subscriber_id = al.subscriber_id \
          AND d.state IN ('scheduled', 'retrying', 'in_flight') AND d.due_at <= $1 \
          AND d.deadline > $1 \
          AND NOT (d.state = 'in_flight' AND d.max_attempts IS NOT NULL \
                   AND d.attempts >= d.max_attempts) \
        ORDER BY d.due_at, d.id LIMIT LEAST(al.allowed, al.room, $2) \
      ) j \
    ), capped AS ( \
      SELECT r.*, r.open + r.rn AS level, ROW_NUMBER() OVER ( \
        PARTITION BY r.destination, r.long_running \
        ORDER BY r.open + r.rn, r.health, r.due_since, r.id) AS ln \
      FROM ranked r WHERE r.rn <= r.allowed \
    ), spread AS ( \
      SELECT c.*, ROW_NUMBER() OVER (PARTITION BY c.destination \
        ORDER BY c.level, c.long_running, c.health, c.due_since, c.id) AS dn \
      FROM capped c WHERE NOT c.long_running OR c.ln <= c.long_room \
    ), candidates AS ( \
      SELECT j.id, r.old_state, r.due_since, r.dn AS rn, r.destination \
      FROM spread r JOIN jobs j ON j.id = r.id \
      WHERE r.dn <= r.room AND j.state = r.old_state AND j.due_at = r.due_since \
      ORDER BY r.dn, r.room DESC, r.due_since, r.id LIMIT $2 \
      FOR UPDATE OF j SKIP LOCKED \
    ), claimed AS ( \
      UPDATE jobs j SET state = 'in_flight', attempts = j.attempts + 1, \
        lease_token = j.lease_token + 1, lease_owner = $3, lease_expires_at = $4, \
        due_at = $4, updated_at = $1, destination = c.destination, \
        possible_duplicate = j.possible_duplicate OR c.old_state = 'in_flight' \
      FROM candidates c WHERE j.id = c.id \
      RETURNING j.id, j.subscriber_id, j.event_id, j.payload AS own_payload, j.payload_id, \
        j.attempts, j.max_attempts, j.deadline, j.lease_token, j.possible_duplicate, \
        j.event_type, c.old_state, c.due_since, c.rn, c.destination \
    ), unknown AS ( \
      UPDATE attempts a SET outcome = 'unknown', finished_at = $1, reason = $5 \
      FROM claimed c \
      WHERE a.job_id = c.id AND c.old_state = 'in_flight' AND a.outcome = 'in_progress' \
    ), started AS ( \
      INSERT INTO attempts (job_id, number, lease_token, lease_owner, started_at, \
        outcome, possible_duplicate, subscriber_id) \
      SELECT id, attempts, lease_token, $3, $1, 'in_progress', possible_duplicate, \
        subscriber_id \
      FROM claimed \
    ) \
    SELECT c.id, c.subscriber_id, c.event_id, c.payload_id, c.attempts, c.max_attempts, \
      c.deadline, c.lease_token, c.possible_duplicate, c.event_type, c.old_state, \
      c.due_since, c.destination, \
      CASE WHEN c.payload_id IS NULL THEN c.own_payload \
           WHEN ROW_NUMBER() OVER (PARTITION BY c.payload_id ORDER BY c.id) = 1 \
           THEN (SELECT p.body FROM payloads p WHERE p.id = c.payload_id) END AS payload, \
      s.url, s.secret, s.previous_secret, s.previous_secret_expires_at, \
      s.attempt_timeout_ms \
    FROM claimed c \
    JOIN subscribers s ON s.id = c.subscriber_id ORDER BY c.rn, c.due_since, c.id";

/// A row of [`CLAIM`].
#[derive(sqlx::FromRow)]
struct ClaimedRow {
    #[sqlx(flatten)]
    job: MarkedRow,
    old_state: String,
    due_since: i64,
    destination: String,
    #[sqlx(flatten)]
    target: TargetRow,
}

/// The destinations [`HOLD_DUE`] holds at `now`, and whether a subscriber has no
/// destination yet.
async fn hold_due(tx: &mut super::Tx, now: Timestamp) -> Result<(Vec<String>, bool), StoreError> {
    let rows: Vec<(Option<String>, bool)> = sqlx::query_as(HOLD_DUE)
        .bind(now.as_millis())
        .fetch_all(&mut **tx)
        .await?;
    let unassigned = rows.iter().any(|(_, unassigned)| *unassigned);
    Ok((
        rows.into_iter().filter_map(|(key, _)| key).collect(),
        unassigned,
    ))
}

/// Claims on `pool`, whose sessions should plan generically (the store's worker pool):
/// with array parameters and many CTEs, PostgreSQL judged a custom plan cheaper on
/// every run and planned [`CLAIM`], [`LOCK_SUBSCRIBERS`] and [`HELD_LOADS`] anew each
/// time, 1.2, 0.6 and 0.2 ms of database CPU per claim (`scripts/pg-profile.sh`, one
/// sender), more than running them.
pub async fn claim(
    pool: &PgPool,
    sealer: &Sealer,
    policy: &DestinationPolicy,
    request: ClaimRequest,
) -> Result<Vec<ClaimedJob>, StoreError> {
    let now = request.now;
    let lease_until = now.plus_ms(request.lease_ms);
    let mut tx = pool.begin().await?;
    let (mut held, unassigned) = hold_due(&mut tx, now).await?;
    if unassigned {
        // A subscriber without a destination (an older version wrote it): assigned
        // before anything is held, as the claim always did, in a fresh transaction.
        tx.rollback().await?;
        tx = pool.begin().await?;
        destinations::assign_missing::<PgPool>(&mut tx, now).await?;
        held = hold_due(&mut tx, now).await?.0;
    }
    if held.is_empty() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    // A second statement: its snapshot sees every claim committed before the locks.
    let due: Vec<LoadedRow> = sqlx::query_as(HELD_LOADS)
        .bind(now.as_millis())
        .bind(&held)
        .bind(now.minus_ms(policy.endpoint.window_ms).as_millis())
        .fetch_all(&mut *tx)
        .await?;
    let admissions = Admissions::of(&due, now, policy)?;
    let keys: Vec<&str> = admissions.open.iter().map(|o| o.key.as_str()).collect();
    let rooms: Vec<i64> = admissions.open.iter().map(|o| i64::from(o.room)).collect();
    let long_rooms: Vec<i64> = admissions
        .open
        .iter()
        .map(|o| i64::from(o.long_room))
        .collect();
    if keys.is_empty() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    let subscribers: Vec<String> = sqlx::query_scalar(LOCK_SUBSCRIBERS)
        .bind(now.as_millis())
        .bind(i64::from(request.limit))
        .bind(&keys)
        .bind(&rooms)
        .bind(&long_rooms)
        .fetch_all(&mut *tx)
        .await?;
    if subscribers.is_empty() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    // A second statement: its snapshot sees every claim committed before the locks.
    let rows: Vec<ClaimedRow> = sqlx::query_as(CLAIM)
        .bind(now.as_millis())
        .bind(i64::from(request.limit))
        .bind(&request.owner)
        .bind(lease_until.as_millis())
        .bind(LEASE_EXPIRED_REASON)
        .bind(&subscribers)
        .bind(&keys)
        .bind(&rooms)
        .bind(&long_rooms)
        .fetch_all(&mut *tx)
        .await?;
    let mut probes = admissions.probes(&due);
    for row in &rows {
        if let Some(destination) = probes.remove(row.destination.as_str()) {
            let probe = Probe {
                job_id: row.job.id().to_owned(),
                token: row.job.lease_token(),
            };
            destinations::start_probe::<PgPool>(&mut tx, destination, probe, lease_until, now)
                .await?;
        }
    }
    tx.commit().await?;
    let payloads = claims::ClaimPayloads::of(rows.iter().map(|row| &row.job));
    rows.into_iter()
        .map(|row| {
            let target = row.target.open(sealer, row.job.subscriber_id(), now);
            let context = ClaimContext {
                lease_until,
                reclaimed: row.old_state == JobState::InFlight.as_str(),
                due_since: Timestamp::from_millis(row.due_since),
            };
            claims::claimed_job(row.job, target, context, &payloads)
        })
        .collect()
}
