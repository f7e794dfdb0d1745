//! [`OutlierDetection`]: the rules, their thresholds and the ejection policy.

use std::time::Duration;

use super::consecutive::{
    Consecutive, DEFAULT_CONSECUTIVE_FAILURES, DEFAULT_CONSECUTIVE_GATEWAY_FAILURES,
    DEFAULT_CONSECUTIVE_LOCAL_ORIGIN_FAILURES,
};
use super::failure_percentage::FailurePercentage;
use super::latency::LatencyOutlier;
use super::rule::check_percent;
use super::success_rate::SuccessRate;
use crate::error::ConfigError;
use crate::time::nanos;

/// How often the interval rules run: 10 s (Envoy's `interval`, gRPC A50).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// First ejection lasts this long; the n-th lasts n times as long: 30 s
/// (Envoy's `base_ejection_time`, gRPC A50).
pub const DEFAULT_BASE_EJECTION_TIME: Duration = Duration::from_secs(30);
/// Cap on one ejection (before jitter): 300 s (Envoy's `max_ejection_time`,
/// gRPC A50).
pub const DEFAULT_MAX_EJECTION_TIME: Duration = Duration::from_secs(300);
/// Random extra ejection time, uniform in `0..=jitter`: 3 s. Envoy's
/// `max_ejection_time_jitter` defaults to 0, but un-ejection here happens at
/// the exact instant an ejection ends (not on an interval timer), so hosts
/// ejected in one evaluation — and the same host ejected by a fleet of
/// clients at about the same time — would all return at the same instant.
/// One tenth of the base ejection time spreads them without changing the
/// ejection time a user configured by more than 10%.
pub const DEFAULT_MAX_EJECTION_JITTER: Duration = Duration::from_secs(3);
/// The longest base or maximum ejection time accepted: one day. An
/// ejection longer than that is a decommissioning, which belongs to
/// discovery (remove the endpoint), not to outlier detection.
pub const MAX_EJECTION_BOUND: Duration = Duration::from_secs(24 * 3600);

/// At most this share of the pool is ejected at once: 10% (Envoy's
/// `max_ejection_percent`, gRPC A50); see [`max_ejections`] for small pools.
pub const DEFAULT_MAX_EJECTION_PERCENT: u32 = 10;

/// The largest number of hosts of an `n`-host pool that may be ejected at
/// once under `max_ejection_percent`:
///
/// `0` if `n ≤ 1` or `percent = 0`, else `min(n − 1, max(1, ⌊n · percent / 100⌋))`.
///
/// So a 3-host pool at 10% can still eject its one bad host (Envoy also
/// ejects at least one), and no pool ever has all its hosts ejected.
///
/// ```
/// use tower_lb::outlier::max_ejections;
/// assert_eq!(max_ejections(1, 10), 0);
/// assert_eq!(max_ejections(3, 10), 1);
/// assert_eq!(max_ejections(20, 10), 2);
/// assert_eq!(max_ejections(4, 100), 3);
/// ```
pub fn max_ejections(n: usize, percent: u32) -> usize {
    if n <= 1 || percent == 0 {
        return 0;
    }
    let share = (n as u128 * u128::from(percent.min(100)) / 100) as usize;
    share.max(1).min(n - 1)
}

/// Outlier detection settings: which rules run and how long ejections last.
///
/// Built with [`OutlierDetection::builder`]; [`Default`] is every rule on
/// with the defaults above. Read by [`Detector`](super::Detector) on every
/// call; cheap to share behind the balancer's `Arc`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutlierDetection {
    pub(crate) interval_ns: u64,
    pub(crate) base_ejection_ns: u64,
    pub(crate) max_ejection_ns: u64,
    pub(crate) jitter_ns: u64,
    pub(crate) max_ejection_percent: u32,
    pub(crate) consecutive_failures: Option<Consecutive>,
    pub(crate) consecutive_gateway_failures: Option<Consecutive>,
    pub(crate) consecutive_local_origin_failures: Option<Consecutive>,
    pub(crate) success_rate: Option<SuccessRate>,
    pub(crate) failure_percentage: Option<FailurePercentage>,
    pub(crate) latency: Option<LatencyOutlier>,
}

impl Default for OutlierDetection {
    fn default() -> Self {
        Self {
            interval_ns: nanos(DEFAULT_INTERVAL),
            base_ejection_ns: nanos(DEFAULT_BASE_EJECTION_TIME),
            max_ejection_ns: nanos(DEFAULT_MAX_EJECTION_TIME),
            jitter_ns: nanos(DEFAULT_MAX_EJECTION_JITTER),
            max_ejection_percent: DEFAULT_MAX_EJECTION_PERCENT,
            consecutive_failures: Some(Consecutive::new(DEFAULT_CONSECUTIVE_FAILURES)),
            consecutive_gateway_failures: Some(Consecutive::new(
                DEFAULT_CONSECUTIVE_GATEWAY_FAILURES,
            )),
            consecutive_local_origin_failures: Some(Consecutive::new(
                DEFAULT_CONSECUTIVE_LOCAL_ORIGIN_FAILURES,
            )),
            success_rate: Some(SuccessRate::default()),
            failure_percentage: Some(FailurePercentage::default()),
            latency: Some(LatencyOutlier::default()),
        }
    }
}

