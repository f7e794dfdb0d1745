//! [`Resolve`]: where [`Dns`](super::Dns) gets its addresses, their TTLs
//! and SRV records.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// Addresses of a name, with how long the answer may be used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The addresses, each with the port asked for.
    pub addrs: Vec<SocketAddr>,
    /// The answer's remaining TTL, if the resolver exposes it.
    pub ttl: Option<Duration>,
}

/// One SRV record (RFC 2782).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrvRecord {
    /// Lower is preferred.
    pub priority: u16,
    /// Relative weight among records of one priority; 0 means "a very small
    /// chance".
    pub weight: u16,
    /// The port the target serves on.
    pub port: u16,
    /// The target host name (resolved with A/AAAA).
    pub target: String,
}

/// The SRV records of a name, with the answer's TTL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SrvResolved {
    /// The records, in the resolver's order.
    pub records: Vec<SrvRecord>,
    /// The answer's remaining TTL, if the resolver exposes it.
    pub ttl: Option<Duration>,
}

/// Resolves host names (and, optionally, SRV records) for
/// [`Dns`](super::Dns).
///
/// Only [`resolve`](Self::resolve) is required. A resolver that knows TTLs
/// overrides [`lookup`](Self::lookup); one that reads SRV records overrides
/// [`lookup_srv`](Self::lookup_srv).
pub trait Resolve: Send + Sync + 'static {
    /// All addresses of `host` with `port`. An empty list is treated as a
    /// failure by [`Dns`](super::Dns).
    fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> impl Future<Output = io::Result<Vec<SocketAddr>>> + Send;

    /// Like [`resolve`](Self::resolve), with the answer's TTL. The default
    /// knows no TTL.
    fn lookup(&self, host: &str, port: u16) -> impl Future<Output = io::Result<Resolved>> + Send {
        async move {
            Ok(Resolved {
                addrs: self.resolve(host, port).await?,
                ttl: None,
            })
        }
    }

    /// The SRV records of `name` (`_service._proto.domain`). The default
    /// answers `Unsupported`.
    fn lookup_srv(&self, name: &str) -> impl Future<Output = io::Result<SrvResolved>> + Send {
        let _ = name;
        std::future::ready(Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this resolver does not look up SRV records",
        )))
    }
}

/// The system resolver through `tokio::net::lookup_host` (`getaddrinfo` on
/// a blocking thread). Literal IP addresses resolve to themselves. It sees
/// no TTLs and no SRV records: use
/// [`HickoryResolver`](super::HickoryResolver) (feature `dns-hickory`) for
/// those.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioResolver;

impl Resolve for TokioResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}
