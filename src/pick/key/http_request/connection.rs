//! The connection key: a gateway's incoming connection, by its addresses
//! and ports.
//!
//! A layer-4 balancer such as Azure's Load Balancer hashes the 5-tuple
//! (source address and port, destination address and port, protocol): one
//! connection always lands on the same replica, and since every new
//! connection takes a new source port, a client that reconnects lands
//! somewhere else ("looks like round robin"). [`Connection`] is that key for
//! a gateway built on this crate. [`ClientIp`](super::ClientIp) is the
//! per-client key (the port left out).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use http::Extensions;

use super::ConnectInfo;
use crate::pick::key::RequestKey;

/// The two ends of a server-side connection, stored in a request's
/// extensions by the server that accepted it.
///
/// A hyper server inserts it in the `service_fn` that serves the
/// connection; axum users either insert it the same way or read axum's own
/// `ConnectInfo` with [`Connection::peer_from`].
///
/// ```
/// use tower_lb::http::{Connection, ConnectionAddrs};
/// use tower_lb::pick::RequestKey;
///
/// let addrs = ConnectionAddrs {
///     peer: "198.51.100.2:41000".parse().unwrap(),
///     local: "10.0.0.5:8080".parse().unwrap(),
/// };
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(addrs);
/// assert_eq!(Connection::new().key(&req), Some(addrs.key()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionAddrs {
    /// The client's end: its address and source port.
    pub peer: SocketAddr,
    /// The server's end: the address and port the connection was accepted on.
    pub local: SocketAddr,
}

impl ConnectionAddrs {
    /// The connection's key: [`hash_connection`] of both ends.
    pub fn key(&self) -> u64 {
        hash_connection(self.peer, Some(self.local))
    }
}

/// The key of a connection: XXH64 (seed 0) over the peer's address (16
/// bytes, IPv4 as IPv4-mapped IPv6) and port (2 bytes, big-endian), followed,
/// when known, by the local address and port in the same form. Fixed, like
/// every key of [`crate::pick::key`]: gateways that see the same connection
/// agree.
pub fn hash_connection(peer: SocketAddr, local: Option<SocketAddr>) -> u64 {
    fn put(buf: &mut [u8], at: usize, addr: SocketAddr) -> usize {
        let ip = match addr.ip() {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        buf[at..at + 16].copy_from_slice(&ip.octets());
        buf[at + 16..at + 18].copy_from_slice(&addr.port().to_be_bytes());
        at + 18
    }
    let mut buf = [0u8; 36];
    let mut len = put(&mut buf, 0, peer);
    if let Some(local) = local {
        len = put(&mut buf, len, local);
    }
    crate::pick::key::hash_bytes(&buf[..len])
}

/// Reads a connection's peer address from a request's extensions.
type PeerFrom = fn(&Extensions) -> Option<SocketAddr>;

/// Keys requests by their incoming connection: [`hash_connection`] of the
/// peer's address and port and, when the server stored them, the local
/// address and port. Requests on one connection share a key; a new
/// connection from the same client (a new source port) gets another.
///
/// [`Connection::new`] reads, in order, a [`ConnectionAddrs`] (both ends),
/// then [`ConnectInfo<SocketAddr>`](ConnectInfo) or a bare `SocketAddr`
/// (the peer only). A request with none of them has no key and goes to
/// the hash picker's fallback. Cost: up to three extension look-ups and one
/// XXH64 over at most 36 bytes; no allocation.
///
/// axum stores the peer as its own `ConnectInfo<SocketAddr>` (served with
/// `into_make_service_with_connect_info::<SocketAddr>()`), a type this crate
/// does not depend on; [`Connection::peer_from`] reads it:
///
/// ```
/// use std::net::SocketAddr;
/// use axum::extract::ConnectInfo;
/// use tower_lb::{http::Connection, pick::Maglev};
///
/// let by_connection = Connection::peer_from(|ext| {
///     ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
/// });
/// let picker = Maglev::new(by_connection);
/// ```
#[derive(Clone, Copy)]
pub struct Connection {
    peer_from: Option<PeerFrom>,
}

impl Connection {
    /// The key from this crate's extensions ([`ConnectionAddrs`], then
    /// [`ConnectInfo<SocketAddr>`](ConnectInfo), then a bare `SocketAddr`).
    pub fn new() -> Self {
        Self { peer_from: None }
    }

    /// The key from the peer address `read` finds in a request's
    /// extensions (for a server that stores it in a type of its own, such
    /// as axum's `ConnectInfo`). The local end is left out.
    pub fn peer_from(read: fn(&Extensions) -> Option<SocketAddr>) -> Self {
        Self {
            peer_from: Some(read),
        }
    }

    /// The key of a request with these extensions.
    pub fn key_of(&self, ext: &Extensions) -> Option<u64> {
        if self.peer_from.is_none()
            && let Some(addrs) = ext.get::<ConnectionAddrs>()
        {
            return Some(addrs.key());
        }
        self.peer(ext).map(|peer| hash_connection(peer, None))
    }

    /// The peer's address in these extensions, looked up as for the key
    /// (the HTTP gateway's `X-Forwarded-For` entry).
    pub fn peer(&self, ext: &Extensions) -> Option<SocketAddr> {
        if let Some(read) = self.peer_from {
            return read(ext);
        }
        ext.get::<ConnectionAddrs>()
            .map(|a| a.peer)
            .or_else(|| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0))
            .or_else(|| ext.get::<SocketAddr>().copied())
    }
}

impl Default for Connection {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let from = if self.peer_from.is_some() {
            "a reader of the caller's"
        } else {
            "ConnectionAddrs, ConnectInfo, SocketAddr"
        };
        f.debug_struct("Connection").field("from", &from).finish()
    }
}

impl<B> RequestKey<http::Request<B>> for Connection {
    #[inline]
    fn key(&self, req: &http::Request<B>) -> Option<u64> {
        self.key_of(req.extensions())
    }
}
