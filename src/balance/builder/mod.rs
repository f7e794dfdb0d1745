//! [`Builder`]: configures and builds a [`Balance`].

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use super::load::LoadSettings;
use super::{Balance, Label, MakeObserver};
use crate::breaker::CircuitBreakerConfig;
use crate::classify::ErrIsFailure;
use crate::endpoint::{
    DEFAULT_DECAY, DEFAULT_FAILURE_DECAY, DEFAULT_FAILURE_PENALTY, DEFAULT_RTT,
    DEFAULT_SAMPLE_DECAY, EndpointMeta, SlowStart,
};
use crate::error::{ConfigError, check_bounded, check_positive, check_weight};
use crate::health::{DEFAULT_PANIC_THRESHOLD, HealthEvent, PanicMode};
use crate::outlier::OutlierDetection;
use crate::pick::{PeakEwma, Picker};
use crate::route::Routing;

mod assemble;

/// The name of a balancer that was not given one.
pub const DEFAULT_NAME: &str = "balance";

/// Configures and builds a [`Balance`]. Setters never fail; every value is
/// validated once, in [`build`](Builder::build), which returns a
/// [`ConfigError`] naming the field (`decay`, `circuit_breaker.minimum_calls`,
/// ...) and the allowed range instead of panicking. Every duration setting
/// accepts at most [`MAX_DURATION`](crate::time::MAX_DURATION) (one year).
#[must_use]
pub struct Builder<K, S, P = PeakEwma, C = ErrIsFailure> {
    picker: P,
    classify: C,
    pub(crate) cfg: Settings<K, S>,
}

/// Everything a [`Builder`] holds besides its picker and classifier (which
/// change its type).
pub(crate) struct Settings<K, S> {
    endpoints: Vec<(K, S, f64, EndpointMeta)>,
    cap: Option<usize>,
    timeout: Option<Duration>,
    decay: Duration,
    sample_decay: Duration,
    default_rtt: Duration,
    failure_penalty: Duration,
    failure_decay: Duration,
    slow_start: Option<SlowStart>,
    pub(super) load: LoadSettings,
    seed: Option<u64>,
    breaker: Option<CircuitBreakerConfig>,
    outlier: Option<OutlierDetection>,
    panic_threshold: f64,
    panic_mode: PanicMode,
    routing: Routing,
    pub(crate) name: Option<Arc<str>>,
    pub(crate) labels: Option<Label<K>>,
    hook: Option<crate::health::Hook>,
    pub(crate) observer: Option<MakeObserver>,
}

impl<K, S> Builder<K, S> {
    pub(crate) fn new() -> Self {
        Self {
            picker: PeakEwma::default(),
            classify: ErrIsFailure,
            cfg: Settings {
                endpoints: Vec::new(),
                cap: None,
                timeout: None,
                decay: DEFAULT_DECAY,
                sample_decay: DEFAULT_SAMPLE_DECAY,
                default_rtt: DEFAULT_RTT,
                failure_penalty: DEFAULT_FAILURE_PENALTY,
                failure_decay: DEFAULT_FAILURE_DECAY,
                slow_start: None,
                load: LoadSettings::default(),
                seed: None,
                breaker: None,
                outlier: None,
                panic_threshold: DEFAULT_PANIC_THRESHOLD,
                panic_mode: PanicMode::RouteAll,
                routing: Routing::default(),
                name: None,
                labels: None,
                hook: None,
                observer: None,
            },
        }
    }
}

impl<K, S, P, C> Builder<K, S, P, C> {
    /// Sets the picker (default [`PeakEwma`]).
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
    /// 2 s), which [`PeakEwma`] divides into its cost: how fast recent
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
    pub fn circuit_breaker(mut self, config: CircuitBreakerConfig) -> Self {
        self.cfg.breaker = Some(config);
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

    /// Validates the configuration and builds the balancer.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first invalid field: `weight`,
    /// `endpoint` (a duplicate key), `max_in_flight`, `timeout`, `decay`,
    /// `sample_decay`, `default_rtt`, `failure_penalty`, `failure_decay`, `panic_threshold`,
    /// `slow_start.*`, `routing.*`, `load_report_expiry`,
    /// `adaptive_concurrency.*`, or the picker's own fields (`choices`,
    /// `vnodes`, ...).
    pub fn build(self) -> Result<Balance<K, S, P, C>, ConfigError>
    where
        K: Hash + Eq,
        P: Picker,
    {
        self.validate(self.cfg.endpoints.iter().map(|(k, _, w, _)| (k, *w)))?;
        Ok(self.assemble())
    }

    /// Checks every setting, with `endpoints` the keys and weights to come.
    pub(crate) fn validate<'k>(
        &self,
        endpoints: impl Iterator<Item = (&'k K, f64)>,
    ) -> Result<(), ConfigError>
    where
        K: Hash + Eq + 'k,
        P: Picker,
    {
        self.picker.validate()?;
        let cfg = &self.cfg;
        if let Some(ss) = &cfg.slow_start {
            ss.validate()?;
        }
        cfg.load.validate()?;
        check_positive("decay", cfg.decay)?;
        check_positive("sample_decay", cfg.sample_decay)?;
        check_positive("failure_decay", cfg.failure_decay)?;
        check_bounded("default_rtt", cfg.default_rtt)?;
        check_bounded("failure_penalty", cfg.failure_penalty)?;
        if let Some(t) = cfg.timeout {
            check_positive("timeout", t)?;
        }
        if !(0.0..=100.0).contains(&cfg.panic_threshold) {
            return Err(ConfigError::new(
                "panic_threshold",
                cfg.panic_threshold,
                "a percentage in 0..=100",
            ));
        }
        if cfg.cap == Some(0) {
            return Err(ConfigError::new("max_in_flight", 0, "an integer >= 1"));
        }
        cfg.routing.validate()?;
        let mut seen = HashSet::new();
        for (key, w) in endpoints {
            check_weight("weight", w)?;
            if !seen.insert(key) {
                return Err(ConfigError::new(
                    "endpoint",
                    "a duplicate key",
                    "unique keys",
                ));
            }
        }
        Ok(())
    }

    /// The same configuration for endpoints of another type, without
    /// endpoints (a layer's template, made into a balancer per `layer` call).
    pub(crate) fn with_endpoint_type<T>(&self) -> Builder<K, T, P, C>
    where
        P: Clone,
        C: Clone,
    {
        let c = &self.cfg;
        Builder {
            picker: self.picker.clone(),
            classify: self.classify.clone(),
            cfg: Settings {
                endpoints: Vec::new(),
                cap: c.cap,
                timeout: c.timeout,
                decay: c.decay,
                sample_decay: c.sample_decay,
                default_rtt: c.default_rtt,
                failure_penalty: c.failure_penalty,
                failure_decay: c.failure_decay,
                slow_start: c.slow_start,
                load: c.load,
                seed: c.seed,
                breaker: c.breaker.clone(),
                outlier: c.outlier.clone(),
                panic_threshold: c.panic_threshold,
                panic_mode: c.panic_mode,
                routing: c.routing.clone(),
                name: c.name.clone(),
                labels: c.labels.clone(),
                hook: c.hook.clone(),
                observer: c.observer.clone(),
            },
        }
    }
}

impl<K, P: Clone, C: Clone> Clone for Builder<K, super::FromKeys, P, C> {
    fn clone(&self) -> Self {
        self.with_endpoint_type()
    }
}
