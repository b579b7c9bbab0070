//! The API's open connections, bounded (docs/DESIGN.md §5.7; issue #34 part 4.5): at
//! most `--max-connections` at once, and at most `--max-connections-per-client` from
//! one client address. Each open connection holds a descriptor and its buffers, and the
//! descriptors come from the budget the worker's slots are sized from
//! ([`crate::open_files::RESERVED`]); 4,000 connections that trickled a body held
//! +4,000 descriptors and +116 MB before this.
//!
//! A client address over its own limit has the new connection closed at once
//! (`deferhook_connections_refused_total`). When every place is taken, a connection
//! from an address holding fewer than the address holding the most takes a place from
//! that one: its oldest connection is closed (`deferhook_connections_shed_total`), so
//! a few addresses trickling request bodies cannot keep everyone else out. When no
//! address holds more than one above the newcomer's count, a connection of an address
//! that holds a place already is closed at once, and only one of an address that holds
//! none waits: the server then stops accepting until a place is free (the listener's
//! backlog holds the rest). So a flooding address's extra connection can never hold the
//! accept loop while a newcomer waits behind it. An IPv6 client is counted by its /64, the smallest network one host
//! is usually given.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

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

/// What [`Connections::admit`] decided for a new connection.
#[derive(Debug)]
pub enum Admission {
    /// It has a place (another address's oldest connection may have been shed for it).
    Admitted(Place),
    /// Its address holds its limit, or holds a place already while every place is
    /// taken and none can be shed: close it.
    Refused,
    /// Every place is taken, none can be shed, and its address holds none: wait
    /// ([`Connections::freed`]) and ask again.
    Full,
}

/// The open connections, counted.
#[derive(Clone, Debug)]
pub struct Connections {
    limits: ConnectionLimits,
    state: Arc<Mutex<State>>,
    freed: Arc<Notify>,
}

#[derive(Debug, Default)]
struct State {
    open: usize,
    next_id: u64,
    /// Per client address, its connections, oldest first: id and what sheds it.
    by_client: HashMap<IpAddr, Vec<(u64, CancellationToken)>>,
}

/// One open connection's place; freed when dropped.
#[derive(Debug)]
pub struct Place {
    id: u64,
    client: IpAddr,
    shed: CancellationToken,
    state: Arc<Mutex<State>>,
    freed: Arc<Notify>,
}

impl Place {
    /// Cancelled when the connection is shed for a newcomer: close it then.
    pub fn shed(&self) -> CancellationToken {
        self.shed.clone()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        // A shed connection's place was already given away.
        if remove(&mut state, self.client, self.id) {
            state.open -= 1;
        }
        drop(state);
        self.freed.notify_one();
    }
}

