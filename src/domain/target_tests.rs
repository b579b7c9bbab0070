use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn refused(text: &str) -> Refusal {
    TargetPolicy::default()
        .permits(ip(text))
        .expect_err(&format!("{text} must be refused"))
}

fn permitted(text: &str) -> bool {
    TargetPolicy::default().permits(ip(text)).is_ok()
}

/// Each range: its first and last address and one inside are refused with its kind
/// and CIDR; the neighbours just outside are permitted.
#[test]
fn refused_ranges_edge_by_edge() {
    let cases: &[(&str, &str, &str, RangeKind, &str, &str)] = &[
        // (just below, first, last, kind, range, just above)
        (
            "",
            "0.0.0.0",
            "0.255.255.255",
            RangeKind::Unspecified,
            "0.0.0.0/8",
            "1.0.0.0",
        ),
        (
            "9.255.255.255",
            "10.0.0.0",
            "10.255.255.255",
            RangeKind::Private,
            "10.0.0.0/8",
            "11.0.0.0",
        ),
        (
            "100.63.255.255",
            "100.64.0.0",
            "100.127.255.255",
            RangeKind::SharedCgnat,
            "100.64.0.0/10",
            "100.128.0.0",
        ),
        (
            "126.255.255.255",
            "127.0.0.0",
            "127.255.255.255",
            RangeKind::Loopback,
            "127.0.0.0/8",
            "128.0.0.0",
        ),
        (
            "169.253.255.255",
            "169.254.0.0",
            "169.254.255.255",
            RangeKind::LinkLocal,
            "169.254.0.0/16",
            "169.255.0.0",
        ),
        (
            "172.15.255.255",
            "172.16.0.0",
            "172.31.255.255",
            RangeKind::Private,
            "172.16.0.0/12",
            "172.32.0.0",
        ),
        (
            "192.167.255.255",
            "192.168.0.0",
            "192.168.255.255",
            RangeKind::Private,
            "192.168.0.0/16",
            "192.169.0.0",
        ),
        (
            "223.255.255.255",
            "224.0.0.0",
            "239.255.255.255",
            RangeKind::Multicast,
            "224.0.0.0/4",
            "",
        ),
        (
            "",
            "240.0.0.0",
            "255.255.255.255",
            RangeKind::Reserved,
            "240.0.0.0/4",
            "",
        ),
        ("", "::", "::", RangeKind::Unspecified, "::/128", ""),
        // (`::2` is the IPv4-compatible form of 0.0.0.2, refused as well.)
        ("", "::1", "::1", RangeKind::Loopback, "::1/128", ""),
        (
            "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fe80::",
            "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            RangeKind::LinkLocal,
            "fe80::/10",
            "",
        ),
        (
            "",
            "fec0::",
            "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            RangeKind::SiteLocal,
            "fec0::/10",
            "",
        ),
        (
            "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fc00::",
            "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            RangeKind::UniqueLocal,
            "fc00::/7",
            "fe00::",
        ),
        (
            "",
            "ff00::",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            RangeKind::Multicast,
            "ff00::/8",
            "",
        ),
    ];
    for (below, first, last, kind, range, above) in cases {
        for inside in [first, last] {
            let refusal = refused(inside);
            assert_eq!(refusal.kind, *kind, "{inside}");
            assert_eq!(refusal.range, *range, "{inside}");
            assert_eq!(refusal.embedded, None, "{inside}");
        }
        for outside in [below, above].into_iter().filter(|s| !s.is_empty()) {
            assert!(permitted(outside), "{outside} is outside {range}");
        }
    }
}

#[test]
fn the_metadata_address_is_link_local() {
    let refusal = refused("169.254.169.254");
    assert_eq!(refusal.kind, RangeKind::LinkLocal);
    assert_eq!(
        refusal.to_string(),
        "169.254.169.254 is a link-local address (169.254.0.0/16)"
    );
}

