//! Request keys: what the hash pickers ([`KeyHash`](super::KeyHash),
//! [`RingHash`](super::RingHash), [`Maglev`](super::Maglev)) hash to choose an
//! endpoint.
//!
//! A [`RequestKey`] turns a request into a 64-bit key, or `None` when the
//! request has none (it then goes to the picker's fallback). The hash pickers
//! mix the key once more before use, so a closure may return small or
//! sequential numbers (user ids) without clustering.
//!
//! Ready-made extractors for [`http::Request`] (any body type):
//!
//! | extractor | key |
//! |---|---|
//! | [`Header`] | XXH64 (seed 0) of the raw bytes of the header's first value |
//! | [`ForwardedFor`] | the first hop of `X-Forwarded-For`: [`hash_ip`] of it when it is an IP address, else XXH64 of its bytes |
//! | [`Path`] | XXH64 (seed 0) of the URI path's bytes (no query) |
//! | [`key_fn`] | whatever the closure returns |
//!
//! These definitions are fixed: the same request gives the same key in every
//! process and every release, so several gateways agree on affinity.
//! [`hash_bytes`] and [`hash_ip`] are public so a closure can produce keys
//! that agree with the built-in extractors (for example a client IP taken
//! from the socket).
//!
//! ```
//! use tower_lb::pick::key::{ForwardedFor, Header, RequestKey, key_fn};
//!
//! let req = http::Request::builder()
//!     .header("x-user", "alice")
//!     .header("x-forwarded-for", " 203.0.113.7, 10.0.0.1")
//!     .body(())?;
//! let by_user = Header::named("x-user")?;
//! assert!(by_user.key(&req).is_some());
//! assert_eq!(ForwardedFor.key(&req), Some(tower_lb::pick::key::hash_ip("203.0.113.7".parse()?)));
//! let by_method = key_fn(|req: &http::Request<()>| Some(req.method().as_str().len() as u64));
//! assert_eq!(by_method.key(&req), Some(3));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use http::header::{HeaderMap, HeaderName};

use crate::error::ConfigError;

/// Extracts a 64-bit key from a request.
///
/// Return `None` when the request carries no key; the hash pickers then hand
/// it to their fallback picker. `key` runs on every pick: keep it cheap and
/// allocation-free.
pub trait RequestKey<Req>: Send + Sync + 'static {
    /// The request's key, or `None` if it has none.
    fn key(&self, req: &Req) -> Option<u64>;
}

/// XXH64 with seed 0 over `bytes`: the hash behind [`Header`], [`Path`] and
/// non-IP [`ForwardedFor`] keys.
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

/// The client address in the first hop of `X-Forwarded-For`.
///
/// The first non-empty element of the comma-separated list (across all
/// `X-Forwarded-For` lines, in order), trimmed of spaces and tabs. When it
/// parses as an IP address (`203.0.113.7`, `2001:db8::1`, `[2001:db8::1]`)
/// or a socket address (`203.0.113.7:41234`, whose port is dropped) the key
/// is [`hash_ip`] of the address, so different spellings of one address
/// agree; otherwise (`unknown`, an obfuscated token) it is [`hash_bytes`] of
/// the trimmed element. No header or no non-empty element: no key.
///
/// The first hop is whatever the client or the first proxy wrote. Use this
/// extractor only behind a proxy that sets or sanitises the header; it is an
/// affinity key, not an identity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardedFor;

const X_FORWARDED_FOR: &str = "x-forwarded-for";

impl ForwardedFor {
    /// The key of the first hop in `headers`, as described on the type.
    pub fn key_of(headers: &HeaderMap) -> Option<u64> {
        let hop = headers
            .get_all(X_FORWARDED_FOR)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .find(|hop| !hop.is_empty())?;
        Some(match std::str::from_utf8(hop).ok().and_then(parse_ip) {
            Some(ip) => hash_ip(ip),
            None => hash_bytes(hop),
        })
    }
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    s.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

impl<B> RequestKey<http::Request<B>> for ForwardedFor {
    #[inline]
    fn key(&self, req: &http::Request<B>) -> Option<u64> {
        Self::key_of(req.headers())
    }
}

/// The request URI's path (without the query), hashed with [`hash_bytes`].
/// An empty path (authority-form `CONNECT` targets) has no key; origin-form
/// requests always have at least `/`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Path;

impl<B> RequestKey<http::Request<B>> for Path {
    #[inline]
    fn key(&self, req: &http::Request<B>) -> Option<u64> {
        let p = req.uri().path();
        (!p.is_empty()).then(|| hash_bytes(p.as_bytes()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> http::Request<()> {
        let mut b = http::Request::builder().uri("http://h/a/b?q=1");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
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
            assert_eq!(
                ForwardedFor.key(&req(&[("x-forwarded-for", v)])),
                Some(ip),
                "{v}"
            );
        }
        let v4 = hash_ip("192.0.2.1".parse().unwrap());
        for v in [
            "192.0.2.1",
            "::ffff:192.0.2.1",
            "192.0.2.1:8080",
            "\t192.0.2.1 ,1.1.1.1",
        ] {
            assert_eq!(
                ForwardedFor.key(&req(&[("x-forwarded-for", v)])),
                Some(v4),
                "{v}"
            );
        }
    }

    #[test]
    fn forwarded_for_empty_elements_are_skipped() {
        let k = ForwardedFor.key(&req(&[
            ("x-forwarded-for", " , "),
            ("x-forwarded-for", "unknown, 1.2.3.4"),
        ]));
        assert_eq!(k, Some(hash_bytes(b"unknown")));
        assert_eq!(ForwardedFor.key(&req(&[("x-forwarded-for", " ,, ")])), None);
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
}
