//! Request keys for `http::Request` (feature `http`): a header, the path,
//! the client IP. One `X-Forwarded-For` parser serves [`ForwardedFor`],
//! [`ClientIp`] and [`client_ip`], so they agree on every request.

use std::net::{IpAddr, SocketAddr};

use http::header::{HeaderMap, HeaderName};

use crate::error::ConfigError;
use crate::pick::key::{RequestKey, hash_bytes, hash_ip};

mod connection;
pub use connection::{Connection, ConnectionAddrs, hash_connection};

/// The value of a named header, hashed with [`hash_bytes`] over its raw
/// bytes (exactly as received: no trimming, no case folding). A request
/// without the header, or with an empty value, has no key. With several
/// values, the first one counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    name: HeaderName,
}

impl Header {
    /// Keys requests by the header `name`.
    pub fn new(name: HeaderName) -> Self {
        Self { name }
    }

    /// Keys requests by the header named `name` (case-insensitive).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] on field `header` if `name` is not a valid header name.
    pub fn named(name: &str) -> Result<Self, ConfigError> {
        HeaderName::from_bytes(name.as_bytes())
            .map(Self::new)
            .map_err(|_| ConfigError::new("header", name, "a valid HTTP header name"))
    }

    /// The header this extractor reads.
    pub fn name(&self) -> &HeaderName {
        &self.name
    }
}

impl<B> RequestKey<http::Request<B>> for Header {
    #[inline]
    fn key(&self, req: &http::Request<B>) -> Option<u64> {
        let v = req.headers().get(&self.name)?.as_bytes();
        (!v.is_empty()).then(|| hash_bytes(v))
    }
}

/// The URI path's bytes (no query), hashed with [`hash_bytes`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Path;

impl<B> RequestKey<http::Request<B>> for Path {
    #[inline]
    fn key(&self, req: &http::Request<B>) -> Option<u64> {
        let p = req.uri().path();
        (!p.is_empty()).then(|| hash_bytes(p.as_bytes()))
    }
}

/// The first hop of `X-Forwarded-For`, as this crate reads it.
///
/// The first non-empty element of the comma-separated list, across every
/// `X-Forwarded-For` line in order, trimmed of spaces and tabs. It is an
/// address when it parses as one: `203.0.113.7`, `2001:db8::1`,
/// `[2001:db8::1]`, `203.0.113.7:41234` or `[2001:db8::1]:443` (the port is
/// dropped); otherwise (`unknown`, an obfuscated identifier as RFC 7239
/// allows) it is a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop<'a> {
    /// The client's address.
    Addr(IpAddr),
    /// Not an address: the trimmed bytes of the element.
    Token(&'a [u8]),
}

/// The first hop of `X-Forwarded-For` in `headers` (see [`Hop`]); `None`
/// without the header or without a non-empty element. No allocation.
pub fn first_hop(headers: &HeaderMap) -> Option<Hop<'_>> {
    let hop = headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .find(|hop| !hop.is_empty())?;
    Some(match std::str::from_utf8(hop).ok().and_then(parse_addr) {
        Some(ip) => Hop::Addr(ip),
        None => Hop::Token(hop),
    })
}

/// An address with or without a port, IPv6 with or without brackets.
fn parse_addr(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    s.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

/// The key of a hop: [`hash_ip`] of an address (so spellings of one
/// address agree), [`hash_bytes`] of a token.
fn hop_key(hop: Hop<'_>) -> u64 {
    match hop {
        Hop::Addr(ip) => hash_ip(ip),
        Hop::Token(t) => hash_bytes(t),
    }
}

/// Keys requests by the first hop of `X-Forwarded-For` ([`first_hop`]):
/// [`hash_ip`] of an address, [`hash_bytes`] of a token. No header (or no
/// non-empty element): no key, and the request goes to the fallback picker.
///
/// The first hop is whatever the client or the first proxy wrote. Use this
/// extractor only behind a proxy that sets or sanitises the header; it is an
/// affinity key, not an identity. [`ClientIp`] is the same key with the
/// connection's peer address when the header is absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardedFor;

impl ForwardedFor {
    /// The key of a request with these headers.
    pub fn key_of(headers: &HeaderMap) -> Option<u64> {
        first_hop(headers).map(hop_key)
    }
}

impl<B> RequestKey<http::Request<B>> for ForwardedFor {
    #[inline]
    fn key(&self, req: &http::Request<B>) -> Option<u64> {
        Self::key_of(req.headers())
    }
}

/// The peer address of a server-side connection, stored in a request's
/// extensions the way axum's `ConnectInfo<SocketAddr>` is stored.
///
/// This crate does not depend on axum, and a type from axum is a different
/// type: a server that wants [`client_ip`] to see the peer inserts this one
/// (or a bare `SocketAddr`) into the request's extensions, for instance in
/// the `service_fn` that serves a hyper connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectInfo<T>(pub T);

/// The peer address in a request's extensions: [`ConnectInfo<SocketAddr>`],
/// then a bare `SocketAddr`.
fn peer<B>(req: &http::Request<B>) -> Option<IpAddr> {
    let ext = req.extensions();
    ext.get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .or_else(|| ext.get::<SocketAddr>().map(SocketAddr::ip))
}

/// Keys requests by client: the first hop of `X-Forwarded-For` exactly as
/// [`ForwardedFor`] keys it, or, without the header, [`hash_ip`] of the
/// peer address in the request's extensions. So the two agree on every
/// request that has the header.
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

impl<B> RequestKey<http::Request<B>> for ClientIp {
    fn key(&self, req: &http::Request<B>) -> Option<u64> {
        match first_hop(req.headers()) {
            Some(hop) => Some(hop_key(hop)),
            None => peer(req).map(hash_ip),
        }
    }
}

/// The client's IP address: the first hop of `X-Forwarded-For` when it is
/// an address ([`first_hop`]); otherwise — no header, or a first hop that is
/// a token such as `unknown` — the peer address in the request's extensions
/// ([`ConnectInfo<SocketAddr>`], then a bare `SocketAddr`). `None` when
/// neither gives one.
///
/// `X-Forwarded-For` is written by the client as much as by proxies: trust
/// it only behind a proxy that overwrites it, and otherwise use the peer
/// address. Cost: one header scan and one parse; no allocation.
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
pub fn client_ip<B>(req: &http::Request<B>) -> Option<IpAddr> {
    match first_hop(req.headers()) {
        Some(Hop::Addr(ip)) => Some(ip),
        _ => peer(req),
    }
}

#[cfg(test)]
mod tests;
