//! DNS discovery (feature `dns`): keep a balancer's endpoints in step with
//! the addresses a host name, or an SRV name, resolves to.
//!
//! [`Dns`] resolves at once and again when the answer's TTL runs out
//! (clamped to [`min_ttl`](Builder::min_ttl)..=[`max_ttl`](Builder::max_ttl)),
//! or every [`interval`](Builder::interval) when the resolver exposes no
//! TTL, and applies each answer through a [`Reconciler`]: new addresses are
//! inserted (fresh state, slow start if configured), vanished ones removed
//! (their in-flight requests drain), unchanged ones keep their model.
//!
//! With [`Dns::srv`] it reads SRV records instead (RFC 2782) and resolves
//! each target: the record's port is the endpoint's port, its weight the
//! endpoint's weight (0 becomes [`SRV_ZERO_WEIGHT`]), and its priority,
//! ranked among the answer's distinct priorities (10, 20 → 0, 1), the
//! endpoint's [`priority`](crate::endpoint::EndpointMeta::priority).
//!
//! A failed resolution — an error, a timeout, or an empty answer — changes
//! nothing: the last good set stays, [`Stats::errors`] counts it, and it is
//! reported with [`Handle::report_discovery_error`] as source `"dns"`.
//! Treating an empty answer as a failure (unlike Envoy's strict DNS) keeps a
//! DNS blip from emptying the pool.
//!
//! Resolvers: [`TokioResolver`] (the system's `getaddrinfo`; no TTLs, no
//! SRV) by default; [`HickoryResolver`] (feature `dns-hickory`) for TTLs
//! and SRV: hickory-resolver is the maintained pure-Rust stub resolver, it
//! reads `/etc/resolv.conf`, and it exposes each answer's expiry; it stays
//! behind a feature because it adds a DNS protocol stack to the build.
//!
//! ```no_run
//! use http_body_util::Empty;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower_lb::discover::{self, Source, dns::Dns};
//! use tower_lb::http;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
//! let lb = http::balance(client.clone(), Vec::<&str>::new())?.build()?;
//! let dns = Dns::builder("backend.internal", 8080).build()?;
//! let stats = dns.stats();
//! let driver = dns.spawn(lb.handle(), discover::http_endpoints(client, "http")?);
//! // ... use `lb`; `stats.errors()` counts failed resolutions; dropping
//! // `driver` (or `lb`) stops resolving.
//! # drop(driver); Ok(()) }
//! ```

mod answer;
#[cfg(feature = "dns-hickory")]
mod hickory;
mod resolve;

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::{Reconciler, Source, Stats, Target, balancer_gone};
use crate::balance::Handle;
use crate::error::ConfigError;
use crate::error::check_positive;
use crate::pick::Picker;

use answer::Refresh;
pub use answer::{SRV_TARGET_LABEL, SRV_ZERO_WEIGHT};
#[cfg(feature = "dns-hickory")]
#[cfg_attr(docsrs, doc(cfg(feature = "dns-hickory")))]
pub use hickory::HickoryResolver;
pub use resolve::{Resolve, Resolved, SrvRecord, SrvResolved, TokioResolver};

/// The maker for an HTTP balancer; see [`http_endpoints`](super::http_endpoints).
#[cfg(feature = "http")]
pub use super::http_endpoints as origin_endpoints;

/// Default re-resolution interval when no TTL is known or respected:
/// Envoy's `dns_refresh_rate` default (5000 ms).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// Default time allowed for one resolution: the common resolver timeout
/// (glibc's and c-ares' 5 s per query).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Default floor on a respected TTL: Envoy's `dns_min_refresh_rate`
/// default (5 s), so a TTL of 0 or 1 s does not turn into a query storm.
pub const DEFAULT_MIN_TTL: Duration = Duration::from_secs(5);

/// Default ceiling on a respected TTL: the JDK's default positive cache
/// TTL (`networkaddress.cache.ttl`, 30 s), so a long TTL cannot keep a
/// replaced replica in the pool for hours.
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(30);

/// What is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Query {
    Host { host: String, port: u16 },
    Srv { name: String },
}

/// The old name of [`Builder`].
#[deprecated(since = "0.1.0", note = "renamed `tower_lb::discover::dns::Builder`")]
pub type DnsBuilder<R = TokioResolver> = Builder<R>;

