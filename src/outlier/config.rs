//! [`OutlierDetection`]: the rules, their thresholds and the ejection policy.

use std::time::Duration;

use crate::error::{ConfigError, check_nonzero};

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
/// At most this share of the pool is ejected at once: 10% (Envoy's
/// `max_ejection_percent`, gRPC A50); see [`max_ejections`] for small pools.
pub const DEFAULT_MAX_EJECTION_PERCENT: u32 = 10;
/// Consecutive failures that eject a host: 5 (Envoy's `consecutive_5xx`).
pub const DEFAULT_CONSECUTIVE_FAILURES: u32 = 5;
/// Consecutive gateway failures that eject a host: 5 (Envoy's
/// `consecutive_gateway_failure`).
pub const DEFAULT_CONSECUTIVE_GATEWAY_FAILURES: u32 = 5;
/// A host is a success-rate outlier below `mean − 1.9 σ` of the pool
/// (Envoy's `success_rate_stdev_factor` 1900 / 1000, gRPC A50).
pub const DEFAULT_SUCCESS_RATE_STDEV_FACTOR: f64 = 1.9;
/// Hosts with enough volume needed before success rate is judged: 5 (Envoy).
pub const DEFAULT_SUCCESS_RATE_MINIMUM_HOSTS: u32 = 5;
/// Requests per interval a host needs to be judged on success rate: 100 (Envoy).
pub const DEFAULT_SUCCESS_RATE_REQUEST_VOLUME: u32 = 100;
/// A host at or above this success rate (percent) is never a success-rate
/// outlier: 99%. Ours (Envoy users asked for it in envoy#18752 and #37723):
/// when the other hosts are nearly perfect, σ is tiny, and with 5 hosts a
/// single host that differs at all sits exactly 2 σ below the mean — past
/// Envoy's 1.9 — so one stray failure in 100 requests would eject a healthy
/// host. 1% is one failure at the default volume, the resolution of the
/// rule; set 100 for Envoy's behaviour, higher nines for high-volume
/// services that must catch 0.1% error rates.
pub const DEFAULT_SUCCESS_RATE_EJECTION_THRESHOLD: f64 = 99.0;
/// Failure percentage above which a host is ejected: 85% (Envoy's
/// `failure_percentage_threshold`, gRPC A50).
pub const DEFAULT_FAILURE_PERCENTAGE_THRESHOLD: u32 = 85;
/// Hosts with enough volume needed before failure percentage is judged: 5 (Envoy).
pub const DEFAULT_FAILURE_PERCENTAGE_MINIMUM_HOSTS: u32 = 5;
/// Requests per interval a host needs to be judged on failure percentage: 50 (Envoy).
pub const DEFAULT_FAILURE_PERCENTAGE_REQUEST_VOLUME: u32 = 50;
/// A host is a latency outlier when its mean latency over an interval
/// exceeds 3 × the pool's median host mean. Ours (neither Envoy nor gRPC has
/// the rule): replicas on mixed hardware commonly differ by up to 2×; a 3×
/// gap is a sick host (bad disk, GC storm, noisy neighbour), not variance.
pub const DEFAULT_LATENCY_FACTOR: f64 = 3.0;
/// Hosts with enough latency samples needed before the latency rule runs: 3.
/// The median ignores one slow host of three (its breakdown point is 50%),
/// unlike the mean and σ of the success-rate rule, which need 5 hosts; and
/// small pools are where one slow replica hurts most.
pub const DEFAULT_LATENCY_MINIMUM_HOSTS: u32 = 3;
/// Latency samples per interval a host needs to be judged: 50, as Envoy's
/// failure-percentage volume. Load-aware pickers send a slow host less
/// traffic, so this is kept lower than the success-rate volume.
pub const DEFAULT_LATENCY_REQUEST_VOLUME: u32 = 50;
/// Intervals in a row a host must be a latency outlier before ejection: 3
/// (30 s at the default interval), so one GC pause or burst does not eject.
pub const DEFAULT_LATENCY_CONSECUTIVE_INTERVALS: u32 = 3;
/// Share of detections that actually eject: 100% (Envoy's `enforcing_*`).
pub const DEFAULT_ENFORCING_PERCENT: u32 = 100;

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

