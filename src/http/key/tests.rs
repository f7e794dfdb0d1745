use super::*;

fn req(headers: &[(&str, &str)]) -> http::Request<()> {
    let mut b = http::Request::builder().uri("http://h/a/b?q=1");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap()
}

fn xff(values: &[&str]) -> http::Request<()> {
    let pairs: Vec<(&str, &str)> = values.iter().map(|v| ("x-forwarded-for", *v)).collect();
    req(&pairs)
}

#[test]
fn header_hashes_raw_value_bytes() {
    let h = Header::named("X-User").unwrap();
    assert_eq!(
        h.key(&req(&[("x-user", "alice")])),
        Some(hash_bytes(b"alice"))
    );
    assert_eq!(h.key(&req(&[])), None);
    assert_eq!(h.key(&req(&[("x-user", "")])), None);
    assert_eq!(
        h.key(&req(&[("x-user", "bob"), ("x-user", "alice")])),
        Some(hash_bytes(b"bob"))
    );
}

#[test]
fn forwarded_for_spellings_agree() {
    let ip = hash_ip("2001:db8::1".parse().unwrap());
    for v in [
        "2001:db8::1",
        "2001:0db8:0:0::1",
        "[2001:db8::1]",
        "[2001:db8::1]:443",
    ] {
        assert_eq!(ForwardedFor.key(&xff(&[v])), Some(ip), "{v}");
    }
    let v4 = hash_ip("192.0.2.1".parse().unwrap());
    for v in [
        "192.0.2.1",
        "::ffff:192.0.2.1",
        "192.0.2.1:8080",
        "\t192.0.2.1 ,1.1.1.1",
    ] {
        assert_eq!(ForwardedFor.key(&xff(&[v])), Some(v4), "{v}");
    }
}

#[test]
fn forwarded_for_empty_elements_are_skipped() {
    let k = ForwardedFor.key(&xff(&[" , ", "unknown, 1.2.3.4"]));
    assert_eq!(k, Some(hash_bytes(b"unknown")));
    assert_eq!(ForwardedFor.key(&xff(&[" ,, "])), None);
}

#[test]
fn path_ignores_query() {
    assert_eq!(Path.key(&req(&[])), Some(hash_bytes(b"/a/b")));
}

#[test]
fn bad_header_name_is_a_config_error() {
    assert_eq!(Header::named("bad header").unwrap_err().field(), "header");
    assert_eq!(Header::named("").unwrap_err().field(), "header");
}

#[test]
fn client_ip_forms() {
    let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
    assert_eq!(client_ip(&xff(&["1.2.3.4"])), ip("1.2.3.4"));
    assert_eq!(client_ip(&xff(&[" 1.2.3.4:99 , 5.6.7.8"])), ip("1.2.3.4"));
    assert_eq!(
        client_ip(&xff(&["2001:db8::1, 1.1.1.1"])),
        ip("2001:db8::1")
    );
    assert_eq!(client_ip(&xff(&["[2001:db8::1]:80"])), ip("2001:db8::1"));
    assert_eq!(client_ip(&xff(&["[2001:db8::1]"])), ip("2001:db8::1"));
    assert_eq!(client_ip(&xff(&["9.9.9.9", "1.1.1.1"])), ip("9.9.9.9"));
    // Empty elements are skipped here as in the key.
    assert_eq!(client_ip(&xff(&["", " , 7.7.7.7"])), ip("7.7.7.7"));
    assert_eq!(client_ip(&xff(&["unknown"])), None);
    assert_eq!(client_ip(&xff(&[""])), None);
}

#[test]
fn header_wins_over_peer_and_peer_is_fallback() {
    let peer: SocketAddr = "10.1.1.1:5000".parse().unwrap();
    let mut r = xff(&["1.2.3.4"]);
    r.extensions_mut().insert(ConnectInfo(peer));
    assert_eq!(client_ip(&r), Some("1.2.3.4".parse().unwrap()));
    let mut r = xff(&[]);
    assert_eq!(client_ip(&r), None);
    r.extensions_mut().insert(peer);
    assert_eq!(client_ip(&r), Some(peer.ip()));
    r.extensions_mut()
        .insert(ConnectInfo("10.2.2.2:1".parse::<SocketAddr>().unwrap()));
    assert_eq!(client_ip(&r), Some("10.2.2.2".parse().unwrap()));
    // A token first hop is not an address: the peer answers.
    let mut r = xff(&["unknown"]);
    r.extensions_mut().insert(peer);
    assert_eq!(client_ip(&r), Some(peer.ip()));
}

