//! The API's open connections, bounded (docs/DESIGN.md §5.7; issue #34 part 4.5): at
//! most `--max-connections` at once, and at most `--max-connections-per-client` from
//! one client address. Each open connection holds a descriptor and its buffers, and the
//! descriptors come from the budget the worker's slots are sized from
//! ([`crate::open_files::RESERVED`]); 4,000 connections that trickled a body held
//! +4,000 descriptors and +116 MB before this.
//!
//! At the total limit the server stops accepting: new connections wait in the
//! listener's backlog until one closes. A client address over its own limit has the new
//! connection closed at once (counted in `deferhook_connections_refused_total`), so
//! one client cannot hold every place. An IPv6 client is counted by its /64, the
//! smallest network one host is usually given.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most `--max-connections` may be: the descriptors kept beside the worker's slots
/// ([`crate::open_files::RESERVED`], 1,024) less room for the database pool, the
/// listeners and log files.
pub const MAX_CONNECTIONS_LIMIT: u64 = 768;

/// The bounds: total, and per client address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open connections at once.
    pub total: usize,
    /// Open connections from one client address (IPv6: one /64).
    pub per_client: usize,
}

impl Default for ConnectionLimits {
    /// 512 in all, 128 per client address.
    fn default() -> Self {
        ConnectionLimits {
            total: 512,
            per_client: 128,
        }
    }
}

/// The open connections, counted.
#[derive(Clone, Debug)]
pub struct Connections {
    limits: ConnectionLimits,
    places: Arc<Semaphore>,
    by_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One open connection's place; freed when dropped.
#[derive(Debug)]
pub struct Place {
    _permit: OwnedSemaphorePermit,
    client: IpAddr,
    by_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut by_client = lock(&self.by_client);
        if let Some(open) = by_client.get_mut(&self.client) {
            *open -= 1;
            if *open == 0 {
                by_client.remove(&self.client);
            }
        }
    }
}

fn lock(map: &Mutex<HashMap<IpAddr, usize>>) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
    map.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The address a client is counted by: IPv4 as is (an IPv4-mapped IPv6 address as its
/// IPv4 one), IPv6 by its /64.
pub fn client_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let network = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(network.into())
            }
        },
    }
}

impl Connections {
    /// No connection open yet, under `limits` (each at least 1).
    pub fn new(limits: ConnectionLimits) -> Self {
        Connections {
            limits,
            places: Arc::new(Semaphore::new(limits.total.max(1))),
            by_client: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Waits until fewer than the total limit are open, and reserves a place for the
    /// next connection; the caller then accepts it and calls [`Connections::admit`].
    pub async fn reserve(&self) -> OwnedSemaphorePermit {
        self.places
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// The place of a connection from `client` in `reserved`, or `None` when that
    /// client address already holds its limit (the connection is to be closed).
    pub fn admit(&self, reserved: OwnedSemaphorePermit, client: IpAddr) -> Option<Place> {
        let client = client_key(client);
        let mut by_client = lock(&self.by_client);
        let open = by_client.entry(client).or_insert(0);
        if *open >= self.limits.per_client.max(1) {
            return None;
        }
        *open += 1;
        Some(Place {
            _permit: reserved,
            client,
            by_client: self.by_client.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_client_holds_at_most_its_share_and_frees_it_on_close() {
        let connections = Connections::new(ConnectionLimits {
            total: 10,
            per_client: 2,
        });
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let first = connections.admit(connections.reserve().await, a).unwrap();
        let _second = connections.admit(connections.reserve().await, a).unwrap();
        assert!(connections.admit(connections.reserve().await, a).is_none());
        assert!(connections.admit(connections.reserve().await, b).is_some());
        drop(first);
        assert!(connections.admit(connections.reserve().await, a).is_some());
    }

    #[tokio::test]
    async fn the_total_limit_makes_the_next_connection_wait() {
        let connections = Connections::new(ConnectionLimits {
            total: 1,
            per_client: 1,
        });
        let held = connections
            .admit(connections.reserve().await, "10.0.0.1".parse().unwrap())
            .unwrap();
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(50), connections.reserve()).await;
        assert!(waiting.is_err(), "no place while one is held");
        drop(held);
        let _ = connections.reserve().await;
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let two: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(one), client_key(two));
        assert_ne!(client_key(one), client_key(other));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(client_key(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }
}
