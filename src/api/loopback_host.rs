//! Without API tokens the API is open and listens on loopback only (docs/DESIGN.md
//! §5.7); a page in the operator's browser could still reach it by DNS rebinding
//! (`attacker.example` re-resolved to 127.0.0.1). Such a request names the attacker's
//! host in `Host`, so an open server answers only requests addressed to a loopback
//! host: `localhost`, `127.0.0.0/8` or `[::1]` (an IPv4-mapped loopback too), with any
//! port. Others get 421 Misdirected Request (RFC 9110 §15.5.20: this server will not
//! answer for that authority).
//!
//! Every authority the request names is checked: the `Host` field (RFC 9110 §7.2) and
//! the authority of an absolute-form target (RFC 9112 §3.2.2). A request naming none
//! is an HTTP/1.0 one, not from a browser, and passes; an HTTP/1.1 one without `Host`
//! is a 400 (RFC 9112 §3.2).
//!
//! A page of another origin can also send a simple cross-site request (a form's
//! `POST`, which needs no CORS preflight) to `http://127.0.0.1:8080` itself, with a
//! loopback `Host`: the browser names the page's origin in `Origin` (RFC 6454 §7), so
//! a request whose `Origin` is not this server's own (`null` included) gets 403. That
//! includes a page of another loopback origin (`http://localhost:3000`, any other
//! port: a development server, or anything a local process serves): browsers count
//! every port of a host as the same *site*, but it is another *origin*, and only pages
//! this server served itself (the console, `/docs/`) may act on it (issue #34 part
//! 4.2). A request sent by something other than a browser names no `Origin` and passes.

use std::net::{Ipv4Addr, Ipv6Addr};

use axum::extract::Request;
use axum::http::{StatusCode, Version, header};
use axum::response::Response;

use super::problem::{Problem, problem_response};

/// True when `authority` (`host[:port]` or `[v6][:port]`) names a loopback host:
/// `localhost` (any case), a dotted IPv4 address in `127.0.0.0/8`, or `[::1]` (or an
/// IPv4-mapped loopback address); the port, if any, is up to 5 digits.
pub fn is_loopback_authority(authority: &str) -> bool {
    let (loopback, port) = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((v6, port)) => (v6.parse::<Ipv6Addr>().is_ok_and(loopback_v6), port),
            None => return false,
        },
        None => {
            let (host, port) = authority.split_at(authority.find(':').unwrap_or(authority.len()));
            let loopback = host.eq_ignore_ascii_case("localhost")
                || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback());
            (loopback, port)
        }
    };
    let port_ok = match port.strip_prefix(':') {
        Some(digits) => digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit()),
        None => port.is_empty(),
    };
    loopback && port_ok
}

/// True when `origin` is this server's own: an `http` origin whose authority is the
/// request's `host` (compared without case) and a loopback one. Never `https`: this
/// server speaks plain HTTP, and without tokens it listens on loopback only, so an
/// `https` page of the same host is another origin (another port, 443 by default).
fn is_own_origin(origin: &str, host: Option<&str>) -> bool {
    let authority = origin.strip_prefix("http://");
    match (authority, host) {
        (Some(authority), Some(host)) => {
            authority.eq_ignore_ascii_case(host) && is_loopback_authority(authority)
        }
        _ => false,
    }
}

fn loopback_v6(ip: Ipv6Addr) -> bool {
    ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
}

/// `None` when every authority `request` names is a loopback host; otherwise the 421
/// problem to answer.
pub fn refuse_unless_loopback(request: &Request) -> Option<Response> {
    let hosts = request.headers().get_all(header::HOST).iter();
    if request.version() == Version::HTTP_11
        && !request.headers().contains_key(header::HOST)
        && request.uri().authority().is_none()
    {
        let mut problem = Problem::from_status(StatusCode::BAD_REQUEST);
        problem.detail = Some("an HTTP/1.1 request must carry a Host field".into());
        return Some(problem_response(problem));
    }
    let origins = request.headers().get_all(header::ORIGIN).iter();
    let mut host = request.headers().get_all(header::HOST).iter();
    let own_host = match (host.next(), host.next()) {
        (Some(value), None) => value.to_str().ok(),
        _ => None,
    };
    if !origins
        .map(|value| value.to_str().unwrap_or(""))
        .all(|origin| is_own_origin(origin, own_host))
    {
        let mut problem = Problem::from_status(StatusCode::FORBIDDEN);
        problem.detail = Some(
            "without API tokens, this server answers no request sent by a web page of \
             another origin (another port of this host included): start it with \
             --api-token"
                .into(),
        );
        return Some(problem_response(problem));
    }
    let mut named = hosts.map(|value| value.to_str().unwrap_or(""));
    let target = request.uri().authority().map(|a| a.as_str());
    if named.all(is_loopback_authority) && target.is_none_or(is_loopback_authority) {
        return None;
    }
    let mut problem = Problem::from_status(StatusCode::MISDIRECTED_REQUEST);
    problem.detail = Some(
        "without API tokens, this server answers only requests addressed to a loopback \
         host (localhost, 127.0.0.1, [::1]): use such an address, or start it with \
         --api-token"
            .into(),
    );
    Some(problem_response(problem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_with_any_port() {
        for host in [
            "localhost",
            "LocalHost:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:1",
            "127.0.0.1:",
            "[::1]",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(is_loopback_authority(host), "{host}");
        }
    }

    #[test]
    fn only_this_servers_own_loopback_origin() {
        for (origin, host) in [
            ("http://localhost:8080", "localhost:8080"),
            ("http://[::1]:3000", "[::1]:3000"),
            ("http://LocalHost:8080", "localhost:8080"),
        ] {
            assert!(is_own_origin(origin, Some(host)), "{origin} on {host}");
        }
        for (origin, host) in [
            ("http://localhost:3000", Some("localhost:8080")),
            ("https://127.0.0.1", Some("127.0.0.1")),
            ("https://127.0.0.1:8080", Some("127.0.0.1:8080")),
            ("http://127.0.0.1:3000", Some("127.0.0.1:8080")),
            ("http://localhost:8080", Some("127.0.0.1:8080")),
            ("http://localhost:8080", None),
            ("null", Some("127.0.0.1:8080")),
            ("", Some("127.0.0.1:8080")),
            ("https://attacker.example", Some("attacker.example")),
            (
                "http://localhost.attacker.example",
                Some("localhost.attacker.example"),
            ),
            ("file://", Some("127.0.0.1:8080")),
            ("localhost:8080", Some("localhost:8080")),
            ("http://127.0.0.1:8080/", Some("127.0.0.1:8080")),
        ] {
            assert!(!is_own_origin(origin, host), "{origin} on {host:?}");
        }
    }

    #[test]
    fn other_hosts_are_refused() {
        for host in [
            "",
            "attacker.example",
            "attacker.example:8080",
            "localhost.attacker.example",
            "localhost.",
            "127.0.0.1.nip.io",
            "2130706433",
            "0x7f.1",
            "10.0.0.1:8080",
            "0.0.0.0:8080",
            "[::]:8080",
            "[fe80::1]",
            "::1",
            "[::1",
            "[::1]x",
            "127.0.0.1:80:80",
            "127.0.0.1:port",
            "user@127.0.0.1",
            "127.0.0.1:123456",
        ] {
            assert!(!is_loopback_authority(host), "{host}");
        }
    }
}
