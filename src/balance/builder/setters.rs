//! Every setter of [`Builder`], in one place: what the balancer picks with,
//! its endpoints, the latency model, health, load and metrics. Setters
//! never fail; [`build`](Builder::build) validates.

use std::sync::Arc;
use std::time::Duration;

use super::Builder;
#[cfg(feature = "metrics")]
use crate::balance::Observer;
use crate::breaker::CircuitBreakerConfig;
use crate::guard::GuardConfig;
use crate::health::{HealthEvent, PanicMode};
use crate::model::{AdaptiveConcurrency, EndpointMeta, SlowStart};
use crate::outlier::OutlierDetection;
use crate::pick::Picker;
use crate::route::Routing;

impl<K, S, P, C> Builder<K, S, P, C> {
    /// Sets the picker (default [`PeakEwma`](crate::pick::PeakEwma)).
    pub fn picker<P2: Picker>(self, picker: P2) -> Builder<K, S, P2, C> {
        Builder {
            picker,
            classify: self.classify,
            cfg: self.cfg,
        }
    }

    /// Sets the classifier deciding which calls count as failures
    /// (default: the inner service's `Err`).
    pub fn classify<C2>(self, classify: C2) -> Builder<K, S, P, C2> {
        Builder {
            picker: self.picker,
            classify,
            cfg: self.cfg,
        }
    }

    /// The classifier set so far.
    pub fn classifier(&self) -> &C {
        &self.classify
    }

    /// Adds an endpoint with weight 1.
    pub fn endpoint(self, key: K, service: S) -> Self {
        self.weighted_endpoint(key, service, 1.0)
    }

    /// Adds an endpoint with a weight (finite, > 0).
    pub fn weighted_endpoint(self, key: K, service: S, weight: f64) -> Self {
        self.endpoint_with(key, service, weight, EndpointMeta::default())
    }

    /// Adds an endpoint with a weight (finite, > 0) and its locality,
    /// priority and labels.
    pub fn endpoint_with(mut self, key: K, service: S, weight: f64, meta: EndpointMeta) -> Self {
        self.cfg.endpoints.push((key, service, weight, meta));
        self
    }