impl OutlierDetection {
    /// A builder starting from the defaults.
    pub fn builder() -> Builder {
        Builder {
            interval: DEFAULT_INTERVAL,
            base_ejection_time: DEFAULT_BASE_EJECTION_TIME,
            max_ejection_time: DEFAULT_MAX_EJECTION_TIME,
            max_ejection_jitter: DEFAULT_MAX_EJECTION_JITTER,
            cfg: Self::default(),
        }
    }

    /// How often the interval rules run.
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns)
    }
    /// Duration of a host's first ejection.
    pub fn base_ejection_time(&self) -> Duration {
        Duration::from_nanos(self.base_ejection_ns)
    }
    /// Cap on one ejection, before jitter.
    pub fn max_ejection_time(&self) -> Duration {
        Duration::from_nanos(self.max_ejection_ns)
    }
    /// Upper bound of the random time added to each ejection.
    pub fn max_ejection_jitter(&self) -> Duration {
        Duration::from_nanos(self.jitter_ns)
    }
    /// Percent of the pool that may be ejected at once (see [`max_ejections`]).
    pub fn max_ejection_percent(&self) -> u32 {
        self.max_ejection_percent
    }
    /// The consecutive-failures rule, if on.
    pub fn consecutive_failures(&self) -> Option<Consecutive> {
        self.consecutive_failures
    }
    /// The consecutive-gateway-failures rule, if on.
    pub fn consecutive_gateway_failures(&self) -> Option<Consecutive> {
        self.consecutive_gateway_failures
    }
    /// The consecutive-local-origin-failures rule, if on.
    pub fn consecutive_local_origin_failures(&self) -> Option<Consecutive> {
        self.consecutive_local_origin_failures
    }
    /// The success-rate rule, if on.
    pub fn success_rate(&self) -> Option<SuccessRate> {
        self.success_rate
    }
    /// The failure-percentage rule, if on.
    pub fn failure_percentage(&self) -> Option<FailurePercentage> {
        self.failure_percentage
    }
    /// The latency-outlier rule, if on.
    pub fn latency(&self) -> Option<LatencyOutlier> {
        self.latency
    }

    /// Ejection time for a host ejected for the `multiplier`-th time (≥ 1)
    /// before jitter: `min(base · multiplier, max)`.
    pub(crate) fn ejection_ns(&self, multiplier: u32) -> u64 {
        self.base_ejection_ns
            .saturating_mul(u64::from(multiplier.max(1)))
            .min(self.max_ejection_ns)
    }

    /// The multiplier stops growing once the ejection time reaches the cap,
    /// so decay back to zero takes a bounded number of intervals.
    pub(crate) fn max_multiplier(&self) -> u32 {
        let m = self.max_ejection_ns.div_ceil(self.base_ejection_ns.max(1));
        u32::try_from(m).unwrap_or(u32::MAX).max(1)
    }
}

/// Builds an [`OutlierDetection`]; every value is checked in
/// [`build`](Self::build).
///
/// ```
/// use std::time::Duration;
/// use tower_lb::outlier::{Consecutive, LatencyOutlier, OutlierDetection};
///
/// let cfg = OutlierDetection::builder()
///     .interval(Duration::from_secs(5))
///     .consecutive_failures(Some(Consecutive::new(3)))
///     .success_rate(None) // off
///     .latency(Some(LatencyOutlier::default().factor(4.0)))
///     .build()?;
/// assert_eq!(cfg.interval(), Duration::from_secs(5));
/// assert!(cfg.success_rate().is_none());
/// # Ok::<_, tower_lb::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    interval: Duration,
    base_ejection_time: Duration,
    max_ejection_time: Duration,
    max_ejection_jitter: Duration,
    cfg: OutlierDetection,
}

