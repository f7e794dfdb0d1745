use std::net::SocketAddr;

use http::header::TRAILER;
use proptest::prelude::*;

use super::*;
use crate::http::ConnectInfo;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[test]
fn strips_the_named_and_the_listed_fields_and_keeps_the_rest() {
    let mut h = headers(&[
        ("connection", "X-Private, keep-alive"),
        ("connection", "x-other"),
        ("x-private", "1"),
        ("x-other", "2"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("te", "gzip, trailers"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "websocket"),
        ("proxy-authorization", "Basic eA=="),
        ("proxy-authenticate", "Basic"),
        ("trailer", "x-checksum"),
        ("x-end", "a"),
        ("x-end", "b"),
    ]);
    assert!(strip_hop_by_hop(&mut h), "TE listed trailers");
    let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
    assert_eq!(left, ["trailer", "x-end"]);
    assert_eq!(h.get_all("x-end").iter().count(), 2);
    assert_eq!(h[TRAILER], "x-checksum");
    assert!(!strip_hop_by_hop(&mut headers(&[("te", "gzip")])));
}

#[test]
fn a_connection_token_that_is_no_field_name_is_skipped() {
    let mut h = headers(&[
        ("connection", "close, , bad name, x-a"),
        ("x-a", "1"),
        ("x-b", "2"),
    ]);
    strip_hop_by_hop(&mut h);
    assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["x-b"]);
}

proptest! {
    /// Whatever the fields and whatever `Connection` names, no hop-by-hop
    /// field is left, and every other field is left as it was.
    #[test]
    fn only_hop_by_hop_fields_go(
        fields in proptest::collection::vec((0usize..12, "[a-z0-9]{1,6}"), 0..12),
        named in proptest::collection::vec(0usize..12, 0..4),
    ) {
        const POOL: [&str; 12] = [
            "x-a", "x-b", "x-c", "accept", "cookie", "keep-alive", "te", "upgrade",
            "proxy-connection", "transfer-encoding", "trailer", "proxy-authorization",
        ];
        let mut h = HeaderMap::new();
        for (i, v) in &fields {
            h.append(POOL[*i], HeaderValue::from_str(v).unwrap());
        }
        let list: Vec<&str> = named.iter().map(|i| POOL[*i]).collect();
        if !list.is_empty() {
            h.append(CONNECTION, HeaderValue::from_str(&list.join(", ")).unwrap());
        }
        let before = h.clone();
        strip_hop_by_hop(&mut h);
        for name in POOL {
            let gone = HOP_BY_HOP.iter().any(|n| n == name) || list.contains(&name);
            if gone {
                prop_assert!(!h.contains_key(name), "{} left", name);
            } else {
                let kept: Vec<_> = h.get_all(name).iter().collect();
                let was: Vec<_> = before.get_all(name).iter().collect();
                prop_assert_eq!(kept, was);
            }
        }
        prop_assert!(!h.contains_key(CONNECTION));
    }
}

fn config(host: HostPolicy, forwarded: XForwarded) -> Config {
    Config {
        host,
        forwarded,
        ..Config::default()
    }
}

fn parts(req: http::request::Builder) -> Parts {
    let mut req = req.body(()).unwrap();
    let peer: SocketAddr = "198.51.100.2:41000".parse().unwrap();
    req.extensions_mut().insert(ConnectInfo(peer));
    req.into_parts().0
}

#[test]
fn forwarded_headers_are_appended_to_a_trusted_chain() {
    let mut p = parts(
        http::Request::get("/x")
            .header(HOST, "shop.example")
            .header("x-forwarded-for", "203.0.113.7")
            .header("x-forwarded-for", "10.0.0.1")
            .header("x-forwarded-proto", "https"),
    );
    rewrite_request(&mut p, &config(HostPolicy::Keep, XForwarded::Append));
    let h = &p.headers;
    assert_eq!(h[X_FORWARDED_FOR], "203.0.113.7, 10.0.0.1, 198.51.100.2");
    assert_eq!(h.get_all(X_FORWARDED_FOR).iter().count(), 1);
    assert_eq!(
        h[X_FORWARDED_PROTO], "https",
        "the first proxy saw the client"
    );
    assert_eq!(h[X_FORWARDED_HOST], "shop.example");
    assert_eq!(h[HOST], "shop.example");
}

#[test]
fn at_the_edge_the_clients_forwarded_headers_are_replaced() {
    let mut p = parts(
        http::Request::get("/x")
            .header(HOST, "shop.example")
            .header("x-forwarded-for", "6.6.6.6")
            .header("x-forwarded-host", "evil.example")
            .header("x-forwarded-proto", "https"),
    );
    rewrite_request(&mut p, &config(HostPolicy::Keep, XForwarded::Replace));
    let h = &p.headers;
    assert_eq!(h[X_FORWARDED_FOR], "198.51.100.2");
    assert_eq!(h[X_FORWARDED_HOST], "shop.example");
    assert_eq!(h[X_FORWARDED_PROTO], "http");
}

#[test]
fn host_policies() {
    let req = || http::Request::get("/x").header(HOST, "shop.example");
    let mut p = parts(req());
    rewrite_request(&mut p, &config(HostPolicy::Replica, XForwarded::Append));
    assert!(
        p.headers.get(HOST).is_none(),
        "the client derives it from the URI"
    );
    assert_eq!(p.headers[X_FORWARDED_HOST], "shop.example");
    let mut p = parts(req());
    let set = HostPolicy::Set(HeaderValue::from_static("api.internal"));
    rewrite_request(&mut p, &config(set, XForwarded::Append));
    assert_eq!(p.headers[HOST], "api.internal");
    // HTTP/2: no `Host`, the authority in the URI; kept as `Host`.
    let mut p = parts(http::Request::get("https://user@shop.example:8443/x"));
    rewrite_request(&mut p, &config(HostPolicy::Keep, XForwarded::Append));
    assert_eq!(p.headers[HOST], "shop.example:8443");
    assert_eq!(p.headers[X_FORWARDED_PROTO], "https");
    // A `Host` named in `Connection` is still the client's.
    let mut p = parts(req().header(CONNECTION, "host"));
    rewrite_request(&mut p, &config(HostPolicy::Keep, XForwarded::Append));
    assert_eq!(p.headers[HOST], "shop.example");
}

#[test]
fn te_trailers_is_sent_on_and_nothing_without_a_peer() {
    let mut p = http::Request::get("/x")
        .header(TE, "trailers, deflate")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    rewrite_request(&mut p, &Config::default());
    assert_eq!(p.headers[TE], "trailers");
    assert!(p.headers.get(X_FORWARDED_FOR).is_none());
    assert!(p.headers.get(X_FORWARDED_HOST).is_none());
    assert!(p.headers.get(HOST).is_none());
}