/// A consecutive-failures rule: eject a host after `threshold` failures in a
/// row (any success in between resets the count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Consecutive {
    pub(crate) threshold: u32,
    pub(crate) enforcing_percent: u32,
}

impl Consecutive {
    /// Ejects after `threshold` (≥ 1, checked in `build`) failures in a row.
    pub fn new(threshold: u32) -> Self {
        Self {
            threshold,
            enforcing_percent: DEFAULT_ENFORCING_PERCENT,
        }
    }

    /// Share of detections that eject (0..=100, default 100); 0 only counts.
    pub fn enforcing_percent(mut self, percent: u32) -> Self {
        self.enforcing_percent = percent;
        self
    }

    fn check(self, threshold: &'static str, enforcing: &'static str) -> Result<Self, ConfigError> {
        if self.threshold == 0 {
            return Err(ConfigError::new(
                threshold,
                self.threshold,
                "an integer >= 1",
            ));
        }
        check_percent(enforcing, self.enforcing_percent)?;
        Ok(self)
    }
}

/// The success-rate rule (Envoy, gRPC A50): among hosts with at least
/// `request_volume` requests in the interval — when there are at least
/// `minimum_hosts` of them — eject those whose success rate is below
/// `mean − stdev_factor · σ` and below `ejection_threshold`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuccessRate {
    pub(crate) stdev_factor: f64,
    pub(crate) ejection_threshold: f64,
    pub(crate) minimum_hosts: u32,
    pub(crate) request_volume: u32,
    pub(crate) enforcing_percent: u32,
}

impl Default for SuccessRate {
    fn default() -> Self {
        Self {
            stdev_factor: DEFAULT_SUCCESS_RATE_STDEV_FACTOR,
            ejection_threshold: DEFAULT_SUCCESS_RATE_EJECTION_THRESHOLD,
            minimum_hosts: DEFAULT_SUCCESS_RATE_MINIMUM_HOSTS,
            request_volume: DEFAULT_SUCCESS_RATE_REQUEST_VOLUME,
            enforcing_percent: DEFAULT_ENFORCING_PERCENT,
        }
    }
}

impl SuccessRate {
    /// How many σ below the mean a host must fall (finite, > 0; default 1.9).
    pub fn stdev_factor(mut self, k: f64) -> Self {
        self.stdev_factor = k;
        self
    }
    /// Success rate in percent at or above which a host is never ejected
    /// by this rule (in `(0, 100]`; default 99; 100 is Envoy's behaviour).
    pub fn ejection_threshold(mut self, percent: f64) -> Self {
        self.ejection_threshold = percent;
        self
    }
    /// Hosts with enough volume needed to judge (≥ 2; default 5).
    pub fn minimum_hosts(mut self, n: u32) -> Self {
        self.minimum_hosts = n;
        self
    }
    /// Requests in the interval a host needs to be judged (≥ 1; default 100).
    pub fn request_volume(mut self, n: u32) -> Self {
        self.request_volume = n;
        self
    }
    /// Share of detections that eject (0..=100, default 100).
    pub fn enforcing_percent(mut self, percent: u32) -> Self {
        self.enforcing_percent = percent;
        self
    }

    fn check(self) -> Result<Self, ConfigError> {
        if !(self.stdev_factor.is_finite() && self.stdev_factor > 0.0) {
            return Err(ConfigError::new(
                "outlier.success_rate.stdev_factor",
                self.stdev_factor,
                "a finite number > 0",
            ));
        }
        let t = self.ejection_threshold;
        if !(t.is_finite() && t > 0.0 && t <= 100.0) {
            return Err(ConfigError::new(
                "outlier.success_rate.ejection_threshold",
                t,
                "a number in (0, 100]",
            ));
        }
        check_min(
            "outlier.success_rate.minimum_hosts",
            self.minimum_hosts,
            2,
            "an integer >= 2",
        )?;
        check_min(
            "outlier.success_rate.request_volume",
            self.request_volume,
            1,
            "an integer >= 1",
        )?;
        check_percent(
            "outlier.success_rate.enforcing_percent",
            self.enforcing_percent,
        )?;
        Ok(self)
    }
}

