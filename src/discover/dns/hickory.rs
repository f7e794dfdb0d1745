//! [`HickoryResolver`]: TTLs and SRV records through hickory-resolver.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{RData, RecordType};

use super::{Resolve, Resolved, SrvRecord, SrvResolved};

/// A [`Resolve`] over hickory-resolver (feature `dns-hickory`): answers
/// carry their TTL (hickory's `valid_until`), and SRV records are read.
/// hickory caches answers for their TTL itself, so asking again before
/// expiry costs no query.
#[derive(Clone)]
pub struct HickoryResolver {
    inner: hickory_resolver::TokioResolver,
}

impl std::fmt::Debug for HickoryResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HickoryResolver").finish_non_exhaustive()
    }
}

impl HickoryResolver {
    /// The system's configuration (`/etc/resolv.conf` on Unix).
    ///
    /// # Errors
    ///
    /// The configuration could not be read.
    pub fn from_system_conf() -> io::Result<Self> {
        let builder = hickory_resolver::TokioResolver::builder_tokio().map_err(io::Error::other)?;
        Ok(Self {
            inner: builder.build().map_err(io::Error::other)?,
        })
    }

    /// Asks exactly `servers` (UDP, then TCP for truncated answers), with
    /// no search domains: for a cluster's DNS service, or a test's.
    ///
    /// # Errors
    ///
    /// hickory refused the configuration.
    pub fn with_name_servers(servers: &[SocketAddr]) -> io::Result<Self> {
        let name_servers = servers
            .iter()
            .map(|s| {
                let mut udp = ConnectionConfig::udp();
                udp.port = s.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = s.port();
                NameServerConfig::new(s.ip(), true, vec![udp, tcp])
            })
            .collect();
        let config = ResolverConfig::from_name_servers(name_servers);
        let builder = hickory_resolver::Resolver::builder_with_config(
            config,
            TokioRuntimeProvider::default(),
        );
        Ok(Self {
            inner: builder.build().map_err(io::Error::other)?,
        })
    }

    /// Wraps a resolver you configured.
    pub fn from_resolver(inner: hickory_resolver::TokioResolver) -> Self {
        Self { inner }
    }
}

fn remaining(valid_until: Instant) -> Duration {
    valid_until.saturating_duration_since(Instant::now())
}

impl Resolve for HickoryResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(self.lookup(host, port).await?.addrs)
    }

    async fn lookup(&self, host: &str, port: u16) -> io::Result<Resolved> {
        let found = self.inner.lookup_ip(host).await.map_err(io::Error::other)?;
        Ok(Resolved {
            addrs: found.iter().map(|ip| SocketAddr::new(ip, port)).collect(),
            ttl: Some(remaining(found.valid_until())),
        })
    }

    async fn lookup_srv(&self, name: &str) -> io::Result<SrvResolved> {
        let found = self
            .inner
            .lookup(name, RecordType::SRV)
            .await
            .map_err(io::Error::other)?;
        let records = found
            .answers()
            .iter()
            .filter_map(|r| match &r.data {
                RData::SRV(srv) => Some(SrvRecord {
                    priority: srv.priority,
                    weight: srv.weight,
                    port: srv.port,
                    target: srv.target.to_string(),
                }),
                _ => None,
            })
            .collect();
        Ok(SrvResolved {
            records,
            ttl: Some(remaining(found.valid_until())),
        })
    }
}