/// Configures a [`Dns`] driver; see the [module docs](self).
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder<R = TokioResolver> {
    query: Query,
    refresh: Refresh,
    timeout: Duration,
    resolver: R,
}

impl<R: Resolve> Builder<R> {
    /// How often to resolve again when the answer has no TTL, or TTLs are
    /// not respected, and after a failure (> 0; default
    /// [`DEFAULT_INTERVAL`]).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.refresh.interval = interval;
        self
    }

    /// Whether to resolve again when the answer's TTL runs out, if the
    /// resolver exposes it (default true; Envoy's `respect_dns_ttl`).
    pub fn respect_ttl(mut self, respect: bool) -> Self {
        self.refresh.respect_ttl = respect;
        self
    }

    /// The shortest TTL respected (> 0; default [`DEFAULT_MIN_TTL`]).
    pub fn min_ttl(mut self, min: Duration) -> Self {
        self.refresh.min_ttl = min;
        self
    }

    /// The longest TTL respected (>= `min_ttl`; default [`DEFAULT_MAX_TTL`]).
    pub fn max_ttl(mut self, max: Duration) -> Self {
        self.refresh.max_ttl = max;
        self
    }

    /// How long one resolution (all lookups of one round) may take before
    /// it counts as a failure (> 0; default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Resolves with `resolver` instead of [`TokioResolver`].
    pub fn resolver<R2: Resolve>(self, resolver: R2) -> Builder<R2> {
        Builder {
            query: self.query,
            refresh: self.refresh,
            timeout: self.timeout,
            resolver,
        }
    }

    /// Validates the configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `dns.host` (empty), `dns.port` (0),
    /// `dns.srv` (empty), `dns.interval`, `dns.timeout` or `dns.min_ttl`
    /// (zero), or `dns.max_ttl` (below `min_ttl`).
    pub fn build(self) -> Result<Dns<R>, ConfigError> {
        match &self.query {
            Query::Host { host, .. } if host.is_empty() => {
                return Err(ConfigError::new("dns.host", host, "a non-empty host name"));
            }
            Query::Host { port: 0, .. } => {
                return Err(ConfigError::new("dns.port", 0, "a port in 1..=65535"));
            }
            Query::Srv { name } if name.is_empty() => {
                return Err(ConfigError::new(
                    "dns.srv",
                    name,
                    "a non-empty SRV name (_service._proto.domain)",
                ));
            }
            _ => {}
        }
        let r = self.refresh;
        check_positive("dns.interval", r.interval)?;
        check_positive("dns.min_ttl", r.min_ttl)?;
        if r.max_ttl < r.min_ttl {
            return Err(ConfigError::new(
                "dns.max_ttl",
                r.max_ttl,
                "a duration >= dns.min_ttl",
            ));
        }
        Ok(Dns {
            timeout: check_positive("dns.timeout", self.timeout)?,
            query: self.query,
            refresh: r,
            resolver: self.resolver,
            stats: Stats::default(),
        })
    }
}

/// A DNS discovery driver for one host name and port, or one SRV name; see
/// the [module docs](self).
#[derive(Debug)]
pub struct Dns<R = TokioResolver> {
    query: Query,
    refresh: Refresh,
    timeout: Duration,
    resolver: R,
    stats: Stats,
}

impl Dns {
    /// A builder resolving `host` (a name or a literal IP) with `port`,
    /// using [`TokioResolver`].
    pub fn builder(host: impl Into<String>, port: u16) -> Builder {
        Self::with_query(Query::Host {
            host: host.into(),
            port,
        })
    }

    /// A builder reading the SRV records of `name`
    /// (`_http._tcp.backend.internal`); needs a resolver that looks up SRV
    /// records, such as [`HickoryResolver`] (feature `dns-hickory`).
    pub fn srv(name: impl Into<String>) -> Builder {
        Self::with_query(Query::Srv { name: name.into() })
    }

    fn with_query(query: Query) -> Builder {
        Builder {
            query,
            refresh: Refresh {
                interval: DEFAULT_INTERVAL,
                respect_ttl: true,
                min_ttl: DEFAULT_MIN_TTL,
                max_ttl: DEFAULT_MAX_TTL,
            },
            timeout: DEFAULT_TIMEOUT,
            resolver: TokioResolver,
        }
    }
}

