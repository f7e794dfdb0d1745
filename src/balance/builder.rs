use std::collections::HashSet;
use std::hash::Hash;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::time::Instant;

use super::{Balance, Entry, Member, Shared, Snapshot};
use crate::breaker::CircuitBreakerConfig;
use crate::classify::ErrIsFailure;
use crate::endpoint::health::Health;
use crate::endpoint::{
    DEFAULT_DECAY, DEFAULT_FAILURE_DECAY, DEFAULT_FAILURE_PENALTY, DEFAULT_PANIC_THRESHOLD,
    DEFAULT_RTT, EndpointMeta, Model, PanicMode, Rates, SlowStart,
};
use crate::error::{ConfigError, check_nonzero, check_weight};
use crate::outlier::OutlierDetection;
use crate::pick::{PeakEwma, Picker};
use crate::rng::RngSource;

/// Configures and builds a [`Balance`]. Every value is validated in
/// [`build`](Builder::build), which returns a [`ConfigError`] naming the
/// field instead of panicking.
#[must_use]
pub struct Builder<K, S, P = PeakEwma, C = ErrIsFailure> {
    picker: P,
    classify: C,
    cfg: Settings<K, S>,
}

/// Everything a [`Builder`] holds besides its picker and classifier (which
/// change its type).
struct Settings<K, S> {
    endpoints: Vec<(K, S, f64, EndpointMeta)>,
    cap: Option<usize>,
    decay: Duration,
    default_rtt: Duration,
    failure_penalty: Duration,
    failure_decay: Duration,
    slow_start: Option<SlowStart>,
    seed: Option<u64>,
    breaker: Option<CircuitBreakerConfig>,
    outlier: Option<OutlierDetection>,
    panic_threshold: f64,
    panic_mode: PanicMode,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::Setup<K>>,
}

