//! Failed credential guesses, limited per client address (docs/DESIGN.md §5.7; issue
//! #34 part 4.1). Without a limit, a client could try ~5,500 API tokens a second on
//! `/v1/*` and ~4,700 on the console's login form.
//!
//! Each client address (IPv6: its /64, [`super::connections::client_key`]) may fail
//! `--max-failed-credentials` times at once ([`BURST`] by default), and one more time
//! every [`REFILL_MS`] after that (the
//! generic cell rate algorithm: every failure adds [`REFILL_MS`] to the address's debt,
//! which time pays back). While the next failure would pass the allowance the address
//! is locked out: every request of it that presents a credential (a bearer token on
//! `/v1/*`, a console login) is answered 429 with `Retry-After` *without being
//! checked*, so a guess made then tells nothing, not even whether it was right. A
//! request without a credential is not a guess and is not counted. One budget serves
//! the API and the console, so neither doubles the other's rate. The API answers a
//! locked-out address whatever token it presents; behind a reverse proxy every client
//! shares the proxy's address, so put the limit per client in the proxy too.
//!
//! Time is injected ([`Clock`]). At most [`MAX_TRACKED`] addresses are remembered; when
//! full, those whose debt is paid are forgotten first, and then the one nearest to
//! being paid.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::domain::{Clock, Timestamp};

/// Failures an address may make at once, by default (`--max-failed-credentials`).
pub const BURST: u32 = 10;
/// After the burst, one more failure allowed every this many milliseconds (10 a
/// minute).
pub const REFILL_MS: i64 = 6_000;
/// Most addresses remembered at once.
pub const MAX_TRACKED: usize = 100_000;

/// What the limit says about an address now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its credential may be checked.
    Check,
    /// Locked out: answer 429 unchecked, with `Retry-After` of this many seconds.
    LockedOut { retry_after_s: u64 },
}

/// The failed guesses of every client address; cheap to clone (shared).
#[derive(Clone)]
pub struct Guesses {
    clock: Arc<dyn Clock>,
    /// Debt at which the next failure is no longer allowed: the burst × [`REFILL_MS`].
    allowance_ms: i64,
    /// Per address, the instant its debt is paid (the GCRA's theoretical arrival time).
    paid_at: Arc<Mutex<HashMap<IpAddr, Timestamp>>>,
}

impl std::fmt::Debug for Guesses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guesses")
    }
}

impl Guesses {
    /// No failure yet, on `clock`; `burst` failures allowed at once (at least 1).
    pub fn new(clock: Arc<dyn Clock>, burst: u32) -> Self {
        Guesses {
            clock,
            allowance_ms: i64::from(burst.max(1)) * REFILL_MS,
            paid_at: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Timestamp>> {
        self.paid_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a credential from `client` may be checked now.
    pub fn verdict(&self, client: IpAddr) -> Verdict {
        let now = self.clock.now();
        let key = super::connections::client_key(client);
        let debt = self
            .table()
            .get(&key)
            .map_or(0, |paid_at| paid_at.millis_since(now).max(0));
        if debt + REFILL_MS > self.allowance_ms {
            // The next failure fits once the debt is down to ALLOWANCE - REFILL.
            let wait_ms = debt + REFILL_MS - self.allowance_ms;
            Verdict::LockedOut {
                retry_after_s: u64::try_from(wait_ms).unwrap_or(0).div_ceil(1000).max(1),
            }
        } else {
            Verdict::Check
        }
    }

    /// Counts a failed credential from `client`; true when this failure used up its
    /// allowance (the address is locked out from now: worth a log line).
    pub fn failed(&self, client: IpAddr) -> bool {
        let now = self.clock.now();
        let key = super::connections::client_key(client);
        let mut table = self.table();
        if table.len() >= MAX_TRACKED && !table.contains_key(&key) {
            table.retain(|_, paid_at| *paid_at > now);
            if table.len() >= MAX_TRACKED
                && let Some(nearest) = table.iter().min_by_key(|(_, at)| **at).map(|(k, _)| *k)
            {
                table.remove(&nearest);
            }
        }
        let paid_at = table.entry(key).or_insert(now);
        let start = if *paid_at > now { *paid_at } else { now };
        *paid_at = start.plus_ms(REFILL_MS as u64);
        paid_at.millis_since(now) + REFILL_MS > self.allowance_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ManualClock;

    fn guesses() -> (Guesses, ManualClock) {
        let clock = ManualClock::new(Timestamp::from_millis(1_000_000));
        (Guesses::new(Arc::new(clock.clone()), BURST), clock)
    }

    #[test]
    fn ten_failures_at_once_then_one_every_six_seconds() {
        let (guesses, clock) = guesses();
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        for n in 1..=BURST {
            assert_eq!(guesses.verdict(client), Verdict::Check, "failure {n}");
            assert_eq!(guesses.failed(client), n == BURST, "locked by failure {n}");
        }
        assert_eq!(
            guesses.verdict(client),
            Verdict::LockedOut { retry_after_s: 6 }
        );
        clock.advance_ms(5_999);
        assert_eq!(
            guesses.verdict(client),
            Verdict::LockedOut { retry_after_s: 1 }
        );
        clock.advance_ms(1);
        assert_eq!(
            guesses.verdict(client),
            Verdict::Check,
            "one more after 6 s"
        );
        assert!(guesses.failed(client));
        assert!(matches!(guesses.verdict(client), Verdict::LockedOut { .. }));
        clock.advance_ms(60_000);
        for _ in 1..BURST {
            assert!(
                !guesses.failed(client),
                "the whole burst back after a minute"
            );
        }
    }

    #[test]
    fn addresses_are_counted_apart_and_ipv6_by_its_64() {
        let (guesses, _clock) = guesses();
        let one: IpAddr = "2001:db8::1".parse().unwrap();
        let same_64: IpAddr = "2001:db8::2".parse().unwrap();
        let other: IpAddr = "192.0.2.9".parse().unwrap();
        for _ in 0..BURST {
            guesses.failed(one);
        }
        assert!(matches!(
            guesses.verdict(same_64),
            Verdict::LockedOut { .. }
        ));
        assert_eq!(guesses.verdict(other), Verdict::Check);
    }
}