#[test]
fn public_addresses_are_permitted() {
    for public in [
        "1.1.1.1",
        "8.8.8.8",
        "93.184.216.34",
        "2606:4700:4700::1111",
        "2001:4860:4860::8888",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
    ] {
        assert!(permitted(public), "{public}");
    }
}

#[test]
fn ipv6_forms_of_refused_ipv4_addresses_are_refused() {
    let cases = [
        (
            "::ffff:127.0.0.1",
            Embedding::Mapped,
            "127.0.0.1",
            RangeKind::Loopback,
        ),
        (
            "::ffff:7f00:1",
            Embedding::Mapped,
            "127.0.0.1",
            RangeKind::Loopback,
        ),
        (
            "::ffff:169.254.169.254",
            Embedding::Mapped,
            "169.254.169.254",
            RangeKind::LinkLocal,
        ),
        (
            "::ffff:10.1.2.3",
            Embedding::Mapped,
            "10.1.2.3",
            RangeKind::Private,
        ),
        (
            "::127.0.0.1",
            Embedding::Compatible,
            "127.0.0.1",
            RangeKind::Loopback,
        ),
        (
            "::192.168.1.1",
            Embedding::Compatible,
            "192.168.1.1",
            RangeKind::Private,
        ),
        (
            "64:ff9b::7f00:1",
            Embedding::Nat64,
            "127.0.0.1",
            RangeKind::Loopback,
        ),
        (
            "64:ff9b::a9fe:a9fe",
            Embedding::Nat64,
            "169.254.169.254",
            RangeKind::LinkLocal,
        ),
        (
            "64:ff9b::100.64.0.1",
            Embedding::Nat64,
            "100.64.0.1",
            RangeKind::SharedCgnat,
        ),
    ];
    for (v6, embedding, v4, kind) in cases {
        let refusal = refused(v6);
        assert_eq!(refusal.kind, kind, "{v6}");
        assert_eq!(
            refusal.embedded,
            Some((embedding, v4.parse().unwrap())),
            "{v6}"
        );
    }
    assert_eq!(
        refused("::ffff:127.0.0.1").to_string(),
        "::ffff:127.0.0.1 is an IPv4-mapped form of 127.0.0.1, a loopback address (127.0.0.0/8)"
    );
}

/// Every spelling the WHATWG URL parser accepts for a loopback address ends up as the
/// same address, and is refused.
#[test]
fn spellings_of_loopback_in_urls_are_refused() {
    let policy = TargetPolicy::default();
    for url in [
        "http://127.0.0.1:9000/",
        "http://0x7f000001/",
        "http://0X7F000001/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.0.0.1/",
        "http://127.1/",
        "http://127.0.1/",
        "http://127.0.0.1./",
        "http://[::1]:9000/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[0:0:0:0:0:ffff:127.0.0.1]/",
        "http://[0000:0000:0000:0000:0000:0000:0000:0001]/",
        "http://[64:ff9b::127.0.0.1]/",
    ] {
        let parsed = Url::parse(url).unwrap();
        let literal = literal_ip(&parsed).unwrap_or_else(|| panic!("{url} is a literal"));
        let refusal = policy.permits_url(&parsed).expect_err(url);
        assert_eq!(refusal.kind, RangeKind::Loopback, "{url}");
        assert_eq!(refusal.address, literal, "{url}");
    }
    for (url, kind) in [
        (
            "http://169.254.169.254/latest/meta-data/",
            RangeKind::LinkLocal,
        ),
        ("http://0xa9fea9fe/", RangeKind::LinkLocal),
        ("http://0/", RangeKind::Unspecified),
        ("http://0.0.0.0:8080/", RangeKind::Unspecified),
        ("http://[::]/", RangeKind::Unspecified),
        ("http://10.1/", RangeKind::Private),
        ("http://[fd00::1]/", RangeKind::UniqueLocal),
        ("http://[fe80::1]/", RangeKind::LinkLocal),
        ("http://255.255.255.255/", RangeKind::Reserved),
        ("http://224.0.0.1/", RangeKind::Multicast),
    ] {
        let refusal = policy
            .permits_url(&Url::parse(url).unwrap())
            .expect_err(url);
        assert_eq!(refusal.kind, kind, "{url}");
    }
}

