//! What the database's errors said lately, for a backend that acts on it: when it last
//! refused a write as read-only (PostgreSQL's SQLSTATE 25006: a standby, or
//! `default_transaction_read_only`) and when it last cancelled a statement (57014:
//! `statement_timeout`, or a cancel request). [`super::StoreError`]'s conversion
//! notes them as it classifies an error; PostgreSQL's pool replaces its sessions by
//! them (`postgres::writable`, CASES C-19). Process-wide, as the sessions' defaults
//! they stand for belong to the database, not to one store.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Milliseconds from [`epoch`] to the last read-only refusal seen, plus one; 0: none.
static LAST_REFUSAL: AtomicU64 = AtomicU64::new(0);

/// Milliseconds from [`epoch`] to the last cancelled statement seen, plus one; 0: none.
static LAST_CANCEL: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn millis_since_epoch() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX - 1)
}

fn note(signal: &AtomicU64) {
    signal.store(millis_since_epoch() + 1, Ordering::Relaxed);
}

fn since(signal: &AtomicU64) -> Option<Duration> {
    match signal.load(Ordering::Relaxed) {
        0 => None,
        at => Some(Duration::from_millis(
            millis_since_epoch().saturating_sub(at - 1),
        )),
    }
}

/// Notes that the database refused a write as read-only just now.
pub fn note_refusal() {
    note(&LAST_REFUSAL);
}

/// Notes that the database cancelled a statement just now.
pub fn note_cancelled() {
    note(&LAST_CANCEL);
}

/// How long ago the last read-only refusal was seen; `None` when none was.
pub fn since_refusal() -> Option<Duration> {
    since(&LAST_REFUSAL)
}

/// How long ago the last cancelled statement was seen; `None` when none was.
pub fn since_cancel() -> Option<Duration> {
    since(&LAST_CANCEL)
}
