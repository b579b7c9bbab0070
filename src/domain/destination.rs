//! Destinations (issue #14): the `host:port` that subscribers' URLs share. Subscribers
//! whose URLs name the same host and port send to the same server, so a limit or a
//! circuit breaker that protects that server belongs to the destination, not to each
//! subscriber.
//!
//! The key is written one way only: the host as the URL parser normalises it (a domain
//! lower-cased and IDNA-encoded, without a trailing dot; an IPv4 address in dotted
//! decimal; an IPv6 address in brackets, compressed, as the URL writes it) and the port
//! always explicit (80 for `http`, 443 for `https`
//! when the URL leaves it out, as RFC 9110 §4.2 defines), so `HTTPS://Example.COM/a`
//! and `https://example.com:443/b` share `example.com:443`.

use url::{Host, Url};

/// A destination: `host:port`, normalised (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Destination(String);

/// Why a text is not a destination.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationParseError {
    /// Not of the form `host:port` (a path, a user, a scheme, or no host).
    #[error("must be host:port, e.g. hooks.example.com:443 or [2001:db8::1]:8443")]
    Malformed,
    /// The port is missing (a destination always names it).
    #[error("must name the port, e.g. hooks.example.com:443")]
    NoPort,
    /// The port is 0 or above 65535: no port a request can be sent to.
    #[error("the port must be 1 to 65535")]
    PortOutOfRange,
}

impl Destination {
    /// The destination `url` sends to; `None` for a URL without a host or a known
    /// port (a subscriber URL always has both: `http` or `https` with a host).
    pub fn of_url(url: &Url) -> Option<Destination> {
        let port = url.port_or_known_default()?;
        let host = match url.host()? {
            // A fully qualified name's trailing dot names the same host.
            Host::Domain(domain) => domain.trim_end_matches('.').to_ascii_lowercase(),
            Host::Ipv4(ip) => ip.to_string(),
            // As the URL writes it (RFC 5952; an IPv4-mapped address in hex too).
            Host::Ipv6(_) => url.host_str()?.to_owned(),
        };
        if host.is_empty() {
            return None;
        }
        Some(Destination(format!("{host}:{port}")))
    }

    /// Parses `host:port` as an operator writes it (in an API path, say) and
    /// normalises it as [`Destination::of_url`] does: `Example.com:443` is
    /// `example.com:443`.
    ///
    /// # Errors
    /// A text with anything besides a host and a port, without a port, or with a port
    /// outside 1–65535.
    pub fn parse(text: &str) -> Result<Destination, DestinationParseError> {
        let malformed = || DestinationParseError::Malformed;
        if text.is_empty() || text.contains(['/', '?', '#', '@', '\\']) || text.contains("://") {
            return Err(malformed());
        }
        let written_port = text
            .rsplit_once(':')
            .filter(|(host, _)| host.starts_with('[') == host.ends_with(']'))
            .map(|(_, port)| port);
        match written_port {
            Some(port) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
                if !matches!(port.parse::<u16>(), Ok(1..)) {
                    return Err(DestinationParseError::PortOutOfRange);
                }
            }
            _ => return Err(DestinationParseError::NoPort),
        }
        // The scheme only lets the URL parser read and normalise the authority.
        let url = Url::parse(&format!("http://{text}/")).map_err(|_| malformed())?;
        if url.path() != "/" || url.query().is_some() {
            return Err(malformed());
        }
        Destination::of_url(&url).ok_or_else(malformed)
    }

    /// The key as text (`host:port`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(url: &str) -> String {
        Destination::of_url(&Url::parse(url).unwrap())
            .unwrap()
            .to_string()
    }

    #[test]
    fn urls_of_one_server_share_a_destination() {
        assert_eq!(of("https://Example.COM/a?b=1"), "example.com:443");
        assert_eq!(of("https://example.com:443/b"), "example.com:443");
        assert_eq!(of("http://example.com/"), "example.com:80");
        assert_eq!(of("http://example.com:8080/x"), "example.com:8080");
        assert_eq!(of("http://127.0.0.1:9000/hook"), "127.0.0.1:9000");
        assert_eq!(of("http://[::1]:9000/"), "[::1]:9000");
        assert_eq!(of("https://[2001:DB8:0:0::1]/"), "[2001:db8::1]:443");
        assert_eq!(of("https://bücher.example/"), "xn--bcher-kva.example:443");
        assert_eq!(of("http://example.com.:80/"), "example.com:80");
        assert_eq!(of("http://[::ffff:127.0.0.1]:80/"), "[::ffff:7f00:1]:80");
    }

    #[test]
    fn other_ports_are_other_destinations() {
        assert_ne!(of("http://127.0.0.1:9000/"), of("http://127.0.0.1:9001/"));
        assert_ne!(of("http://example.com/"), of("https://example.com/"));
    }

    #[test]
    fn an_operator_writes_host_and_port() {
        for (text, key) in [
            ("example.com:443", "example.com:443"),
            ("Example.COM:443", "example.com:443"),
            ("example.com:80", "example.com:80"),
            ("127.0.0.1:9000", "127.0.0.1:9000"),
            ("[::1]:9000", "[::1]:9000"),
            ("[2001:DB8::1]:8443", "[2001:db8::1]:8443"),
            ("Example.COM.:443", "example.com:443"),
            ("[::ffff:127.0.0.1]:80", "[::ffff:7f00:1]:80"),
        ] {
            assert_eq!(Destination::parse(text).unwrap().as_str(), key, "{text}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_its_reason() {
        use DestinationParseError::*;
        for (text, error) in [
            ("", Malformed),
            ("example.com", NoPort),
            ("example.com:", NoPort),
            ("example.com:https", NoPort),
            ("[::1]", NoPort),
            ("example.com:0", PortOutOfRange),
            ("example.com:65536", PortOutOfRange),
            ("example.com:99999999999", PortOutOfRange),
            ("example.com:443/hooks", Malformed),
            ("https://example.com:443", Malformed),
            ("user@example.com:443", Malformed),
            ("example.com:443?x", Malformed),
            ("exa mple.com:443", Malformed),
        ] {
            assert_eq!(Destination::parse(text), Err(error), "{text}");
        }
    }

    #[test]
    fn a_parsed_key_reads_back_as_itself() {
        for url in [
            "https://example.com/",
            "http://[::1]:9000/",
            "http://10.0.0.1:81/",
        ] {
            let key = of(url);
            assert_eq!(Destination::parse(&key).unwrap().as_str(), key);
        }
    }
}