/// Why one resolution failed.
#[derive(Debug)]
enum Failure {
    Timeout(Duration),
    Empty,
    Io(io::Error),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Timeout(d) => write!(f, "no answer within {d:?}"),
            Failure::Empty => f.write_str("the answer has no addresses"),
            Failure::Io(e) => write!(f, "{e}"),
        }
    }
}

impl<R: Resolve> Dns<R> {
    /// One round: the desired set and the answer's TTL.
    async fn round(&self) -> Result<(Vec<Target<SocketAddr>>, Option<Duration>), Failure> {
        let (targets, ttl) = match &self.query {
            Query::Host { host, port } => {
                let answer = self
                    .resolver
                    .lookup(host, *port)
                    .await
                    .map_err(Failure::Io)?;
                (answer::host_targets(answer.addrs), answer.ttl)
            }
            Query::Srv { name } => {
                let srv = self.resolver.lookup_srv(name).await.map_err(Failure::Io)?;
                let records = answer::srv_order(srv.records);
                let mut ttl = srv.ttl;
                let mut targets = Vec::new();
                let mut last_error = None;
                for record in &records {
                    // A target that fails to resolve is left out of this
                    // round; the others still apply.
                    match self.resolver.lookup(&record.target, record.port).await {
                        Ok(found) => {
                            ttl = min_ttl(ttl, found.ttl);
                            targets.extend(answer::srv_targets(&records, record, &found.addrs));
                        }
                        Err(e) => last_error = Some(e),
                    }
                }
                if let (true, Some(e)) = (targets.is_empty(), last_error) {
                    return Err(Failure::Io(e));
                }
                (targets, ttl)
            }
        };
        if targets.is_empty() {
            return Err(Failure::Empty);
        }
        Ok((targets, ttl))
    }

    /// Keeps `handle`'s balancer in step with the name's addresses: the
    /// returned future resolves at once, then again when the TTL (or the
    /// interval) runs out, and applies each answer. `make` turns a new
    /// address into the endpoint's key and service (`None` skips the
    /// address); the key is what the driver later removes, so it replaces
    /// and then owns an endpoint with the same key.
    ///
    /// The future ends when every `Balance` and `Handle` of the balancer
    /// other than its own `handle` is dropped (checked before each round);
    /// otherwise it runs until it is dropped. Cost per round: the lookups
    /// plus O(n) set arithmetic and at most one snapshot.
    async fn drive<K, S, P, C, F>(self, handle: Handle<K, S, P, C>, make: F)
    where
        K: Hash + Eq + Clone,
        P: Picker,
        F: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        let mut sync = Reconciler::new(make);
        loop {
            if balancer_gone(&handle) {
                return;
            }
            let started = Instant::now();
            let next = match tokio::time::timeout(self.timeout, self.round()).await {
                Ok(Ok((targets, ttl))) => {
                    self.stats.applied(&sync.apply(&handle, &targets));
                    // A TTL counts from the answer; the interval from the
                    // round's start, as a ticker that delays missed ticks.
                    let from = if self.refresh.uses_ttl(ttl) {
                        Instant::now()
                    } else {
                        started
                    };
                    from + self.refresh.after(ttl)
                }
                Ok(Err(failure)) => self.fail(&handle, failure, started),
                Err(_) => self.fail(&handle, Failure::Timeout(self.timeout), started),
            };
            tokio::time::sleep_until(next).await;
        }
    }

    fn fail<K, S, P: Picker, C>(
        &self,
        handle: &Handle<K, S, P, C>,
        failure: Failure,
        started: Instant,
    ) -> Instant {
        self.stats.error(handle, "dns", &failure);
        started + self.refresh.interval
    }
}

fn min_ttl(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl<R: Resolve> Source for Dns<R> {
    fn stats(&self) -> Stats {
        self.stats.clone()
    }

    fn run<K, S, P, C, F>(
        self,
        handle: Handle<K, S, P, C>,
        make: F,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        S: Send + Sync + 'static,
        P: Picker,
        C: Send + Sync + 'static,
        F: FnMut(SocketAddr) -> Option<(K, S)> + Send + 'static,
    {
        self.drive(handle, make)
    }
}
