//! [`Metrics`]: what a user hands the builder.

use std::fmt;
use std::sync::Arc;

use opentelemetry::metrics::Meter;

use super::DEFAULT_DURATION_BUCKETS;
use super::balancer::BalanceMetrics;
use crate::balance::Observe;
use crate::error::ConfigError;

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
    /// Bound histograms (feature `metrics-bound`; always `false` without).
    pub(crate) bind: bool,
}

impl Metrics {
    /// Metrics on `meter`, for a balancer called `name`.
    pub fn new(meter: &Meter, name: impl Into<String>) -> Self {
        Self {
            meter: meter.clone(),
            name: Arc::from(name.into()),
            buckets: Arc::from(&DEFAULT_DURATION_BUCKETS[..]),
            retries: Vec::new(),
            bind: false,
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

    /// Records `lb.request.duration` through histograms bound to each
    /// endpoint's attribute sets (feature `metrics-bound`; default `false`:
    /// `Histogram::record` with the set, OpenTelemetry's stable API). A
    /// bound record skips hashing and comparing the set's attributes (see
    /// the [module docs](super) on cost); the feature turns on
    /// OpenTelemetry's experimental bound instruments in `opentelemetry`
    /// and `opentelemetry_sdk` 0.33. Leave it off with a meter provider
    /// other than that SDK: the API's default `bind` records nothing.
    ///
    /// The exposition is the same either way: each series appears with its
    /// first record.
    ///
    /// ```
    /// use tower_lb::metrics::Metrics;
    /// let meter = opentelemetry::global::meter("app");
    /// let m = Metrics::new(&meter, "users").bound(true);
    /// # let _ = m;
    /// ```
    #[cfg(feature = "metrics-bound")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics-bound")))]
    pub fn bound(mut self, on: bool) -> Self {
        self.bind = on;
        self
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

    /// Adds a source of retry counters (see `Metrics::retries`, defined
    /// beside the retry layer so that metrics do not depend on it).
    pub(crate) fn push_retries(mut self, source: RetrySource) -> Self {
        self.retries.push(source);
        self
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("name", &self.name)
            .field("buckets", &self.buckets)
            .field("retry_layers", &self.retries.len())
            .field("bound", &self.bind)
            .finish_non_exhaustive()
    }
}

/// What `Builder::metrics` takes: the balancer's instruments, made when it
/// is built.
#[allow(private_interfaces)] // the trait's signature is the crate's own: see `balance::Observer`
impl crate::balance::sealed::Sealed for Metrics {
    fn name(&self) -> Arc<str> {
        Arc::clone(&self.name)
    }

    fn into_observer(self) -> crate::balance::MakeObserver {
        Arc::new(move |built| BalanceMetrics::new(&self, built) as Arc<dyn Observe>)
    }
}