proptest::proptest! {
    /// The key extractors and `client_ip` read one parser: with the header
    /// present, `ClientIp` and `ForwardedFor` give the same key, and when
    /// `client_ip` finds an address, its hash is that key.
    #[test]
    fn the_extractors_agree(lines in proptest::collection::vec("[ -~]{0,24}", 0..3)) {
        let mut b = http::Request::builder();
        for l in &lines {
            b = b.header("x-forwarded-for", l.as_str());
        }
        let Ok(mut r) = b.body(()) else { return Ok(()) };
        r.extensions_mut().insert(ConnectInfo("10.9.9.9:1".parse::<SocketAddr>().unwrap()));
        let ff = ForwardedFor.key(&r);
        let ci = ClientIp.key(&r);
        if ff.is_some() {
            proptest::prop_assert_eq!(ci, ff);
        }
        if let Some(Hop::Addr(ip)) = first_hop(r.headers()) {
            proptest::prop_assert_eq!(client_ip(&r), Some(ip));
            proptest::prop_assert_eq!(ff, Some(hash_ip(ip)));
        }
    }
}

#[test]
fn connection_keys_both_ends_then_the_peer_alone() {
    use std::net::SocketAddr;
    let peer: SocketAddr = "198.51.100.2:41000".parse().unwrap();
    let local: SocketAddr = "10.0.0.5:8080".parse().unwrap();
    let with = |f: &dyn Fn(&mut http::Extensions)| {
        let mut r = http::Request::new(());
        f(r.extensions_mut());
        Connection::new().key(&r)
    };
    let both = with(&|e| {
        e.insert(ConnectionAddrs { peer, local });
        e.insert(ConnectInfo(peer));
    });
    assert_eq!(both, Some(hash_connection(peer, Some(local))));
    let peer_only = Some(hash_connection(peer, None));
    assert_ne!(both, peer_only);
    assert_eq!(
        with(&|e| {
            e.insert(ConnectInfo(peer));
        }),
        peer_only
    );
    assert_eq!(
        with(&|e| {
            e.insert(peer);
        }),
        peer_only
    );
    assert_eq!(with(&|_| {}), None);
    // Another source port is another connection; IPv4 and its mapped IPv6
    // spelling are one address.
    let next: SocketAddr = "198.51.100.2:41001".parse().unwrap();
    assert_ne!(hash_connection(next, None), hash_connection(peer, None));
    let mapped: SocketAddr = "[::ffff:198.51.100.2]:41000".parse().unwrap();
    assert_eq!(hash_connection(mapped, None), hash_connection(peer, None));
    // The definition: XXH64 over the 18-byte ends.
    let mut bytes = std::net::Ipv4Addr::new(198, 51, 100, 2)
        .to_ipv6_mapped()
        .octets()
        .to_vec();
    bytes.extend_from_slice(&41000u16.to_be_bytes());
    assert_eq!(hash_connection(peer, None), hash_bytes(&bytes));
}

#[test]
fn connection_reads_a_foreign_peer_type_through_peer_from() {
    #[derive(Clone)]
    struct Theirs(std::net::SocketAddr);
    let peer: std::net::SocketAddr = "192.0.2.9:5000".parse().unwrap();
    let mut r = http::Request::new(());
    r.extensions_mut().insert(Theirs(peer));
    let key = Connection::peer_from(|e| e.get::<Theirs>().map(|t| t.0));
    assert_eq!(key.key(&r), Some(hash_connection(peer, None)));
    // Our own types are not read by a reader of the caller's.
    r.extensions_mut().insert(ConnectInfo(peer));
    let other =
        Connection::peer_from(|e| e.get::<Theirs>().map(|_| "192.0.2.10:1".parse().unwrap()));
    assert_ne!(other.key(&r), key.key(&r));
}
