//! DNS discovery (feature `dns`): keep a balancer's endpoints in step with
//! the addresses a host name resolves to.
//!
//! [`Dns`] resolves `host:port` at once and then every
//! [`interval`](DnsBuilder::interval), and applies the difference to the
//! balancer through its [`Handle`]: new addresses are inserted (each with
//! fresh state, slow start if configured), vanished ones removed (their
//! in-flight requests drain), unchanged ones left alone so their latency
//! history survives.
//!
//! A failed resolution — an error, a timeout, or an empty answer — changes
//! nothing: the last good set stays, and [`DnsStats::failures`] counts it.
//! Treating an empty answer as a failure (unlike Envoy's strict DNS) keeps a
//! DNS blip from emptying the pool. Resolution goes through [`Resolve`]:
//! [`TokioResolver`] (the system resolver, via `tokio::net::lookup_host`)
//! by default, your own for tests or another resolver crate.
//!
//! ```no_run
//! use http_body_util::Empty;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower_lb::discover::dns::{self, Dns};
//! use tower_lb::http;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
//! let lb = http::balance(client.clone(), Vec::<&str>::new())?.build()?;
//! let dns = Dns::builder("backend.internal", 8080).build()?;
//! let stats = dns.stats();
//! let task = dns.spawn(lb.handle(), dns::origin_endpoints(client, "http")?);
//! // ... use `lb`; `stats.failures()` counts failed resolutions.
//! # drop(task); Ok(()) }
//! ```

mod resolve;
mod stats;

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::MissedTickBehavior;

use crate::http::{Origin, SetOrigin};
use crate::error::check_nonzero;
use crate::pick::Picker;
use crate::{ConfigError, Handle};

pub use resolve::{Resolve, TokioResolver};
pub use stats::DnsStats;

/// Default re-resolution interval: Envoy's `dns_refresh_rate` default
/// (5000 ms).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// Default time allowed for one resolution: the common resolver timeout
/// (glibc's and c-ares' 5 s per query).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Configures a [`Dns`] driver; see the [module docs](self).
#[derive(Debug, Clone)]
#[must_use]
pub struct DnsBuilder<R = TokioResolver> {
    host: String,
    port: u16,
    interval: Duration,
    timeout: Duration,
    resolver: R,
}

impl<R: Resolve> DnsBuilder<R> {
    /// How often to resolve again (> 0; default [`DEFAULT_INTERVAL`]).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// How long one resolution may take before it counts as a failure
    /// (> 0; default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Resolves with `resolver` instead of [`TokioResolver`].
    pub fn resolver<R2: Resolve>(self, resolver: R2) -> DnsBuilder<R2> {
        DnsBuilder {
            host: self.host,
            port: self.port,
            interval: self.interval,
            timeout: self.timeout,
            resolver,
        }
    }

    /// Validates the configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `dns.host` (empty), `dns.port` (0),
    /// `dns.interval` or `dns.timeout` (zero).
    pub fn build(self) -> Result<Dns<R>, ConfigError> {
        if self.host.is_empty() {
            return Err(ConfigError::new(
                "dns.host",
                self.host,
                "a non-empty host name",
            ));
        }
        if self.port == 0 {
            return Err(ConfigError::new("dns.port", 0, "a port in 1..=65535"));
        }
        Ok(Dns {
            interval: check_nonzero("dns.interval", self.interval)?,
            timeout: check_nonzero("dns.timeout", self.timeout)?,
            host: self.host,
            port: self.port,
            resolver: self.resolver,
            stats: DnsStats::default(),
        })
    }
}

/// A DNS discovery driver for one host name and port; see the
/// [module docs](self).
#[derive(Debug)]
pub struct Dns<R = TokioResolver> {
    host: String,
    port: u16,
    interval: Duration,
    timeout: Duration,
    resolver: R,
    stats: DnsStats,
}

impl Dns {
    /// A builder resolving `host` (a name or a literal IP) with `port`,
    /// using [`TokioResolver`].
    pub fn builder(host: impl Into<String>, port: u16) -> DnsBuilder {
        DnsBuilder {
            host: host.into(),
            port,
            interval: DEFAULT_INTERVAL,
            timeout: DEFAULT_TIMEOUT,
            resolver: TokioResolver,
        }
    }
}

