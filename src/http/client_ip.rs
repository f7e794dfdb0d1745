//! [`client_ip`]: the address of the client a request came from, as a key
//! for hash pickers.

use std::net::{IpAddr, SocketAddr};

/// The peer address of a server-side connection, stored in a request's
/// extensions the way axum's `ConnectInfo<SocketAddr>` is stored.
///
/// This crate does not depend on axum, and a type from axum is a different
/// type: a server that wants [`client_ip`] to see the peer inserts this one
/// (or a bare `SocketAddr`) into the request's extensions, for instance in
/// the `service_fn` that serves a hyper connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectInfo<T>(pub T);

/// A request key for the hash pickers: the [`client_ip`] of a request
/// (first `X-Forwarded-For` hop, else the peer address), hashed with
/// [`hash_ip`](crate::pick::key::hash_ip) so it agrees with
/// [`ForwardedFor`](crate::pick::ForwardedFor) on the same address.
///
/// ```
/// use std::net::SocketAddr;
/// use tower_lb::http::{ClientIp, ConnectInfo};
/// use tower_lb::pick::{RequestKey, key::hash_ip};
///
/// let mut req = http::Request::new(());
/// let peer: SocketAddr = "198.51.100.2:41000".parse().unwrap();
/// req.extensions_mut().insert(ConnectInfo(peer));
/// assert_eq!(ClientIp.key(&req), Some(hash_ip(peer.ip())));
/// // A balancer with client-IP affinity: `pick::RingHash::new(ClientIp)`.
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientIp;

impl<B> crate::pick::RequestKey<::http::Request<B>> for ClientIp {
    fn key(&self, req: &::http::Request<B>) -> Option<u64> {
        client_ip(req).map(crate::pick::key::hash_ip)
    }
}

/// The client's IP address: the first hop of the first `X-Forwarded-For`
/// header, or else the peer address in the request's extensions
/// ([`ConnectInfo<SocketAddr>`], then a bare `SocketAddr`). `None` when
/// neither is there or the header's first hop is not an address.
///
/// `X-Forwarded-For` is written by the client as much as by proxies: trust
/// it only behind a proxy that overwrites it, and otherwise use the peer
/// address. Hops may be `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1` or
/// `[2001:db8::1]:80`. Cost: one header lookup and one parse; no
/// allocation.
///
/// ```
/// use std::net::{IpAddr, SocketAddr};
/// use tower_lb::http::{ConnectInfo, client_ip};
///
/// let req = http::Request::get("/")
///     .header("x-forwarded-for", "203.0.113.7, 10.0.0.1")
///     .body(())
///     .unwrap();
/// assert_eq!(client_ip(&req), Some(IpAddr::from([203, 0, 113, 7])));
///
/// let mut req = http::Request::new(());
/// let peer: SocketAddr = "198.51.100.2:41000".parse().unwrap();
/// req.extensions_mut().insert(ConnectInfo(peer));
/// assert_eq!(client_ip(&req), Some(peer.ip()));
/// ```
pub fn client_ip<B>(req: &::http::Request<B>) -> Option<IpAddr> {
    if let Some(value) = req.headers().get("x-forwarded-for") {
        let first = value.to_str().ok()?.split(',').next()?.trim();
        return parse_hop(first);
    }
    let ext = req.extensions();
    ext.get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .or_else(|| ext.get::<SocketAddr>().map(SocketAddr::ip))
}

/// An address with or without a port.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xff(values: &[&str]) -> ::http::Request<()> {
        let mut b = ::http::Request::get("/");
        for v in values {
            b = b.header("x-forwarded-for", *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn forwarded_for_forms() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(client_ip(&xff(&["1.2.3.4"])), ip("1.2.3.4"));
        assert_eq!(client_ip(&xff(&[" 1.2.3.4:99 , 5.6.7.8"])), ip("1.2.3.4"));
        assert_eq!(
            client_ip(&xff(&["2001:db8::1, 1.1.1.1"])),
            ip("2001:db8::1")
        );
        assert_eq!(client_ip(&xff(&["[2001:db8::1]:80"])), ip("2001:db8::1"));
        assert_eq!(client_ip(&xff(&["9.9.9.9", "1.1.1.1"])), ip("9.9.9.9"));
        assert_eq!(client_ip(&xff(&["unknown"])), None);
        assert_eq!(client_ip(&xff(&[""])), None);
    }

    #[test]
    fn header_wins_over_peer_and_peer_is_fallback() {
        let peer: SocketAddr = "10.1.1.1:5000".parse().unwrap();
        let mut req = xff(&["1.2.3.4"]);
        req.extensions_mut().insert(ConnectInfo(peer));
        assert_eq!(client_ip(&req), Some("1.2.3.4".parse().unwrap()));
        let mut req = xff(&[]);
        assert_eq!(client_ip(&req), None);
        req.extensions_mut().insert(peer);
        assert_eq!(client_ip(&req), Some(peer.ip()));
        req.extensions_mut()
            .insert(ConnectInfo("10.2.2.2:1".parse::<SocketAddr>().unwrap()));
        assert_eq!(client_ip(&req), Some("10.2.2.2".parse().unwrap()));
    }
}
