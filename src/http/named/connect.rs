//! [`DialAddr`]: a connector that always dials one address.

use std::net::SocketAddr;
use std::task::{Context, Poll};

use ::http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

use crate::error::ConfigError;

/// A hyper-util connector (`tower::Service<Uri>`) that connects to one
/// fixed socket address whatever the request's URI names.
///
/// It is the "fixed resolution" under a replica's client: the request keeps
/// `https://api.internal/...` as its URI (so the `Host` header, HTTP/2's
/// `:authority`, the pool key and, with TLS on top, the server name are the
/// service's), while the TCP connection goes to the replica's address. It
/// wraps any connector `C` (default: hyper-util's [`HttpConnector`]) and
/// hands it `http://ADDR` instead of the request's URI.
///
/// Cost per connection: one `Uri` clone (reference counts).
///
/// ```
/// use tower_lb::http::DialAddr;
///
/// let dial = DialAddr::new("10.0.3.7:8443".parse().unwrap())?;
/// assert_eq!(dial.addr().port(), 8443);
/// # Ok::<(), tower_lb::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct DialAddr<C = HttpConnector> {
    inner: C,
    addr: SocketAddr,
    uri: Uri,
}

impl DialAddr {
    /// Dials `addr` with an [`HttpConnector`] with `TCP_NODELAY` on (small
    /// requests should not wait for Nagle's algorithm).
    ///
    /// # Errors
    ///
    /// As [`with_connector`](Self::with_connector).
    pub fn new(addr: SocketAddr) -> Result<Self, ConfigError> {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        Self::with_connector(http, addr)
    }
}

impl<C> DialAddr<C> {
    /// Dials `addr` through `inner`, a connector that understands
    /// `http://IP:PORT` (configure timeouts or keep-alive on it).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `addr` when the port is 0 or the address
    /// cannot be written as a URI authority (an IPv6 address with a zone
    /// index, `fe80::1%eth0`, which hyper-util's connector cannot dial).
    pub fn with_connector(inner: C, addr: SocketAddr) -> Result<Self, ConfigError> {
        let bad = || {
            ConfigError::new(
                "addr",
                addr,
                "an IP address with a non-zero port (IPv6 without a zone index)",
            )
        };
        if addr.port() == 0 {
            return Err(bad());
        }
        if let SocketAddr::V6(v6) = addr
            && v6.scope_id() != 0
        {
            return Err(bad());
        }
        let uri = format!("http://{addr}").parse().map_err(|_| bad())?;
        Ok(Self { inner, addr, uri })
    }

    /// The address every connection goes to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The wrapped connector.
    pub fn get_ref(&self) -> &C {
        &self.inner
    }
}

impl<C: Service<Uri>> Service<Uri> for DialAddr<C> {
    type Response = C::Response;
    type Error = C::Error;
    type Future = C::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, _dst: Uri) -> C::Future {
        self.inner.call(self.uri.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    #[test]
    fn refuses_port_zero_and_zoned_ipv6() {
        for bad in ["10.0.0.1:0", "[fe80::1%2]:443"] {
            let addr: SocketAddr = bad.parse().unwrap();
            assert_eq!(DialAddr::new(addr).unwrap_err().field(), "addr", "{bad}");
        }
        assert!(DialAddr::new("[::1]:443".parse().unwrap()).is_ok());
    }

    #[tokio::test]
    async fn dials_the_address_not_the_uri() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dial = DialAddr::new(addr).unwrap();
        // A name that does not resolve: only the fixed address is dialled.
        let uri: Uri = "http://service.invalid:1/x".parse().unwrap();
        let (conn, accepted) = tokio::join!(dial.oneshot(uri), listener.accept());
        let peer = accepted.unwrap().1;
        let local = conn.unwrap().into_inner().local_addr().unwrap();
        assert_eq!(peer, local);
    }
}
