//! [`Etcd`]: the discovery source, its builder and its defaults.

use std::future::Future;
use std::hash::Hash;
use std::net::SocketAddr;
use std::time::Duration;

use etcd_client::Client;
use tower_lb::discover::{Source, Stats};
use tower_lb::pick::Picker;
use tower_lb::retry::Backoff;
use tower_lb::{ConfigError, Handle};

/// Default first reconnect delay bound: gRPC's connection backoff
/// `INITIAL_BACKOFF` (1 s), which etcd's Go client dials with.
pub const DEFAULT_RECONNECT_BASE: Duration = Duration::from_secs(1);

/// Default longest reconnect delay bound: 30 s, client-go's reflector and
/// kube-rs's watcher cap: a registry back after a long outage is read
/// again within half a minute.
pub const DEFAULT_RECONNECT_CAP: Duration = Duration::from_secs(30);

/// Default bound on one list, or on opening one watch: 5 s, the dial
/// timeout of etcd's own examples and of most Go clients of it. A request
/// to an etcd that is away may otherwise wait for the connection forever.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest [`Builder::request_timeout`]: a day.
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Configures an [`Etcd`] source; see the [crate docs](crate).
#[must_use]
pub struct Builder {
    client: Client,
    target: String,
    backoff: Backoff,
    request_timeout: Duration,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("target", &self.target)
            .field("backoff", &self.backoff)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// The delays before reconnecting after a lost watch or a failed list
    /// (default [`DEFAULT_RECONNECT_BASE`] doubling up to
    /// [`DEFAULT_RECONNECT_CAP`], full jitter); reset once a watch has
    /// delivered anything.
    pub fn reconnect_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How long one list, or opening one watch, may take before it counts
    /// as failed (default [`DEFAULT_REQUEST_TIMEOUT`]).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Validates the configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `etcd.target` (empty, or ending in `/`:
    /// keys are read under `target + "/"`), `etcd.request_timeout` (zero or
    /// over [`MAX_REQUEST_TIMEOUT`]) or `etcd.reconnect_backoff` (see
    /// [`Backoff::validate`]).
    pub fn build(self) -> Result<Etcd, ConfigError> {
        crate::check_target(&self.target)?;
        if self.request_timeout.is_zero() || self.request_timeout > MAX_REQUEST_TIMEOUT {
            return Err(ConfigError::new(
                "etcd.request_timeout",
                self.request_timeout,
                "a duration > 0 and at most a day",
            ));
        }
        self.backoff
            .validate()
            .map_err(|e| ConfigError::new("etcd.reconnect_backoff", e.value(), e.allowed()))?;
        Ok(Etcd {
            client: self.client,
            prefix: format!("{}/", self.target),
            backoff: self.backoff,
            request_timeout: self.request_timeout,
            stats: Stats::default(),
        })
    }
}

/// An etcd discovery source for one target (a key prefix); see the
/// [crate docs](crate).
pub struct Etcd {
    pub(crate) client: Client,
    /// `target + "/"`: the keys read.
    pub(crate) prefix: String,
    pub(crate) backoff: Backoff,
    pub(crate) request_timeout: Duration,
    pub(crate) stats: Stats,
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd")
            .field("prefix", &self.prefix)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Etcd {
    /// A builder reading the endpoints registered under `target` (keys
    /// `target/…`, as gRPC-go's etcd resolver reads `etcd:///target`)
    /// through `client`.
    pub fn builder(client: Client, target: impl Into<String>) -> Builder {
        Builder {
            client,
            target: target.into(),
            // Both within Backoff's range, so `build` cannot refuse them.
            backoff: Backoff::new(DEFAULT_RECONNECT_BASE, DEFAULT_RECONNECT_CAP),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

impl Source for Etcd {
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
        crate::watch::Watcher::new(self, make).run(handle)
    }
}