    /// Names the balancer, for health events, `tracing` and metrics
    /// (default `"balance"`, or the name given to the metrics).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.cfg.name = Some(Arc::from(name.into()));
        self
    }

    /// How events, `tracing` and metrics label an endpoint: `label` is called
    /// once per endpoint, when it joins; keep its output bounded (no request
    /// data). Without it, endpoints are labelled `endpoint-{id}`, or by
    /// their key's `Display` when metrics are on.
    pub fn labels(mut self, label: impl Fn(&K) -> String + Send + Sync + 'static) -> Self {
        self.cfg.labels = Some(Arc::new(label));
        self
    }

    /// Caps the requests in flight on each endpoint (>= 1). Endpoints at the
    /// cap are skipped; when all are, calls fail with `Error::Overloaded`.
    /// Change it at run time with
    /// [`Handle::set_max_in_flight`](crate::Handle::set_max_in_flight).
    pub fn max_in_flight(mut self, cap: usize) -> Self {
        self.cfg.cap = Some(cap);
        self
    }

    /// Fails a call that has not answered after `timeout` (> 0) with
    /// [`Error::Timeout`](crate::Error::Timeout), recording it as a
    /// `Timeout` failure of its endpoint (breaker, outlier detection,
    /// latency). Off by default.
    ///
    /// The timer is made the first time a call is pending: one allocation
    /// for a call that waits (a tokio `Sleep`, boxed so that the response
    /// future stays small with or without a timeout), none for a call that
    /// answers at once.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.cfg.timeout = Some(timeout);
        self
    }

    /// Time constant τ with which an endpoint's latency estimate fades
    /// toward zero while it takes no calls (> 0; default
    /// [`DEFAULT_DECAY`](crate::endpoint::DEFAULT_DECAY), 10 s): how soon a
    /// starved endpoint is tried again.
    pub fn decay(mut self, tau: Duration) -> Self {
        self.cfg.decay = tau;
        self
    }

    /// Time constant τ with which the latency estimate of an endpoint that
    /// takes calls follows their latencies: `est·w + x·(1−w)`, `w =
    /// e^(−Δt/τ)` for a sample `Δt` after the previous one (> 0; default
    /// [`DEFAULT_SAMPLE_DECAY`](crate::endpoint::DEFAULT_SAMPLE_DECAY),
    /// 1 s). tower and Finagle use one constant for both; set it to
    /// [`decay`](Self::decay)'s to do the same.
    pub fn sample_decay(mut self, tau: Duration) -> Self {
        self.cfg.sample_decay = tau;
        self
    }

    /// Latency assumed for an endpoint without samples (default 30 ms).
    pub fn default_rtt(mut self, rtt: Duration) -> Self {
        self.cfg.default_rtt = rtt;
        self
    }

    /// Latency sample recorded for a failed call (default 1 s). A
    /// `Retry-After` hint from the classifier replaces it, capped at 30 s.
    pub fn failure_penalty(mut self, penalty: Duration) -> Self {
        self.cfg.failure_penalty = penalty;
        self
    }

    /// Time constant τ_f of each endpoint's failure ratio (> 0; default
    /// [`DEFAULT_FAILURE_DECAY`](crate::endpoint::DEFAULT_FAILURE_DECAY),
    /// 2 s), which [`PeakEwma`](crate::pick::PeakEwma) divides into its cost: how fast recent
    /// failures are forgiven. It also sets when a failed endpoint is tried
    /// again: 1.5 τ_f (3 s) after its last failure, or the failed call's
    /// penalty if longer (a `Retry-After`), it reads as idle and healthy at
    /// its unloaded latency until one call (the probe) answers; a success
    /// brings it back, a failure restarts the wait. A revived replica is so
    /// picked again within about 3 s of answering, plus the length of a
    /// probe that was in flight (`tests/conformance/recovery.rs`).
    pub fn failure_decay(mut self, tau: Duration) -> Self {
        self.cfg.failure_decay = tau;
        self
    }

    /// Ramps the weight of endpoints inserted after `build` (off by default).
    pub fn slow_start(mut self, slow_start: SlowStart) -> Self {
        self.cfg.slow_start = Some(slow_start);
        self
    }

    /// Seeds the pickers' random numbers, making a single-threaded run
    /// repeat exactly (for simulations and tests). Unseeded balancers use a
    /// thread-local generator.
    pub fn seed(mut self, seed: u64) -> Self {
        self.cfg.seed = Some(seed);
        self
    }

    /// Gives every endpoint its own circuit breaker with this configuration
    /// (off by default). An endpoint whose breaker is open is not picked;
    /// a half-open one receives exactly the configured number of probes.
    ///
    /// The same as [`guard`](Self::guard) with the configuration.
    pub fn circuit_breaker(self, config: CircuitBreakerConfig) -> Self {
        self.guard(config)
    }

    /// Gives every endpoint the guard `config` configures, replacing the
    /// one of its kind set before: today a circuit breaker
    /// ([`CircuitBreakerConfig`]). A guard can refuse its endpoint calls;
    /// an endpoint whose guard refuses is not picked (in panic too: a
    /// guard is the user's hard rule).
    ///
    /// ```
    /// use tower_lb::Balance;
    /// use tower_lb::breaker::CircuitBreakerConfig;
    ///
    /// let balancer = Balance::<&str, tower::util::BoxService<(), (), ()>>::builder()
    ///     .guard(CircuitBreakerConfig::default())
    ///     .build()
    ///     .unwrap();
    /// # drop(balancer);
    /// ```
    pub fn guard(mut self, config: impl GuardConfig) -> Self {
        config.install(&mut self.cfg.guards);
        self
    }

    /// Ejects outlier endpoints (off by default); see [`crate::outlier`].
    pub fn outlier_detection(mut self, config: OutlierDetection) -> Self {
        self.cfg.outlier = Some(config);
        self
    }

    /// Below this percentage of healthy endpoints (each endpoint counted
    /// once: not ejected, breaker closed, passing its active check), the
    /// balancer panics: see [`panic_mode`](Self::panic_mode) and
    /// [`crate::health`]. `0..=100`; 0 turns panic routing off. Default 50
    /// (Envoy's).
    pub fn panic_threshold(mut self, percent: f64) -> Self {
        self.cfg.panic_threshold = percent;
        self
    }

    /// What to do in panic (default: route over all endpoints whose breaker
    /// admits the call).
    pub fn panic_mode(mut self, mode: PanicMode) -> Self {
        self.cfg.panic_mode = mode;
        self
    }

    /// The route step: priority levels (always honoured; factor 1.4 by
    /// default), zone-aware or locality-weighted routing, deterministic
    /// subsetting. See [`crate::route`].
    pub fn routing(mut self, routing: Routing) -> Self {
        self.cfg.routing = routing;
        self
    }

    /// Calls `hook` with every health change (breaker transitions, ejection
    /// and return, panic entered and left, active-check flips, discovery
    /// errors), on the thread that caused it. Keep it short: log, count,
    /// notify. The same changes are `tracing` events on target `tower_lb`.
    pub fn on_health_change(mut self, hook: impl Fn(&HealthEvent) + Send + Sync + 'static) -> Self {
        self.cfg.hook = Some(Arc::new(hook));
        self
    }

    // Reported load and adaptive limits.

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
    /// threads on one balancer then move about twice one thread's
    /// requests, as two balancers do, where the shared view moves little
    /// more than one thread's (measured: see docs/performance.md). A
    /// failure is still seen by every thread at once.
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

    // Metrics (feature `metrics`).

    /// Reports OpenTelemetry metrics (feature `metrics`; off by default),
    /// labelling each endpoint with its key's `Display` (unless
    /// [`labels`](Builder::labels) was set). The balancer takes the metrics'
    /// name unless [`name`](Builder::name) was set. See [`crate::metrics`]
    /// for the instruments and their cost.
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics(mut self, metrics: impl Observer) -> Self
    where
        K: std::fmt::Display,
    {
        if self.cfg.labels.is_none() {
            self.cfg.labels = Some(Arc::new(|key: &K| key.to_string()));
        }
        self.observe_with(metrics)
    }

    /// Like [`metrics`](Self::metrics), with `label` turning a key into its
    /// `lb.endpoint` attribute (and its label in health events). It is
    /// called once per endpoint, when the endpoint joins; keep its output
    /// bounded (no request data).
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics_with(
        self,
        metrics: impl Observer,
        label: impl Fn(&K) -> String + Send + Sync + 'static,
    ) -> Self {
        self.labels(label).observe_with(metrics)
    }

    #[cfg(feature = "metrics")]
    fn observe_with(mut self, observer: impl Observer) -> Self {
        if self.cfg.name.is_none() {
            self.cfg.name = Some(observer.name());
        }
        self.cfg.observer = Some(observer.into_observer());
        self
    }
}