impl<K, S> Builder<K, S> {
    pub(crate) fn new() -> Self {
        Self {
            picker: PeakEwma::default(),
            classify: ErrIsFailure,
            cfg: Settings {
                endpoints: Vec::new(),
                cap: None,
                decay: DEFAULT_DECAY,
                default_rtt: DEFAULT_RTT,
                failure_penalty: DEFAULT_FAILURE_PENALTY,
                failure_decay: DEFAULT_FAILURE_DECAY,
                slow_start: None,
                seed: None,
                breaker: None,
                outlier: None,
                panic_threshold: DEFAULT_PANIC_THRESHOLD,
                panic_mode: PanicMode::RouteAll,
                #[cfg(feature = "metrics")]
                metrics: None,
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

    /// Adds an endpoint with weight 1.
    pub fn endpoint(self, key: K, service: S) -> Self {
        self.weighted_endpoint(key, service, 1.0)
    }

    /// Adds an endpoint with a weight (finite, > 0; checked in `build`).
    pub fn weighted_endpoint(self, key: K, service: S, weight: f64) -> Self {
        self.endpoint_with(key, service, weight, EndpointMeta::default())
    }

    /// Adds an endpoint with a weight (finite, > 0; checked in `build`) and
    /// its locality, priority and labels.
    pub fn endpoint_with(mut self, key: K, service: S, weight: f64, meta: EndpointMeta) -> Self {
        self.cfg.endpoints.push((key, service, weight, meta));
        self
    }

    /// Caps the requests in flight on each endpoint (>= 1). Endpoints at the
    /// cap are skipped; when all are, calls fail with `Error::Overloaded`.
    pub fn max_in_flight(mut self, cap: usize) -> Self {
        self.cfg.cap = Some(cap);
        self
    }

    /// Decay time constant τ of the latency EWMA (> 0; default 10 s).
    pub fn decay(mut self, tau: Duration) -> Self {
        self.cfg.decay = tau;
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

    /// Time constant of each endpoint's failure ratio (> 0; default 2 s),
    /// which [`PeakEwma`] divides into its cost: how fast recent failures
    /// are forgiven.
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

    /// Below this percentage of healthy endpoints (not ejected, breaker
    /// closed), the balancer panics: see [`panic_mode`](Self::panic_mode).
    /// `0..=100`; 0 turns panic routing off. Default 50 (Envoy's).
    pub fn panic_threshold(mut self, percent: f64) -> Self {
        self.cfg.panic_threshold = percent;
        self
    }

    /// What to do in panic (default: route over all endpoints).
    pub fn panic_mode(mut self, mode: PanicMode) -> Self {
        self.cfg.panic_mode = mode;
        self
    }

    /// Reports OpenTelemetry metrics (feature `metrics`; off by default),
    /// labelling each endpoint with its key's `Display`. See
    /// [`crate::metrics`] for the instruments and their cost.
    #[cfg(feature = "metrics")]
    pub fn metrics(self, metrics: crate::metrics::Metrics) -> Self
    where
        K: std::fmt::Display,
    {
        self.metrics_with(metrics, |key: &K| key.to_string())
    }

    /// Like [`metrics`](Self::metrics), with `label` turning a key into its
    /// `lb.endpoint` attribute. It is called once per endpoint, when the
    /// endpoint joins; keep its output bounded (no request data).
    #[cfg(feature = "metrics")]
    pub fn metrics_with(
        mut self,
        metrics: crate::metrics::Metrics,
        label: impl Fn(&K) -> String + Send + Sync + 'static,
    ) -> Self {
        self.cfg.metrics = Some(crate::metrics::Setup {
            metrics,
            label: Arc::new(label),
        });
        self
    }

    /// Validates the configuration and builds the balancer.
    pub fn build(self) -> Result<Balance<K, S, P, C>, ConfigError>
    where
        K: Hash + Eq,
        P: Picker,
    {
        let tau = check_nonzero("decay", self.cfg.decay)?;
        if !(0.0..=100.0).contains(&self.cfg.panic_threshold) {
            return Err(ConfigError::new(
                "panic_threshold",
                self.cfg.panic_threshold,
                "a percentage in 0..=100",
            ));
        }
        if self.cfg.cap == Some(0) {
            return Err(ConfigError::new("max_in_flight", 0, "an integer >= 1"));
        }
        let mut seen = HashSet::with_capacity(self.cfg.endpoints.len());
        for (key, _, w, _) in &self.cfg.endpoints {
            check_weight("weight", *w)?;
            if !seen.insert(key) {
                return Err(ConfigError::new(
                    "endpoint",
                    "a duplicate key",
                    "unique keys",
                ));
            }
        }
        drop(seen);
        let now = Instant::now();
        let failure_decay = check_nonzero("failure_decay", self.cfg.failure_decay)?;
        let model = Arc::new(Model {
            epoch: now,
            rates: Rates {
                latency: 1.0 / tau.as_nanos() as f64,
                failure: 1.0 / failure_decay.as_nanos() as f64,
            },
            default_rtt_ns: self.cfg.default_rtt.as_nanos() as f64,
            penalty_ns: self.cfg.failure_penalty.as_nanos() as f64,
            slow_start: self.cfg.slow_start,
            health: Health::new(
                self.cfg.breaker,
                self.cfg.outlier,
                self.cfg.panic_threshold,
                self.cfg.panic_mode,
            ),
            rng: RngSource::new(self.cfg.seed),
        });
        #[cfg(feature = "metrics")]
        let metrics = self
            .cfg
            .metrics
            .map(|setup| setup.attach(self.picker.name(), &model));
        let shared = Arc::new(Shared {
            set: ArcSwap::from_pointee(Snapshot::new(&self.picker, Vec::new())),
            picker: self.picker,
            classify: self.classify,
            writer: Mutex::new(()),
            model,
            cap: self.cfg.cap,
            next_id: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            metrics,
        });
        let members = self
            .cfg
            .endpoints
            .into_iter()
            .map(|(key, service, w, meta)| {
                let state = shared.new_endpoint(&key, w, now, false);
                state.set_meta(meta);
                Member {
                    entry: Arc::new(Entry { key, service }),
                    state,
                }
            })
            .collect();
        shared.publish(members);
        Ok(Balance::from_shared(shared))
    }
}
