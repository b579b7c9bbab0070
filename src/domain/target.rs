//! Which addresses deliveries may connect to (CASES C-08, docs/DESIGN.md §6): internal ranges
//! are refused unless the operator allows them, so a subscriber URL cannot make
//! deferhook reach its own host, its network or a cloud metadata service. Pure: the
//! API checks literal addresses with it at registration, the sender checks literal
//! addresses before each attempt, and the sender's resolver checks every address a
//! name resolves to before connecting.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use url::{Host, Url};

/// The kinds of address refused by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeKind {
    /// `127.0.0.0/8`, `::1` (RFC 1122 §3.2.1.3, RFC 4291 §2.5.3): this host.
    Loopback,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` (RFC 1918).
    Private,
    /// `169.254.0.0/16` (RFC 3927; cloud metadata services answer on
    /// `169.254.169.254`), `fe80::/10` (RFC 4291 §2.5.6).
    LinkLocal,
    /// `100.64.0.0/10`, shared address space for carrier-grade NAT (RFC 6598).
    SharedCgnat,
    /// `fc00::/7`, IPv6 unique local addresses (RFC 4193).
    UniqueLocal,
    /// `fec0::/10`, IPv6 site-local addresses: deprecated (RFC 3879) but still routed
    /// inside some networks as their private range.
    SiteLocal,
    /// `0.0.0.0/8` (RFC 1122 §3.2.1.3, "this network"; Linux connects `0.0.0.0` to
    /// this host), `::` (RFC 4291 §2.5.2).
    Unspecified,
    /// `224.0.0.0/4` (RFC 5771), `ff00::/8` (RFC 4291 §2.7).
    Multicast,
    /// `240.0.0.0/4`, reserved (RFC 1112 §4), including the limited broadcast address
    /// `255.255.255.255` (RFC 919).
    Reserved,
    /// Special-purpose ranges that no public receiver uses (RFC 6890): IETF protocol
    /// assignments `192.0.0.0/24`, benchmarking `198.18.0.0/15` (RFC 2544),
    /// documentation `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24` (RFC 5737) and
    /// `2001:db8::/32` (RFC 3849), discard-only `100::/64` (RFC 6666), Teredo
    /// `2001::/32` (RFC 4380, tunnels to addresses it hides), local-use NAT64
    /// `64:ff9b:1::/48` (RFC 8215) and IPv4-translated `::ffff:0:0:0/96` (RFC 2765
    /// §2.1, SIIT; obsoleted by RFC 6145, no public host has one).
    SpecialPurpose,
}

impl RangeKind {
    /// "a loopback address", as used in messages.
    pub fn description(self) -> &'static str {
        match self {
            RangeKind::Loopback => "a loopback address",
            RangeKind::Private => "a private address (RFC 1918)",
            RangeKind::LinkLocal => "a link-local address",
            RangeKind::SharedCgnat => "a carrier-grade NAT address (RFC 6598)",
            RangeKind::UniqueLocal => "an IPv6 unique local address (RFC 4193)",
            RangeKind::SiteLocal => "a deprecated IPv6 site-local address (RFC 3879)",
            RangeKind::Unspecified => "an unspecified address",
            RangeKind::Multicast => "a multicast address",
            RangeKind::Reserved => "a reserved or broadcast address",
            RangeKind::SpecialPurpose => "a special-purpose address (RFC 6890)",
        }
    }
}

/// How an IPv6 address carries an IPv4 address in its last 32 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Embedding {
    /// `::ffff:0:0/96`, IPv4-mapped (RFC 4291 §2.5.5.2): a dual-stack socket connects
    /// to the IPv4 address itself.
    Mapped,
    /// `::/96`, IPv4-compatible (deprecated, RFC 4291 §2.5.5.1).
    Compatible,
    /// `64:ff9b::/96`, the well-known NAT64 prefix (RFC 6052 §2.1): a NAT64 gateway
    /// forwards to the IPv4 address.
    Nat64,
    /// `2002::/16`, 6to4 (RFC 3056): the IPv4 address of the site's relay in bits
    /// 16–47.
    SixToFour,
}

impl Embedding {
    fn description(self) -> &'static str {
        match self {
            Embedding::Mapped => "an IPv4-mapped",
            Embedding::Compatible => "an IPv4-compatible",
            Embedding::Nat64 => "a NAT64 (64:ff9b::/96)",
            Embedding::SixToFour => "a 6to4 (2002::/16)",
        }
    }
}

/// Why an address is refused: the address, the kind and CIDR of its range, and the
/// IPv4 address it carries when it is an IPv6 form of one. Its `Display` reads
/// `127.0.0.1 is a loopback address (127.0.0.0/8)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The address refused.
    pub address: IpAddr,
    /// The kind of range it is in.
    pub kind: RangeKind,
    /// The range, as a CIDR (of the embedded IPv4 address when there is one).
    pub range: &'static str,
    /// The IPv4 address an IPv6 address carries, and how.
    pub embedded: Option<(Embedding, Ipv4Addr)>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, range) = (self.kind.description(), self.range);
        match self.embedded {
            None => write!(f, "{} is {kind} ({range})", self.address),
            Some((embedding, v4)) => write!(
                f,
                "{} is {} form of {v4}, {kind} ({range})",
                self.address,
                embedding.description()
            ),
        }
    }
}

