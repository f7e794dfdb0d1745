//! [`Resolve`]: where [`Dns`](super::Dns) gets its addresses.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

/// Resolves a host name and port to socket addresses.
pub trait Resolve: Send + Sync + 'static {
    /// All addresses of `host` with `port`. An empty list is treated as a
    /// failure by [`Dns`](super::Dns).
    fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> impl Future<Output = io::Result<Vec<SocketAddr>>> + Send;
}

/// The system resolver through `tokio::net::lookup_host` (`getaddrinfo` on
/// a blocking thread). Literal IP addresses resolve to themselves.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioResolver;

impl Resolve for TokioResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}
