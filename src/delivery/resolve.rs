//! Name resolution of the sender, checked against the [`TargetPolicy`] (CASES C-08):
//! a name is resolved once per connection, the addresses the policy refuses are
//! dropped, and only the rest are connected to; when none remain, or the name does not
//! resolve, the connection fails with [`UnusableName`] before any socket is opened.
//! Checking the addresses actually connected (not a separate, earlier lookup) defeats
//! DNS rebinding.

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

/// A host name that gave no address to connect to: it did not resolve (or resolved to
/// nothing), or every address it resolved to was refused by the policy. Its `Display`,
/// which becomes the attempt's `reason` that any API token holder can read, is the same
/// text in both cases and names neither the host's addresses nor whether it resolved:
/// the addresses and their ranges would let a token holder map internal DNS (issue #15,
/// part 5.4), and "refused" against "does not resolve" would tell which internal names
/// exist (issue #34, item 4.7). The fields, for the operator's log, keep the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusableName {
    /// The name that was resolved.
    pub host: String,
    /// Why it gave no address (never shown to API clients).
    pub cause: Unusable,
}

/// Why a host name gave no address to connect to; for the operator's log only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    /// The lookup failed (the resolver's error), or answered no address.
    NotResolved(String),
    /// Every address was refused by the policy.
    Refused {
        /// Why its (first) address was refused.
        refusal: Refusal,
        /// How many addresses it resolved to.
        addresses: usize,
    },
}

/// The attempt's reason for an [`UnusableName`], whatever its cause.
pub const UNUSABLE_NAME_REASON: &str =
    "could not connect to the target host (name not resolved or not a permitted address)";

impl fmt::Display for UnusableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(UNUSABLE_NAME_REASON)
    }
}

impl std::error::Error for UnusableName {}

impl UnusableName {
    /// Logs the exact cause at `warn`, for the operator (host, and the first refused
    /// address and its range or the resolver's error), and boxes `self` for reqwest.
    fn logged(self) -> Box<dyn std::error::Error + Send + Sync> {
        match &self.cause {
            Unusable::NotResolved(error) => tracing::warn!(host = %self.host, %error,
                "a subscriber host name did not resolve; the attempt reads as a connection \
                 failure"),
            Unusable::Refused { refusal, addresses } => tracing::warn!(host = %self.host,
                addresses, first_refusal = %refusal,
                "refusing a target: every address of the name is refused; the attempt \
                 reads as a connection failure"),
        }
        Box::new(self)
    }
}

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
            let unusable = |cause| {
                UnusableName {
                    host: host.clone(),
                    cause,
                }
                .logged()
            };
            let resolved: Vec<SocketAddr> = match lookup.await {
                Ok(addrs) => addrs.collect(),
                Err(error) => return Err(unusable(Unusable::NotResolved(error.to_string()))),
            };
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
            if !permitted.is_empty() {
                if let Some(refusal) = first_refusal {
                    tracing::debug!(%host, %refusal, "skipping a refused address");
                }
                return Ok(Box::new(permitted.into_iter()) as Addrs);
            }
            Err(unusable(match first_refusal {
                Some(refusal) => Unusable::Refused { refusal, addresses },
                None => Unusable::NotResolved("no address".to_owned()),
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::delivery::sender::{Outgoing, Received, Sender};
    use crate::domain::policy::TransportFailure;

    /// Answers `evil.test` with `addrs`; any other name does not resolve.
    struct Fixed(Vec<SocketAddr>);

    impl Resolve for Fixed {
        fn resolve(&self, name: Name) -> Resolving {
            let answer = (name.as_str() == "evil.test")
                .then(|| self.0.clone())
                .ok_or_else(|| format!("{} does not resolve", name.as_str()));
            Box::pin(async move { Ok(Box::new(answer?.into_iter()) as Addrs) })
        }
    }

    fn fixed(addrs: &[&str]) -> Resolver {
        Resolver(Arc::new(Fixed(
            addrs.iter().map(|a| a.parse().unwrap()).collect(),
        )))
    }

    async fn resolve(resolver: &GuardedResolver, host: &str) -> Result<Vec<SocketAddr>, String> {
        resolver
            .resolve(host.parse().unwrap())
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
            resolve(&mixed, "evil.test").await.unwrap(),
            ["93.184.216.34:0".parse::<SocketAddr>().unwrap()]
        );
        let internal = GuardedResolver::new(fixed(&["127.0.0.1:0", "[::1]:0"]), policy.clone());
        let nothing = GuardedResolver::new(fixed(&[]), policy);
        // Refused, not resolved, resolved to nothing: one text, which names neither the
        // addresses, their ranges, nor which of these happened.
        for (resolver, host) in [
            (&internal, "evil.test"),
            (&internal, "nowhere.invalid"),
            (&nothing, "evil.test"),
        ] {
            assert_eq!(
                resolve(resolver, host).await.unwrap_err(),
                UNUSABLE_NAME_REASON,
                "{host}"
            );
        }
    }

    #[tokio::test]
    async fn allowed_ranges_pass() {
        let policy = Arc::new(TargetPolicy {
            allow_private: false,
            allowed: vec!["127.0.0.0/8".parse().unwrap()],
        });
        let resolver = GuardedResolver::new(fixed(&["127.0.0.1:0"]), policy);
        assert_eq!(resolve(&resolver, "evil.test").await.unwrap().len(), 1);
    }

    /// Through reqwest: a name whose addresses are all refused and a name that does not
    /// resolve come back as the same `Connect` failure; a literal refused address is
    /// `Blocked`, naming it (the client typed it); the listener behind the refused
    /// address is never connected to.
    #[tokio::test]
    async fn the_sender_never_connects_to_a_refused_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let policy = Arc::new(TargetPolicy::default());
        let sender = Sender::new(policy, fixed(&["127.0.0.1:0"])).unwrap();
        let unusable = (TransportFailure::Connect, UNUSABLE_NAME_REASON);
        for (url, (failure, reason)) in [
            (
                format!("http://evil.test:{port}/hook?token=s3cret"),
                unusable,
            ),
            (format!("http://nowhere.invalid:{port}/hook"), unusable),
            (
                format!("http://0x7f000001:{port}/hook?token=s3cret"),
                (
                    TransportFailure::Blocked,
                    "blocked before connecting: 127.0.0.1 is a loopback address (127.0.0.0/8)",
                ),
            ),
            (
                format!("http://[::ffff:127.0.0.1]:{port}/"),
                (
                    TransportFailure::Blocked,
                    "blocked before connecting: ::ffff:127.0.0.1 is an IPv4-mapped form of \
                     127.0.0.1, a loopback address (127.0.0.0/8)",
                ),
            ),
        ] {
            let outgoing = Outgoing {
                url: &url,
                event_id: "e1",
                event_type: None,
                payload: &Arc::from("{}"),
                secrets: &[],
                timestamp_s: 0,
                timeout: Duration::from_secs(2),
            };
            let sent = sender.send(&outgoing).await;
            assert_eq!(
                sent.received,
                Received::Failed {
                    failure,
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