/// The refused IPv4 ranges: network, prefix length, kind, CIDR text.
const REFUSED_V4: &[(u32, u8, RangeKind, &str)] = &[
    (0x0000_0000, 8, RangeKind::Unspecified, "0.0.0.0/8"),
    (0x0a00_0000, 8, RangeKind::Private, "10.0.0.0/8"),
    (0x6440_0000, 10, RangeKind::SharedCgnat, "100.64.0.0/10"),
    (0x7f00_0000, 8, RangeKind::Loopback, "127.0.0.0/8"),
    (0xa9fe_0000, 16, RangeKind::LinkLocal, "169.254.0.0/16"),
    (0xac10_0000, 12, RangeKind::Private, "172.16.0.0/12"),
    (0xc000_0000, 24, RangeKind::SpecialPurpose, "192.0.0.0/24"),
    (0xc000_0200, 24, RangeKind::SpecialPurpose, "192.0.2.0/24"),
    (0xc0a8_0000, 16, RangeKind::Private, "192.168.0.0/16"),
    (0xc612_0000, 15, RangeKind::SpecialPurpose, "198.18.0.0/15"),
    (
        0xc633_6400,
        24,
        RangeKind::SpecialPurpose,
        "198.51.100.0/24",
    ),
    (0xcb00_7100, 24, RangeKind::SpecialPurpose, "203.0.113.0/24"),
    (0xe000_0000, 4, RangeKind::Multicast, "224.0.0.0/4"),
    (0xf000_0000, 4, RangeKind::Reserved, "240.0.0.0/4"),
];

/// The refused IPv6 ranges (besides forms of refused IPv4 addresses).
const REFUSED_V6: &[(u128, u8, RangeKind, &str)] = &[
    (0, 128, RangeKind::Unspecified, "::/128"),
    (1, 128, RangeKind::Loopback, "::1/128"),
    (0xfe80 << 112, 10, RangeKind::LinkLocal, "fe80::/10"),
    (0xfc00 << 112, 7, RangeKind::UniqueLocal, "fc00::/7"),
    (0xfec0 << 112, 10, RangeKind::SiteLocal, "fec0::/10"),
    (0xff00 << 112, 8, RangeKind::Multicast, "ff00::/8"),
    (0x0100 << 112, 64, RangeKind::SpecialPurpose, "100::/64"),
    (
        0x2001_0db8 << 96,
        32,
        RangeKind::SpecialPurpose,
        "2001:db8::/32",
    ),
    (
        0x2001_0000 << 96,
        32,
        RangeKind::SpecialPurpose,
        "2001::/32",
    ),
    (
        0x0064_ff9b_0001 << 80,
        48,
        RangeKind::SpecialPurpose,
        "64:ff9b:1::/48",
    ),
    (
        0xffff_0000 << 32,
        96,
        RangeKind::SpecialPurpose,
        "::ffff:0:0:0/96",
    ),
];

/// The /96 prefixes whose last 32 bits are an IPv4 address.
const EMBEDDINGS: &[(u128, Embedding)] = &[
    (0xffff << 32, Embedding::Mapped),
    (0x0064_ff9b << 96, Embedding::Nat64),
    (0, Embedding::Compatible),
];

fn in_range<T>(bits: T, network: T, prefix: u8, width: u32) -> bool
where
    T: Copy + PartialEq + std::ops::Shr<u32, Output = T>,
{
    let shift = width - u32::from(prefix);
    shift == width || (bits >> shift) == (network >> shift)
}

