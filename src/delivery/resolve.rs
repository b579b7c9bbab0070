//! Name resolution of the sender, checked against the [`TargetPolicy`] (CASES C-08):
//! a name is resolved once per connection, the addresses the policy refuses are
//! dropped, and only the rest are connected to; when none remain the connection fails
//! with [`BlockedTarget`] before any socket is opened. Checking the addresses actually
//! connected (not a separate, earlier lookup) defeats DNS rebinding.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::domain::target::{Refusal, TargetPolicy};

/// The resolver that looks names up, before the policy filters its answer: the
/// system's (`getaddrinfo` through Tokio) unless a test injects its own.
#[derive(Clone)]
pub struct Resolver(
    /// The lookup (reqwest's resolver interface: a name in, socket addresses out).
    pub Arc<dyn Resolve>,
);

impl Resolver {
    /// The system's resolver.
    pub fn system() -> Self {
        Resolver(Arc::new(SystemResolver))
    }
}

impl Default for Resolver {
    fn default() -> Self {
        Resolver::system()
    }
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Resolver")
    }
}

/// `getaddrinfo` on Tokio's blocking pool.
#[derive(Debug)]
struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Every address `host` resolved to was refused. Its `Display`, which becomes the
/// attempt's `reason` that any API token holder can read, names the host only: the
/// addresses and their ranges would let a token holder map internal DNS (issue #15,
/// part 5.4). The fields, for the operator's log, keep them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedTarget {
    /// The name that was resolved.
    pub host: String,
    /// Why its (first) address was refused.
    pub refusal: Refusal,
    /// How many addresses it resolved to.
    pub addresses: usize,
}

impl fmt::Display for BlockedTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is refused by the outbound-target policy: it resolves to no permitted \
             address (the server log names them)",
            self.host
        )
    }
}

impl std::error::Error for BlockedTarget {}

/// The resolver given to reqwest: `inner` looks the name up and the policy keeps only
/// the addresses it permits.
pub struct GuardedResolver {
    inner: Resolver,
    policy: Arc<TargetPolicy>,
}

impl GuardedResolver {
    /// Filters what `inner` answers through `policy`.
    pub fn new(inner: Resolver, policy: Arc<TargetPolicy>) -> Self {
        GuardedResolver { inner, policy }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let lookup = self.inner.0.resolve(name);
        let policy = self.policy.clone();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = lookup.await?.collect();
            let addresses = resolved.len();
            let mut first_refusal = None;
            let permitted: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match policy.permits(addr.ip()) {
                    Ok(()) => true,
                    Err(refusal) => {
                        first_refusal.get_or_insert(refusal);
                        false
                    }
                })
                .collect();
            match first_refusal {
                Some(refusal) if permitted.is_empty() => {
                    tracing::info!(%host, addresses, first_refusal = %refusal,
                        "refusing a target: every address of the name is refused");
                    Err(Box::new(BlockedTarget {
                        host,
                        refusal,
                        addresses,
                    })
                        as Box<dyn std::error::Error + Send + Sync>)
                }
                Some(refusal) => {
                    tracing::debug!(%host, %refusal, "skipping a refused address");
                    Ok(Box::new(permitted.into_iter()) as Addrs)
                }
                None => Ok(Box::new(permitted.into_iter()) as Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::delivery::sender::{Outgoing, Received, Sender};
    use crate::domain::policy::TransportFailure;

    /// Answers every name with `addrs`.
    struct Fixed(Vec<SocketAddr>);

    impl Resolve for Fixed {
        fn resolve(&self, _name: Name) -> Resolving {
            let addrs = self.0.clone();
            Box::pin(async move { Ok(Box::new(addrs.into_iter()) as Addrs) })
        }
    }

    fn fixed(addrs: &[&str]) -> Resolver {
        Resolver(Arc::new(Fixed(
            addrs.iter().map(|a| a.parse().unwrap()).collect(),
        )))
    }

    async fn resolve(resolver: &GuardedResolver) -> Result<Vec<SocketAddr>, String> {
        resolver
            .resolve("evil.test".parse().unwrap())
            .await
            .map(Iterator::collect)
            .map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn refused_addresses_are_dropped() {
        let policy = Arc::new(TargetPolicy::default());
        let mixed = GuardedResolver::new(
            fixed(&["127.0.0.1:0", "93.184.216.34:0", "[::1]:0"]),
            policy.clone(),
        );
        assert_eq!(
            resolve(&mixed).await.unwrap(),
            ["93.184.216.34:0".parse::<SocketAddr>().unwrap()]
        );
        let internal = GuardedResolver::new(fixed(&["127.0.0.1:0", "[::1]:0"]), policy);
        // The reason names the host, never the addresses or their ranges.
        assert_eq!(
            resolve(&internal).await.unwrap_err(),
            "evil.test is refused by the outbound-target policy: it resolves to no \
             permitted address (the server log names them)"
        );
    }

    #[tokio::test]
    async fn allowed_ranges_pass() {
        let policy = Arc::new(TargetPolicy {
            allow_private: false,
            allowed: vec!["127.0.0.0/8".parse().unwrap()],
        });
        let resolver = GuardedResolver::new(fixed(&["127.0.0.1:0"]), policy);
        assert_eq!(resolve(&resolver).await.unwrap().len(), 1);
    }

    /// Through reqwest: the resolver's refusal comes back as a `Blocked` failure, and
    /// the listener behind the refused address is never connected to.
    #[tokio::test]
    async fn the_sender_never_connects_to_a_refused_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let policy = Arc::new(TargetPolicy::default());
        let sender = Sender::new(policy, fixed(&["127.0.0.1:0"])).unwrap();
        for (url, reason) in [
            (
                format!("http://evil.test:{port}/hook?token=s3cret"),
                "blocked before connecting: evil.test is refused by the outbound-target \
                 policy: it resolves to no permitted address (the server log names them)",
            ),
            (
                format!("http://0x7f000001:{port}/hook?token=s3cret"),
                "blocked before connecting: 127.0.0.1 is a loopback address (127.0.0.0/8)",
            ),
            (
                format!("http://[::ffff:127.0.0.1]:{port}/"),
                "blocked before connecting: ::ffff:127.0.0.1 is an IPv4-mapped form of \
                 127.0.0.1, a loopback address (127.0.0.0/8)",
            ),
        ] {
            let outgoing = Outgoing {
                url: &url,
                event_id: "e1",
                event_type: None,
                payload: "{}",
                secrets: &[],
                timestamp_s: 0,
                timeout: Duration::from_secs(2),
            };
            let sent = sender.send(&outgoing).await;
            assert_eq!(
                sent.received,
                Received::Failed {
                    failure: TransportFailure::Blocked,
                    reason: reason.to_owned(),
                },
                "{url}"
            );
            assert_eq!(sent.resent, None, "{url}");
        }
        let accepted = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
        assert!(accepted.is_err(), "a refused address was connected to");
    }
}