impl Builder {
    /// How often the interval rules run (> 0, at most one hour; default 10 s).
    pub fn interval(mut self, d: Duration) -> Self {
        self.interval = d;
        self
    }
    /// Duration of a host's first ejection (> 0, at most one day; default 30 s).
    pub fn base_ejection_time(mut self, d: Duration) -> Self {
        self.base_ejection_time = d;
        self
    }
    /// Cap on one ejection before jitter (≥ base ejection time, at most one
    /// day; default 300 s).
    pub fn max_ejection_time(mut self, d: Duration) -> Self {
        self.max_ejection_time = d;
        self
    }
    /// Upper bound of the uniform random time added to each ejection (at
    /// most one year; default 3 s; zero turns jitter off).
    pub fn max_ejection_jitter(mut self, d: Duration) -> Self {
        self.max_ejection_jitter = d;
        self
    }
    /// Percent of the pool that may be ejected at once (0..=100; default 10;
    /// 0 turns ejection off while still counting detections).
    pub fn max_ejection_percent(mut self, percent: u32) -> Self {
        self.cfg.max_ejection_percent = percent;
        self
    }
    /// The consecutive-failures rule (`None` turns it off). Every hard
    /// failure counts (not `Slow`, not `Overloaded`).
    pub fn consecutive_failures(mut self, rule: Option<Consecutive>) -> Self {
        self.cfg.consecutive_failures = rule;
        self
    }
    /// The consecutive-gateway-failures rule (`None` turns it off). Counts
    /// `Gateway`, `Connect` and `Timeout` failures; any other failure or a
    /// success resets the count.
    pub fn consecutive_gateway_failures(mut self, rule: Option<Consecutive>) -> Self {
        self.cfg.consecutive_gateway_failures = rule;
        self
    }
    /// The consecutive-local-origin-failures rule (`None` turns it off).
    /// Counts `Connect` and `Timeout` failures (the host gave no answer);
    /// any other outcome resets the count. A timeout the stack owns (the
    /// balancer's own, a retry layer's per-try timeout) is such a failure.
    pub fn consecutive_local_origin_failures(mut self, rule: Option<Consecutive>) -> Self {
        self.cfg.consecutive_local_origin_failures = rule;
        self
    }
    /// The success-rate rule (`None` turns it off).
    pub fn success_rate(mut self, rule: Option<SuccessRate>) -> Self {
        self.cfg.success_rate = rule;
        self
    }
    /// The failure-percentage rule (`None` turns it off).
    pub fn failure_percentage(mut self, rule: Option<FailurePercentage>) -> Self {
        self.cfg.failure_percentage = rule;
        self
    }
    /// The latency-outlier rule (`None` turns it off).
    pub fn latency(mut self, rule: Option<LatencyOutlier>) -> Self {
        self.cfg.latency = rule;
        self
    }

    /// Checks every value.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first invalid field (`outlier.interval`,
    /// `outlier.success_rate.stdev_factor`, …) and its allowed range.
    pub fn build(self) -> Result<OutlierDetection, ConfigError> {
        let mut cfg = self.cfg;
        let hour = Duration::from_secs(3600);
        let within = |field, d: Duration, max: Duration, allowed| {
            if d.is_zero() || d > max {
                Err(ConfigError::new(field, d, allowed))
            } else {
                Ok(d)
            }
        };
        cfg.interval_ns = nanos(within(
            "outlier.interval",
            self.interval,
            hour,
            "a duration > 0 and at most one hour",
        )?);
        cfg.base_ejection_ns = nanos(within(
            "outlier.base_ejection_time",
            self.base_ejection_time,
            MAX_EJECTION_BOUND,
            "a duration > 0 and at most one day",
        )?);
        if self.max_ejection_time < self.base_ejection_time
            || self.max_ejection_time > MAX_EJECTION_BOUND
        {
            return Err(ConfigError::new(
                "outlier.max_ejection_time",
                self.max_ejection_time,
                "a duration >= base_ejection_time and at most one day",
            ));
        }
        crate::error::check_bounded("outlier.max_ejection_jitter", self.max_ejection_jitter)?;
        cfg.max_ejection_ns = nanos(self.max_ejection_time);
        cfg.jitter_ns = nanos(self.max_ejection_jitter);
        check_percent("outlier.max_ejection_percent", cfg.max_ejection_percent)?;
        if let Some(r) = cfg.consecutive_failures {
            r.check(
                "outlier.consecutive_failures.threshold",
                "outlier.consecutive_failures.enforcing_percent",
            )?;
        }
        if let Some(r) = cfg.consecutive_gateway_failures {
            r.check(
                "outlier.consecutive_gateway_failures.threshold",
                "outlier.consecutive_gateway_failures.enforcing_percent",
            )?;
        }
        if let Some(r) = cfg.consecutive_local_origin_failures {
            r.check(
                "outlier.consecutive_local_origin_failures.threshold",
                "outlier.consecutive_local_origin_failures.enforcing_percent",
            )?;
        }
        if let Some(r) = cfg.success_rate {
            r.check()?;
        }
        if let Some(r) = cfg.failure_percentage {
            r.check()?;
        }
        if let Some(r) = cfg.latency {
            r.check()?;
        }
        Ok(cfg)
    }
}