impl<R: Resolve> Dns<R> {
    /// The driver's counters (shared with the running driver).
    pub fn stats(&self) -> DnsStats {
        self.stats.clone()
    }

    /// Keeps `handle`'s balancer in step with the host's addresses: the
    /// returned future resolves at once, then every interval, and applies
    /// each answer. `make` turns a new address into the endpoint's key and
    /// service (`None` skips the address); the key is what the driver later
    /// removes, so it replaces and then owns an endpoint with the same key.
    ///
    /// The future ends when every `Balance` and `Handle` of the balancer
    /// other than its own `handle` is dropped (checked once per interval);
    /// otherwise it runs until it is dropped or its task aborted. Cost per
    /// round: one resolution plus O(n) set arithmetic; handle calls only for
    /// changed addresses.
    pub async fn run<K, S, P, C, F>(self, handle: Handle<K, S, P, C>, mut make: F)
    where
        K: Hash + Eq + Clone,
        P: Picker,
        F: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        let mut current: HashMap<SocketAddr, K> = HashMap::new();
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if Arc::strong_count(&handle.shared) == 1 {
                return;
            }
            let answer =
                tokio::time::timeout(self.timeout, self.resolver.resolve(&self.host, self.port))
                    .await;
            let counters = &self.stats.0;
            let answer = match answer {
                Ok(Ok(addrs)) if !addrs.is_empty() => addrs,
                _ => {
                    counters.failures.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            // Keep the resolver's order (it is the insertion order, which
            // round robin follows); drop repeats.
            let mut fresh = HashSet::with_capacity(answer.len());
            let addrs: Vec<SocketAddr> = answer.into_iter().filter(|a| fresh.insert(*a)).collect();
            current.retain(|addr, key| {
                let keep = fresh.contains(addr);
                if !keep {
                    handle.remove(key);
                }
                keep
            });
            for addr in addrs {
                if current.contains_key(&addr) {
                    continue;
                }
                if let Some((key, service)) = make(addr) {
                    handle.insert(key.clone(), service);
                    current.insert(addr, key);
                }
            }
            counters.endpoints.store(current.len(), Ordering::Relaxed);
            counters.resolutions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Spawns [`run`](Self::run) on the current tokio runtime. Abort the
    /// returned handle to stop it; read counters through
    /// [`stats`](Self::stats) taken before.
    pub fn spawn<K, S, P, C, F>(
        self,
        handle: Handle<K, S, P, C>,
        make: F,
    ) -> tokio::task::JoinHandle<()>
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        S: Send + Sync + 'static,
        P: Picker,
        C: Send + Sync + 'static,
        F: FnMut(SocketAddr) -> Option<(K, S)> + Send + 'static,
    {
        tokio::spawn(self.run(handle, make))
    }
}

/// An HTTP endpoint: its key and service.
type OriginEndpoint<S> = (Origin, SetOrigin<S>);

/// The `make` function of [`Dns::run`] for an HTTP balancer built with
/// [`balance`](crate::http::balance): each address becomes the endpoint
/// `scheme://ip:port` served by a clone of `client`.
///
/// # Errors
///
/// A [`ConfigError`] naming `authority` if `scheme` is neither `http` nor
/// `https`.
pub fn origin_endpoints<S: Clone>(
    client: S,
    scheme: &str,
) -> Result<impl FnMut(SocketAddr) -> Option<OriginEndpoint<S>> + use<S>, ConfigError> {
    // Validate once, so that the per-address parse below cannot fail.
    Origin::from_socket_addr(scheme, SocketAddr::from(([127, 0, 0, 1], 1)))?;
    let scheme = scheme.to_owned();
    Ok(move |addr: SocketAddr| {
        let origin = Origin::from_socket_addr(&scheme, addr).ok()?;
        Some((origin.clone(), SetOrigin::new(client.clone(), origin)))
    })
}
