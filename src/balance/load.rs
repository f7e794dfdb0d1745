//! What a balancer learns from its endpoints beyond its own traffic: their
//! [load reports](crate::orca) and adaptive concurrency limits. Builder
//! settings and the [`Handle`] door for reports.

use std::borrow::Borrow;
use std::time::Duration;

use super::{Builder, Handle};
use crate::endpoint::AdaptiveConcurrency;
use crate::error::{ConfigError, check_positive};
use crate::orca::{DEFAULT_REPORT_EXPIRY, LoadReport};
use crate::pick::Picker;

/// The builder's settings for reported load and adaptive limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadSettings {
    pub(crate) report_expiry: Duration,
    pub(crate) adaptive: Option<AdaptiveConcurrency>,
    /// Each thread keeps its own lane of load and latency.
    pub(crate) per_thread: bool,
}

impl Default for LoadSettings {
    fn default() -> Self {
        Self {
            report_expiry: DEFAULT_REPORT_EXPIRY,
            adaptive: None,
            per_thread: false,
        }
    }
}

impl LoadSettings {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        check_positive("load_report_expiry", self.report_expiry)?;
        if let Some(a) = &self.adaptive {
            a.validate()?;
        }
        Ok(())
    }
}

impl<K, S, P, C> Builder<K, S, P, C> {
    /// How long an endpoint's last [load report](crate::orca) is trusted
    /// (> 0, at most a year; default 3 minutes, A58's weight expiration).
    /// Past it the endpoint counts as reporting nothing, and its next report
    /// starts a new stream ([`OrcaRoundRobin`](crate::pick::OrcaRoundRobin)'s
    /// blackout applies again).
    pub fn load_report_expiry(mut self, expiry: Duration) -> Self {
        self.cfg.load.report_expiry = expiry;
        self
    }

    /// Learns a limit on each endpoint's calls in flight from its latency
    /// (off by default; see [`AdaptiveConcurrency`]). An endpoint at its
    /// limit is skipped by the picker; when every endpoint is, calls fail at
    /// once with [`Error::Overloaded`](crate::Error::Overloaded). With
    /// [`max_in_flight`](Self::max_in_flight) too, the lower bound wins.
    pub fn adaptive_concurrency(mut self, limits: AdaptiveConcurrency) -> Self {
        self.cfg.load.adaptive = Some(limits);
        self
    }

    /// Whether each thread that picks keeps its own view of the endpoints'
    /// load and latency (off by default).
    ///
    /// On, each thread picks and records in a lane of its own (one per
    /// core, up to 8; see [`EndpointState::in_flight`](crate::endpoint::EndpointState::in_flight)
    /// for what the accessors report), so the threads of a multi-threaded
    /// runtime do not write each other's cache lines on every call: two
    /// threads on one balancer move 2.05× one thread's requests, as two
    /// balancers do, where the shared view moves 1.02×
    /// (`benches/balance.rs`, `threads`; 1.84–2.01× against 1.48–1.64× in
    /// the medians of `benches/interleaved.rs`). A failure is still seen
    /// by every thread at once.
    ///
    /// It is off by default because each thread then weighs only its own
    /// calls, as a balancer per worker would: the lab's HTTP mode on two
    /// worker threads (`--per-thread-load`) measured `least_in_flight` in
    /// `many-clients` (25 balancers of 4 users each) at a mean of 297–300
    /// ms instead of 187–188, `p2c_least_in_flight` at 323–334 instead of
    /// 272–273, and `peak_ewma` at 129–131 instead of 126–127. Turn it on
    /// where the balancer's own cost matters more than the last of its
    /// judgement: many cores, cheap calls, one balancer per process, a
    /// latency-aware picker. A single-threaded runtime uses one lane either
    /// way.
    ///
    /// A balancer with [`max_in_flight`](Self::max_in_flight) or
    /// [`adaptive_concurrency`](Self::adaptive_concurrency) always shares
    /// one view, since a cap needs the exact count.
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tower::service_fn;
    /// use tower_lb::Balance;
    ///
    /// let replica = service_fn(|req: u32| async move { Ok::<_, Infallible>(req) });
    /// // Clones of `lb` on the workers of a multi-threaded runtime each
    /// // pick with their own thread's view of the two replicas.
    /// let lb = Balance::builder()
    ///     .per_thread_load(true)
    ///     .endpoint("a", replica)
    ///     .endpoint("b", replica)
    ///     .build()?;
    /// # drop(lb);
    /// # Ok::<_, tower_lb::ConfigError>(())
    /// ```
    pub fn per_thread_load(mut self, on: bool) -> Self {
        self.cfg.load.per_thread = on;
        self
    }
}

impl<K: Eq, S, P: Picker, C> Handle<K, S, P, C> {
    /// Feeds a load report from endpoint `key` into its model, for
    /// transports the crate's classifiers do not read (any report source:
    /// a header, a trailer, an out-of-band stream). Returns false when the
    /// key is not in the set. O(n) in the endpoints (a scan of the current
    /// set); with the endpoint's state at hand (from
    /// [`endpoints`](Self::endpoints)),
    /// [`EndpointState::report_load`](crate::endpoint::EndpointState::report_load)
    /// is O(1).
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tower::service_fn;
    /// use tower_lb::{Balance, orca::LoadReport};
    ///
    /// let svc = service_fn(|x: u32| async move { Ok::<_, Infallible>(x) });
    /// let lb = Balance::builder().endpoint("a", svc).build()?;
    /// let report = LoadReport::parse("TEXT cpu_utilization=0.5, rps_fractional=100")?;
    /// assert!(lb.handle().report_load(&"a", &report));
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    pub fn report_load<Q>(&self, key: &Q, report: &LoadReport) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let set = self.shared.set.load();
        let Some(m) = set.members.iter().find(|m| m.entry.key.borrow() == key) else {
            return false;
        };
        m.state.report_load(report);
        true
    }
}