#[test]
fn host_names_are_left_to_the_resolver() {
    let policy = TargetPolicy::default();
    for url in [
        "http://localhost:9000/",
        "https://example.com/hooks",
        "http://evil.test/",
    ] {
        let parsed = Url::parse(url).unwrap();
        assert_eq!(literal_ip(&parsed), None, "{url}");
        assert!(policy.permits_url(&parsed).is_ok(), "{url}");
    }
}

#[test]
fn allow_private_permits_everything() {
    let policy = TargetPolicy {
        allow_private: true,
        allowed: vec![],
    };
    for address in [
        "127.0.0.1",
        "::1",
        "169.254.169.254",
        "10.0.0.1",
        "::ffff:127.0.0.1",
    ] {
        assert!(policy.permits(ip(address)).is_ok(), "{address}");
    }
}

#[test]
fn allowed_cidrs_permit_only_their_range() {
    let policy = TargetPolicy {
        allow_private: false,
        allowed: vec![
            "10.20.0.0/16".parse().unwrap(),
            "fd00:1::/32".parse().unwrap(),
        ],
    };
    assert!(policy.permits(ip("10.20.3.4")).is_ok());
    assert!(policy.permits(ip("::ffff:10.20.3.4")).is_ok());
    assert!(policy.permits(ip("fd00:1::5")).is_ok());
    assert_eq!(
        policy.permits(ip("10.21.0.1")).unwrap_err().kind,
        RangeKind::Private
    );
    assert_eq!(
        policy.permits(ip("127.0.0.1")).unwrap_err().kind,
        RangeKind::Loopback
    );
    assert_eq!(
        policy.permits(ip("fd00:2::5")).unwrap_err().kind,
        RangeKind::UniqueLocal
    );
    let loopback = TargetPolicy {
        allow_private: false,
        allowed: vec!["127.0.0.1/32".parse().unwrap()],
    };
    assert!(loopback.permits(ip("127.0.0.1")).is_ok());
    assert!(loopback.permits(ip("::ffff:127.0.0.1")).is_ok());
    assert!(loopback.permits(ip("127.0.0.2")).is_err());
    assert!(loopback.permits(ip("::1")).is_err());
}

