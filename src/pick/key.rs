//! Request keys: what the hash pickers ([`KeyHash`](super::KeyHash),
//! [`RingHash`](super::RingHash), [`Maglev`](super::Maglev)) hash to choose an
//! endpoint.
//!
//! A [`RequestKey`] turns a request into a 64-bit key, or `None` when the
//! request has none (it then goes to the picker's fallback). The hash pickers
//! mix the key once more before use, so a closure may return small or
//! sequential numbers (user ids) without clustering.
//!
//! | extractor | key |
//! |---|---|
//! | [`key_fn`] | whatever the closure returns |
//! | `Header` (feature `http`) | XXH64 (seed 0) of the raw bytes of the header's first value |
//! | `ForwardedFor` (feature `http`) | the first hop of `X-Forwarded-For`: [`hash_ip`] of it when it is an IP address, else XXH64 of its bytes |
//! | `ClientIp` (feature `http`) | the same, or the peer address without the header |
//! | `Path` (feature `http`) | XXH64 (seed 0) of the URI path's bytes (no query) |
//! | `Connection` (feature `http`) | the incoming connection: XXH64 (seed 0) of the peer's address and port and, when the server stored them, the local ones (`http::hash_connection`); one key per connection, as a layer-4 balancer's 5-tuple hash |
//!
//! The HTTP extractors live in [`crate::http`] (their one
//! `X-Forwarded-For` parser is [`crate::http::first_hop`]) and are
//! re-exported here.
//!
//! These definitions are fixed: the same request gives the same key in every
//! process and every release, so several gateways agree on affinity.
//! [`hash_bytes`] and [`hash_ip`] are public so a closure can produce keys
//! that agree with the built-in extractors (for example a client IP taken
//! from the socket).
//!
//! ```
//! use tower_lb::pick::key::{RequestKey, hash_bytes, key_fn};
//!
//! // Requests keyed by their tenant's name.
//! struct Call { tenant: &'static str }
//! let by_tenant = key_fn(|c: &Call| Some(hash_bytes(c.tenant.as_bytes())));
//! assert_eq!(by_tenant.key(&Call { tenant: "acme" }), Some(hash_bytes(b"acme")));
//! ```

use std::fmt;
use std::net::IpAddr;

#[cfg(feature = "http")]
pub use crate::http::{ClientIp, Connection, ForwardedFor, Header, Path};

/// Extracts a 64-bit key from a request.
///
/// Return `None` when the request carries no key; the hash pickers then hand
/// it to their fallback picker. `key` runs on every pick: keep it cheap and
/// allocation-free.
pub trait RequestKey<Req>: Send + Sync + 'static {
    /// The request's key, or `None` if it has none.
    fn key(&self, req: &Req) -> Option<u64>;
}

/// XXH64 with seed 0 over `bytes`: the hash behind the `Header`, `Path`
/// and non-IP `ForwardedFor` keys.
#[inline]
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh64::xxh64(bytes, 0)
}

/// The key of a client IP address: XXH64 (seed 0) of its network-order
/// octets, 4 for IPv4 and 16 for IPv6. An IPv4-mapped IPv6 address
/// (`::ffff:192.0.2.1`) is hashed as the IPv4 address it maps, so both
/// spellings of one client agree.
pub fn hash_ip(ip: IpAddr) -> u64 {
    match ip.to_canonical() {
        IpAddr::V4(v4) => hash_bytes(&v4.octets()),
        IpAddr::V6(v6) => hash_bytes(&v6.octets()),
    }
}

/// A request key computed by a closure; see [`key_fn`].
#[derive(Clone, Copy)]
pub struct KeyFn<F> {
    f: F,
}

/// Keys requests with a closure returning `Option<u64>` (`None`: no key).
///
/// The closure's result is used as the key as is (the pickers mix it), so
/// returning a user id or a tenant number directly is fine. To agree with
/// the built-in extractors, hash strings with [`hash_bytes`] and addresses
/// with [`hash_ip`].
///
/// ```
/// use tower_lb::pick::key::{RequestKey, hash_ip, key_fn};
/// use std::net::SocketAddr;
///
/// // Client IP from the connection, stored in the extensions by the server.
/// let by_peer = key_fn(|req: &http::Request<()>| {
///     req.extensions().get::<SocketAddr>().map(|a| hash_ip(a.ip()))
/// });
/// let mut req = http::Request::new(());
/// assert_eq!(by_peer.key(&req), None);
/// req.extensions_mut().insert("192.0.2.1:5000".parse::<SocketAddr>()?);
/// assert_eq!(by_peer.key(&req), Some(hash_ip("192.0.2.1".parse()?)));
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub fn key_fn<Req, F>(f: F) -> KeyFn<F>
where
    F: Fn(&Req) -> Option<u64> + Send + Sync + 'static,
{
    KeyFn { f }
}

impl<Req, F> RequestKey<Req> for KeyFn<F>
where
    F: Fn(&Req) -> Option<u64> + Send + Sync + 'static,
{
    #[inline]
    fn key(&self, req: &Req) -> Option<u64> {
        (self.f)(req)
    }
}

impl<F> fmt::Debug for KeyFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyFn(..)")
    }
}