/// The failure-percentage rule (Envoy, gRPC A50): among hosts with at least
/// `request_volume` requests in the interval — when there are at least
/// `minimum_hosts` of them — eject those whose failure percentage is above
/// `threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailurePercentage {
    pub(crate) threshold: u32,
    pub(crate) minimum_hosts: u32,
    pub(crate) request_volume: u32,
    pub(crate) enforcing_percent: u32,
}

impl Default for FailurePercentage {
    fn default() -> Self {
        Self {
            threshold: DEFAULT_FAILURE_PERCENTAGE_THRESHOLD,
            minimum_hosts: DEFAULT_FAILURE_PERCENTAGE_MINIMUM_HOSTS,
            request_volume: DEFAULT_FAILURE_PERCENTAGE_REQUEST_VOLUME,
            enforcing_percent: DEFAULT_ENFORCING_PERCENT,
        }
    }
}

impl FailurePercentage {
    /// Failure percentage a host must exceed (0..=100; default 85).
    pub fn threshold(mut self, percent: u32) -> Self {
        self.threshold = percent;
        self
    }
    /// Hosts with enough volume needed to judge (≥ 1; default 5).
    pub fn minimum_hosts(mut self, n: u32) -> Self {
        self.minimum_hosts = n;
        self
    }
    /// Requests in the interval a host needs to be judged (≥ 1; default 50).
    pub fn request_volume(mut self, n: u32) -> Self {
        self.request_volume = n;
        self
    }
    /// Share of detections that eject (0..=100, default 100).
    pub fn enforcing_percent(mut self, percent: u32) -> Self {
        self.enforcing_percent = percent;
        self
    }

    fn check(self) -> Result<Self, ConfigError> {
        check_percent("outlier.failure_percentage.threshold", self.threshold)?;
        check_min(
            "outlier.failure_percentage.minimum_hosts",
            self.minimum_hosts,
            1,
            "an integer >= 1",
        )?;
        check_min(
            "outlier.failure_percentage.request_volume",
            self.request_volume,
            1,
            "an integer >= 1",
        )?;
        check_percent(
            "outlier.failure_percentage.enforcing_percent",
            self.enforcing_percent,
        )?;
        Ok(self)
    }
}

/// The latency-outlier rule (ours; Envoy has had the request open since
/// 2016): among hosts with at least `request_volume` latency samples in the
/// interval — when there are at least `minimum_hosts` of them — a host whose
/// mean latency exceeds `factor ×` the median of the hosts' means is an
/// outlier; one that is an outlier for `consecutive_intervals` intervals in a
/// row is ejected.
///
/// Latency samples are the calls that came back: `Success` and
/// `Failure(Slow)`. Hard failures are left to the failure rules (a host that
/// fails fast would otherwise look fast).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyOutlier {
    pub(crate) factor: f64,
    pub(crate) minimum_hosts: u32,
    pub(crate) request_volume: u32,
    pub(crate) consecutive_intervals: u32,
    pub(crate) enforcing_percent: u32,
}

impl Default for LatencyOutlier {
    fn default() -> Self {
        Self {
            factor: DEFAULT_LATENCY_FACTOR,
            minimum_hosts: DEFAULT_LATENCY_MINIMUM_HOSTS,
            request_volume: DEFAULT_LATENCY_REQUEST_VOLUME,
            consecutive_intervals: DEFAULT_LATENCY_CONSECUTIVE_INTERVALS,
            enforcing_percent: DEFAULT_ENFORCING_PERCENT,
        }
    }
}