/// Removes connection `id` of `client`; true when it was there.
fn remove(state: &mut State, client: IpAddr, id: u64) -> bool {
    let Some(list) = state.by_client.get_mut(&client) else {
        return false;
    };
    let before = list.len();
    list.retain(|(each, _)| *each != id);
    let removed = list.len() < before;
    if list.is_empty() {
        state.by_client.remove(&client);
    }
    removed
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
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
            limits: ConnectionLimits {
                total: limits.total.max(1),
                per_client: limits.per_client.max(1),
            },
            state: Arc::new(Mutex::new(State::default())),
            freed: Arc::new(Notify::new()),
        }
    }

    /// Decides for a new connection from `client` (see the module's rules); a shed
    /// connection is told through its [`Place::shed`] and counted.
    pub fn admit(&self, client: IpAddr) -> Admission {
        let client = client_key(client);
        let mut state = lock(&self.state);
        let mine = state.by_client.get(&client).map_or(0, Vec::len);
        if mine >= self.limits.per_client {
            return Admission::Refused;
        }
        if state.open >= self.limits.total {
            let heaviest = state
                .by_client
                .iter()
                .filter(|(other, _)| **other != client)
                .max_by_key(|(_, list)| list.len())
                .filter(|(_, list)| list.len() > mine + 1)
                .map(|(other, list)| (*other, list[0].0));
            let Some((other, oldest)) = heaviest else {
                // An address that already holds a place gets no second one now: holding
                // its connection would stop the server accepting, and a newcomer behind
                // it in the backlog would never be seen.
                return if mine > 0 {
                    Admission::Refused
                } else {
                    Admission::Full
                };
            };
            if let Some(list) = state.by_client.get(&other)
                && let Some((_, shed)) = list.first()
            {
                shed.cancel();
            }
            remove(&mut state, other, oldest);
            state.open -= 1;
            crate::metrics::connection_shed();
        }
        let id = state.next_id;
        state.next_id += 1;
        state.open += 1;
        let shed = CancellationToken::new();
        state
            .by_client
            .entry(client)
            .or_default()
            .push((id, shed.clone()));
        Admission::Admitted(Place {
            id,
            client,
            shed,
            state: self.state.clone(),
            freed: self.freed.clone(),
        })
    }

    /// Resolves once a place may have been freed since the last call (ask again).
    pub async fn freed(&self) {
        self.freed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(connections: &Connections, client: &str) -> Place {
        match connections.admit(client.parse().unwrap()) {
            Admission::Admitted(place) => place,
            other => panic!("{client}: {other:?}"),
        }
    }

    #[test]
    fn a_client_holds_at_most_its_share_and_frees_it_on_close() {
        let connections = Connections::new(ConnectionLimits {
            total: 10,
            per_client: 2,
        });
        let first = admitted(&connections, "127.0.0.1");
        let _second = admitted(&connections, "127.0.0.1");
        assert!(matches!(
            connections.admit("127.0.0.1".parse().unwrap()),
            Admission::Refused
        ));
        let _other = admitted(&connections, "127.0.0.2");
        drop(first);
        let _again = admitted(&connections, "127.0.0.1");
    }

    #[test]
    fn when_full_the_heaviest_address_gives_up_its_oldest_place() {
        let connections = Connections::new(ConnectionLimits {
            total: 4,
            per_client: 4,
        });
        let held: Vec<Place> = (0..4).map(|_| admitted(&connections, "10.0.0.1")).collect();
        let newcomer = admitted(&connections, "10.0.0.2");
        assert!(held[0].shed().is_cancelled(), "the oldest is shed");
        assert!(held[1..].iter().all(|p| !p.shed().is_cancelled()));
        // 10.0.0.1 holds 3, 10.0.0.2 one: one more from 10.0.0.2 takes another place.
        let _second = admitted(&connections, "10.0.0.2");
        assert!(held[1].shed().is_cancelled());
        // 2 and 2: a third and a fourth address still take one each, down to one place
        // per address; then nobody is heavier than a newcomer by more than one.
        let third = admitted(&connections, "10.0.0.3");
        let _fourth = admitted(&connections, "10.0.0.4");
        assert!(matches!(
            connections.admit("10.0.0.5".parse().unwrap()),
            Admission::Full
        ));
        // An address that holds a place gets no second one while nobody can be shed.
        assert!(matches!(
            connections.admit("10.0.0.3".parse().unwrap()),
            Admission::Refused
        ));
        drop(third);
        let _now = admitted(&connections, "10.0.0.5");
        drop(held);
        drop(newcomer);
    }

    #[tokio::test]
    async fn a_closed_connection_wakes_the_waiter() {
        let connections = Connections::new(ConnectionLimits {
            total: 1,
            per_client: 1,
        });
        let held = admitted(&connections, "10.0.0.1");
        assert!(matches!(
            connections.admit("10.0.0.2".parse().unwrap()),
            Admission::Full
        ));
        drop(held);
        tokio::time::timeout(std::time::Duration::from_secs(1), connections.freed())
            .await
            .expect("woken");
        let _now = admitted(&connections, "10.0.0.2");
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