fn refused_v4(ip: Ipv4Addr) -> Option<(RangeKind, &'static str)> {
    let bits = u32::from(ip);
    REFUSED_V4
        .iter()
        .find(|(net, prefix, ..)| in_range(bits, *net, *prefix, 32))
        .map(|(_, _, kind, range)| (*kind, *range))
}

fn refused_v6(ip: Ipv6Addr) -> Option<(RangeKind, &'static str)> {
    let bits = u128::from(ip);
    REFUSED_V6
        .iter()
        .find(|(net, prefix, ..)| in_range(bits, *net, *prefix, 128))
        .map(|(_, _, kind, range)| (*kind, *range))
}

/// The IPv4 address an IPv6 address carries in one of the [`Embedding`] forms.
pub fn embedded_v4(ip: Ipv6Addr) -> Option<(Embedding, Ipv4Addr)> {
    let bits = u128::from(ip);
    if bits >> 112 == 0x2002 {
        return Some((Embedding::SixToFour, Ipv4Addr::from((bits >> 80) as u32)));
    }
    EMBEDDINGS
        .iter()
        .find(|(prefix, _)| bits >> 32 == prefix >> 32)
        .map(|(_, embedding)| (*embedding, Ipv4Addr::from((bits & 0xffff_ffff) as u32)))
}

/// The address policy of deliveries: by default every range of [`RangeKind`] is
/// refused, in every spelling (IPv6 forms of IPv4 addresses included).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetPolicy {
    /// `--allow-private-targets`: permit every address (the check is off).
    pub allow_private: bool,
    /// `--allow-target-cidr`: ranges permitted even though internal. An address is
    /// permitted when one of them contains it; an IPv4 range also permits the
    /// IPv4-mapped forms `::ffff:a.b.c.d` of its addresses, which a dual-stack socket
    /// connects to the IPv4 address itself. It does not permit their IPv4-compatible,
    /// NAT64 or 6to4 forms ([`Embedding`]): those reach another host (a translator or a
    /// tunnel relay) and are permitted only by an IPv6 range that contains them.
    pub allowed: Vec<IpNet>,
}

impl TargetPolicy {
    /// Whether a delivery may connect to `ip`; the refusal names its range.
    pub fn permits(&self, ip: IpAddr) -> Result<(), Refusal> {
        if self.allow_private {
            return Ok(());
        }
        let refusal = match ip {
            IpAddr::V4(v4) => refused_v4(v4).map(|(kind, range)| Refusal {
                address: ip,
                kind,
                range,
                embedded: None,
            }),
            IpAddr::V6(v6) => refused_v6(v6)
                .map(|(kind, range)| Refusal {
                    address: ip,
                    kind,
                    range,
                    embedded: None,
                })
                .or_else(|| {
                    let (embedding, v4) = embedded_v4(v6)?;
                    refused_v4(v4).map(|(kind, range)| Refusal {
                        address: ip,
                        kind,
                        range,
                        embedded: Some((embedding, v4)),
                    })
                }),
        };
        let Some(refusal) = refusal else {
            return Ok(());
        };
        // Only the mapped form is the same host as its IPv4 address.
        let same_host = match refusal.embedded {
            Some((Embedding::Mapped, v4)) => Some(IpAddr::V4(v4)),
            _ => None,
        };
        let allowed = |candidate: IpAddr| self.allowed.iter().any(|net| net.contains(&candidate));
        if allowed(ip) || same_host.is_some_and(allowed) {
            Ok(())
        } else {
            Err(refusal)
        }
    }

    /// Checks a URL whose host is a literal address (a name is checked when it is
    /// resolved, at connect time); `Ok` for a host name.
    pub fn permits_url(&self, url: &Url) -> Result<(), Refusal> {
        match literal_ip(url) {
            Some(ip) => self.permits(ip),
            None => Ok(()),
        }
    }
}

/// The address of a URL whose host is a literal address, in any spelling the WHATWG
/// URL standard accepts (`0x7f000001`, `2130706433`, `0177.0.0.1`, `127.1`,
/// `[::ffff:7f00:1]`, …), as the `url` crate normalises it.
pub fn literal_ip(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        Host::Domain(_) => None,
    }
}

#[cfg(test)]
#[path = "target_tests.rs"]
mod tests;