impl LatencyOutlier {
    /// How many times the pool median a host's mean must exceed (finite,
    /// > 1; default 3).
    pub fn factor(mut self, k: f64) -> Self {
        self.factor = k;
        self
    }
    /// Hosts with enough samples needed to judge (≥ 3: a median of two is
    /// dragged by either; default 3).
    pub fn minimum_hosts(mut self, n: u32) -> Self {
        self.minimum_hosts = n;
        self
    }
    /// Latency samples in the interval a host needs to be judged (≥ 1; default 50).
    pub fn request_volume(mut self, n: u32) -> Self {
        self.request_volume = n;
        self
    }
    /// Intervals in a row a host must be an outlier (≥ 1; default 3).
    pub fn consecutive_intervals(mut self, n: u32) -> Self {
        self.consecutive_intervals = n;
        self
    }
    /// Share of detections that eject (0..=100, default 100).
    pub fn enforcing_percent(mut self, percent: u32) -> Self {
        self.enforcing_percent = percent;
        self
    }

    fn check(self) -> Result<Self, ConfigError> {
        if !(self.factor.is_finite() && self.factor > 1.0) {
            return Err(ConfigError::new(
                "outlier.latency.factor",
                self.factor,
                "a finite number > 1",
            ));
        }
        check_min(
            "outlier.latency.minimum_hosts",
            self.minimum_hosts,
            3,
            "an integer >= 3",
        )?;
        check_min(
            "outlier.latency.request_volume",
            self.request_volume,
            1,
            "an integer >= 1",
        )?;
        check_min(
            "outlier.latency.consecutive_intervals",
            self.consecutive_intervals,
            1,
            "an integer >= 1",
        )?;
        check_percent("outlier.latency.enforcing_percent", self.enforcing_percent)?;
        Ok(self)
    }
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
            success_rate: Some(SuccessRate::default()),
            failure_percentage: Some(FailurePercentage::default()),
            latency: Some(LatencyOutlier::default()),
        }
    }
}

impl OutlierDetection {
    /// A builder starting from the defaults.
    pub fn builder() -> OutlierDetectionBuilder {
        OutlierDetectionBuilder {
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
pub struct OutlierDetectionBuilder {
    interval: Duration,
    base_ejection_time: Duration,
    max_ejection_time: Duration,
    max_ejection_jitter: Duration,
    cfg: OutlierDetection,
}

impl OutlierDetectionBuilder {
    /// How often the interval rules run (> 0; default 10 s).
    pub fn interval(mut self, d: Duration) -> Self {
        self.interval = d;
        self
    }
    /// Duration of a host's first ejection (> 0; default 30 s).
    pub fn base_ejection_time(mut self, d: Duration) -> Self {
        self.base_ejection_time = d;
        self
    }
    /// Cap on one ejection before jitter (≥ base ejection time; default 300 s).
    pub fn max_ejection_time(mut self, d: Duration) -> Self {
        self.max_ejection_time = d;
        self
    }
    /// Upper bound of the uniform random time added to each ejection
    /// (any duration; default 3 s; zero turns jitter off).
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
        cfg.interval_ns = nanos(check_nonzero("outlier.interval", self.interval)?);
        cfg.base_ejection_ns = nanos(check_nonzero(
            "outlier.base_ejection_time",
            self.base_ejection_time,
        )?);
        if self.max_ejection_time < self.base_ejection_time {
            return Err(ConfigError::new(
                "outlier.max_ejection_time",
                self.max_ejection_time,
                "a duration >= base_ejection_time",
            ));
        }
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

/// A duration in nanoseconds, saturating at `u64::MAX` (584 years).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn check_percent(field: &'static str, p: u32) -> Result<u32, ConfigError> {
    if p <= 100 {
        Ok(p)
    } else {
        Err(ConfigError::new(field, p, "an integer in 0..=100"))
    }
}

fn check_min(
    field: &'static str,
    v: u32,
    min: u32,
    allowed: &'static str,
) -> Result<u32, ConfigError> {
    if v >= min {
        Ok(v)
    } else {
        Err(ConfigError::new(field, v, allowed))
    }
}
