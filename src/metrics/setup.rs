//! [`Metrics`]: what a user hands the builder.

use std::fmt;
use std::sync::{Arc, Weak};

use opentelemetry::metrics::Meter;

use super::DEFAULT_DURATION_BUCKETS;
use crate::error::ConfigError;
use crate::retry::RetryLayer;

/// Reads a retry layer's counters: retries, budget exhaustions, hedges.
/// `None` once the layer is gone.
pub(crate) type RetrySource = Arc<dyn Fn() -> Option<[u64; 3]> + Send + Sync>;

/// Where a balancer reports its metrics: a meter, the balancer's name (the
/// `lb.name` attribute) and the options below. Pass it to
/// [`Builder::metrics`](crate::balance::Builder::metrics); see the
/// [module docs](super) for the instruments.
///
/// Cheap to clone. Creating it records nothing; instruments are created when
/// the balancer is built.
#[derive(Clone)]
pub struct Metrics {
    pub(crate) meter: Meter,
    pub(crate) name: Arc<str>,
    pub(crate) buckets: Arc<[f64]>,
    pub(crate) retries: Vec<RetrySource>,
}

impl Metrics {
    /// Metrics on `meter`, for a balancer called `name`.
    pub fn new(meter: &Meter, name: impl Into<String>) -> Self {
        Self {
            meter: meter.clone(),
            name: Arc::from(name.into()),
            buckets: Arc::from(&DEFAULT_DURATION_BUCKETS[..]),
            retries: Vec::new(),
        }
    }

    /// Metrics on a meter of the global meter provider
    /// (`opentelemetry::global`, scope [`SCOPE`](super::SCOPE)). Until an
    /// application installs a provider, the global one records nothing.
    pub fn global(name: impl Into<String>) -> Self {
        Self::new(&opentelemetry::global::meter(super::SCOPE), name)
    }

    /// The `lb.name` attribute.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Replaces the bucket boundaries of `lb.request.duration`, in seconds
    /// (default [`DEFAULT_DURATION_BUCKETS`]).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] on `duration_buckets` unless the list is non-empty,
    /// finite, positive and strictly increasing.
    pub fn duration_buckets(mut self, buckets: &[f64]) -> Result<Self, ConfigError> {
        let valid = !buckets.is_empty()
            && buckets.iter().all(|b| b.is_finite() && *b > 0.0)
            && buckets.windows(2).all(|w| w[0] < w[1]);
        if !valid {
            return Err(ConfigError::new(
                "duration_buckets",
                format!("{buckets:?}"),
                "a non-empty list of finite, positive, strictly increasing seconds",
            ));
        }
        self.buckets = Arc::from(buckets);
        Ok(self)
    }

    /// Also reports `layer`'s [`RetryStats`](crate::retry::RetryStats) as
    /// `lb.retries`, `lb.retry.budget.exhausted` and `lb.hedges`, under this
    /// balancer's `lb.name`. Register a layer with one balancer's metrics
    /// only, or its counts are reported twice. The metrics hold the layer
    /// weakly: once the layer and every service it made are dropped, they
    /// report nothing for it.
    pub fn retries<R, C>(mut self, layer: &RetryLayer<R, C>) -> Self
    where
        R: Send + Sync + 'static,
        C: Send + Sync + 'static,
    {
        let weak = Arc::downgrade(&layer.shared);
        self.retries.push(Arc::new(move || {
            Weak::upgrade(&weak).map(|s| {
                let stats = &s.stats;
                [stats.retries(), stats.budget_exhausted(), stats.hedges()]
            })
        }));
        self
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("name", &self.name)
            .field("buckets", &self.buckets)
            .field("retry_layers", &self.retries.len())
            .finish_non_exhaustive()
    }
}

/// A builder's metrics setting: the [`Metrics`] and how to label a key.
pub(crate) struct Setup<K> {
    pub(crate) metrics: Metrics,
    pub(crate) label: Label<K>,
}

/// Turns an endpoint key into its `lb.endpoint` value.
pub(crate) type Label<K> = Arc<dyn Fn(&K) -> String + Send + Sync>;
