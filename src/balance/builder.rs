use std::collections::HashSet;
use std::hash::Hash;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::time::Instant;

use super::{Balance, Entry, Shared, Snapshot};
use crate::classify::ErrIsFailure;
use crate::endpoint::{DEFAULT_DECAY, DEFAULT_FAILURE_PENALTY, DEFAULT_RTT, Model, SlowStart};
use crate::error::{ConfigError, check_nonzero, check_weight};
use crate::pick::{PeakEwma, Picker};
use crate::rng::RngSource;

/// Configures and builds a [`Balance`]. Every value is validated in
/// [`build`](Builder::build), which returns a [`ConfigError`] naming the
/// field instead of panicking.
#[must_use]
pub struct Builder<K, S, P = PeakEwma, C = ErrIsFailure> {
    picker: P,
    classify: C,
    endpoints: Vec<(K, S, f64)>,
    cap: Option<usize>,
    decay: Duration,
    default_rtt: Duration,
    failure_penalty: Duration,
    slow_start: Option<SlowStart>,
    seed: Option<u64>,
}

impl<K, S> Builder<K, S> {
    pub(crate) fn new() -> Self {
        Self {
            picker: PeakEwma::default(),
            classify: ErrIsFailure,
            endpoints: Vec::new(),
            cap: None,
            decay: DEFAULT_DECAY,
            default_rtt: DEFAULT_RTT,
            failure_penalty: DEFAULT_FAILURE_PENALTY,
            slow_start: None,
            seed: None,
        }
    }
}

impl<K, S, P, C> Builder<K, S, P, C> {
    /// Sets the picker (default [`PeakEwma`]).
    pub fn picker<P2: Picker>(self, picker: P2) -> Builder<K, S, P2, C> {
        Builder {
            picker,
            classify: self.classify,
            endpoints: self.endpoints,
            cap: self.cap,
            decay: self.decay,
            default_rtt: self.default_rtt,
            failure_penalty: self.failure_penalty,
            slow_start: self.slow_start,
            seed: self.seed,
        }
    }

    /// Sets the classifier deciding which calls count as failures
    /// (default: the inner service's `Err`).
    pub fn classify<C2>(self, classify: C2) -> Builder<K, S, P, C2> {
        Builder {
            picker: self.picker,
            classify,
            endpoints: self.endpoints,
            cap: self.cap,
            decay: self.decay,
            default_rtt: self.default_rtt,
            failure_penalty: self.failure_penalty,
            slow_start: self.slow_start,
            seed: self.seed,
        }
    }

    /// Adds an endpoint with weight 1.
    pub fn endpoint(self, key: K, service: S) -> Self {
        self.weighted_endpoint(key, service, 1.0)
    }

    /// Adds an endpoint with a weight (finite, > 0; checked in `build`).
    pub fn weighted_endpoint(mut self, key: K, service: S, weight: f64) -> Self {
        self.endpoints.push((key, service, weight));
        self
    }

    /// Caps the requests in flight on each endpoint (>= 1). Endpoints at the
    /// cap are skipped; when all are, calls fail with `Error::Overloaded`.
    pub fn max_in_flight(mut self, cap: usize) -> Self {
        self.cap = Some(cap);
        self
    }

    /// Decay time constant τ of the latency EWMA (> 0; default 10 s).
    pub fn decay(mut self, tau: Duration) -> Self {
        self.decay = tau;
        self
    }

    /// Latency assumed for an endpoint without samples (default 30 ms).
    pub fn default_rtt(mut self, rtt: Duration) -> Self {
        self.default_rtt = rtt;
        self
    }

    /// Latency sample recorded for a failed call (default 1 s). A
    /// `Retry-After` hint from the classifier replaces it, capped at 30 s.
    pub fn failure_penalty(mut self, penalty: Duration) -> Self {
        self.failure_penalty = penalty;
        self
    }

    /// Ramps the weight of endpoints inserted after `build` (off by default).
    pub fn slow_start(mut self, slow_start: SlowStart) -> Self {
        self.slow_start = Some(slow_start);
        self
    }

    /// Seeds the pickers' random numbers, making a single-threaded run
    /// repeat exactly (for simulations and tests). Unseeded balancers use a
    /// thread-local generator.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Validates the configuration and builds the balancer.
    pub fn build(self) -> Result<Balance<K, S, P, C>, ConfigError>
    where
        K: Hash + Eq,
        P: Picker,
    {
        let tau = check_nonzero("decay", self.decay)?;
        if self.cap == Some(0) {
            return Err(ConfigError::new("max_in_flight", 0, "an integer >= 1"));
        }
        let mut seen = HashSet::with_capacity(self.endpoints.len());
        for (key, _, w) in &self.endpoints {
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
        let model = Arc::new(Model {
            epoch: now,
            tau_ns: tau.as_nanos() as f64,
            default_rtt_ns: self.default_rtt.as_nanos() as f64,
            penalty_ns: self.failure_penalty.as_nanos() as f64,
            slow_start: self.slow_start,
        });
        let shared = Arc::new(Shared {
            set: ArcSwap::from_pointee(Snapshot::new(&self.picker, Vec::new(), Vec::new())),
            picker: self.picker,
            classify: self.classify,
            writer: Mutex::new(()),
            model,
            cap: self.cap,
            rng: RngSource::new(self.seed),
            next_id: AtomicU64::new(0),
        });
        let mut entries = Vec::with_capacity(self.endpoints.len());
        let mut states = Vec::with_capacity(self.endpoints.len());
        for (key, service, w) in self.endpoints {
            states.push(shared.new_endpoint(&key, w, now, false));
            entries.push(Arc::new(Entry { key, service }));
        }
        shared
            .set
            .store(Arc::new(Snapshot::new(&shared.picker, entries, states)));
        Ok(Balance { shared })
    }
}