#[test]
fn special_purpose_ranges_are_refused() {
    for (address, range) in [
        ("192.0.0.8", "192.0.0.0/24"),
        ("192.0.2.1", "192.0.2.0/24"),
        ("198.18.0.0", "198.18.0.0/15"),
        ("198.19.255.255", "198.18.0.0/15"),
        ("198.51.100.7", "198.51.100.0/24"),
        ("203.0.113.200", "203.0.113.0/24"),
        ("100::1", "100::/64"),
        ("2001:db8::1", "2001:db8::/32"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::/32"),
        ("64:ff9b:1::a00:1", "64:ff9b:1::/48"),
    ] {
        let refusal = refused(address);
        assert_eq!(refusal.kind, RangeKind::SpecialPurpose, "{address}");
        assert_eq!(refusal.range, range, "{address}");
    }
    for neighbour in ["198.17.255.255", "198.20.0.0", "203.0.114.1", "2001:1::1"] {
        assert!(permitted(neighbour), "{neighbour}");
    }
}

#[test]
fn six_to_four_forms_of_refused_ipv4_addresses_are_refused() {
    let refusal = refused("2002:7f00:1::1");
    assert_eq!(
        refusal.embedded,
        Some((Embedding::SixToFour, Ipv4Addr::new(127, 0, 0, 1)))
    );
    assert_eq!(refusal.kind, RangeKind::Loopback);
    assert_eq!(refused("2002:a9fe:a9fe::").kind, RangeKind::LinkLocal);
    assert!(permitted("2002:808:808::1"), "6to4 of a public address");
}

/// RFC 3879 deprecated site-local addresses, yet some networks still route `fec0::/10`
/// as their private range; `fe80::/10` below it and `ff00::/8` above it are refused too.
#[test]
fn site_local_addresses_are_refused() {
    for (address, url) in [
        ("fec0::1", "http://[fec0::1]/"),
        ("feff::", "http://[feff::]:80/"),
    ] {
        let refusal = refused(address);
        assert_eq!(refusal.kind, RangeKind::SiteLocal, "{address}");
        assert_eq!(refusal.range, "fec0::/10", "{address}");
        let policy = TargetPolicy::default();
        let refusal = policy
            .permits_url(&Url::parse(url).unwrap())
            .expect_err(url);
        assert_eq!(refusal.kind, RangeKind::SiteLocal, "{url}");
    }
    assert_eq!(
        refused("fec0::1").to_string(),
        "fec0::1 is a deprecated IPv6 site-local address (RFC 3879) (fec0::/10)"
    );
    assert!(permitted("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
}

/// `::ffff:0:a.b.c.d` (RFC 2765 §2.1) is refused whatever IPv4 address it carries; its
/// neighbours, the IPv4-mapped `::ffff:a.b.c.d` of a public address and `::1:0:0:0`,
/// are not.
#[test]
fn ipv4_translated_addresses_are_refused() {
    for address in [
        "::ffff:0:0:0",
        "::ffff:0:127.0.0.1",
        "::ffff:0:8.8.8.8",
        "::ffff:0:ffff:ffff",
    ] {
        let refusal = refused(address);
        assert_eq!(refusal.kind, RangeKind::SpecialPurpose, "{address}");
        assert_eq!(refusal.range, "::ffff:0:0:0/96", "{address}");
        assert_eq!(refusal.embedded, None, "{address}");
    }
    let url = Url::parse("http://[::ffff:0:808:808]/").unwrap();
    assert!(TargetPolicy::default().permits_url(&url).is_err());
    for neighbour in ["::fffe:ffff:ffff:ffff", "::ffff:1:0:0", "::ffff:8.8.8.8"] {
        assert!(permitted(neighbour), "{neighbour}");
    }
}

/// An allowed IPv4 range admits its addresses and their IPv4-mapped forms (the same
/// host through a dual-stack socket), never the IPv4-compatible, NAT64, 6to4 or
/// IPv4-translated forms, which reach a translator or relay: another host.
#[test]
fn an_allowed_ipv4_range_admits_only_its_addresses_and_their_mapped_forms() {
    let policy = TargetPolicy {
        allow_private: false,
        allowed: vec![
            "10.0.0.0/8".parse().unwrap(),
            "127.0.0.1/32".parse().unwrap(),
        ],
    };
    for same_host in ["10.1.2.3", "::ffff:10.1.2.3", "127.0.0.1", "::ffff:7f00:1"] {
        assert!(policy.permits(ip(same_host)).is_ok(), "{same_host}");
    }
    for (other_host, embedding) in [
        ("::10.1.2.3", Some(Embedding::Compatible)),
        ("::127.0.0.1", Some(Embedding::Compatible)),
        ("64:ff9b::10.1.2.3", Some(Embedding::Nat64)),
        ("64:ff9b::7f00:1", Some(Embedding::Nat64)),
        ("2002:a01:203::1", Some(Embedding::SixToFour)),
        ("2002:7f00:1::", Some(Embedding::SixToFour)),
        ("64:ff9b:1::a01:203", None),
        ("::ffff:0:10.1.2.3", None),
    ] {
        let refusal = policy.permits(ip(other_host)).expect_err(other_host);
        assert_eq!(refusal.embedded.map(|(e, _)| e), embedding, "{other_host}");
    }
    // An IPv6 range that contains such a form permits it.
    let nat64 = TargetPolicy {
        allow_private: false,
        allowed: vec!["64:ff9b::a00:0/104".parse().unwrap()],
    };
    assert!(nat64.permits(ip("64:ff9b::10.1.2.3")).is_ok());
    assert!(nat64.permits(ip("10.1.2.3")).is_err());
}
