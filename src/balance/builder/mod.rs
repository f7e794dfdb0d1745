//! [`Builder`]: configures and builds a [`Balance`].

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use super::load::LoadSettings;
use super::{Balance, Label, MakeObserver};
use crate::classify::ErrIsFailure;
use crate::error::{ConfigError, check_bounded, check_positive, check_weight};
use crate::guard::GuardSettings;
use crate::health::{DEFAULT_PANIC_THRESHOLD, PanicMode};
use crate::model::{
    DEFAULT_DECAY, DEFAULT_FAILURE_DECAY, DEFAULT_FAILURE_PENALTY, DEFAULT_RTT,
    DEFAULT_SAMPLE_DECAY, EndpointMeta, SlowStart,
};
use crate::outlier::OutlierDetection;
use crate::pick::{PeakEwma, Picker};
use crate::route::Routing;

mod assemble;
mod setters;

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
    guards: GuardSettings,
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
                guards: GuardSettings::default(),
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
    /// Validates the configuration and builds the balancer.
    ///
    /// # Time
    /// A call's latency is measured with the CPU's time-stamp counter
    /// (through [`quanta`](https://docs.rs/quanta); the OS's monotonic
    /// clock where the CPU has no invariant counter), kept within
    /// microseconds of tokio's clock, which every timer of the crate uses.
    /// A balancer built where tokio's clock is paused
    /// (`#[tokio::test(start_paused = true)]`, or after
    /// `tokio::time::pause()`) measures on tokio's clock instead, so a test
    /// that advances time sees the latencies it simulates. Pause the clock
    /// before building: the choice is made here.
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
                guards: c.guards.clone(),
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
