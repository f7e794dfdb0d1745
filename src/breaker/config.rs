//! [`CircuitBreakerConfig`] and its validating builder.

use std::time::Duration;

use crate::error::{ConfigError, check_positive};

/// Default failure-rate threshold: 50 %, Resilience4j's
/// `failureRateThreshold` default.
pub const DEFAULT_FAILURE_RATE_THRESHOLD: f64 = 50.0;

/// Default slow-call-rate threshold: 100 %, Resilience4j's
/// `slowCallRateThreshold` default (the breaker trips on slowness only when
/// every call in the window is slow).
pub const DEFAULT_SLOW_CALL_RATE_THRESHOLD: f64 = 100.0;

/// Default duration above which a call counts as slow: 60 s, Resilience4j's
/// `slowCallDurationThreshold` default.
pub const DEFAULT_SLOW_CALL_DURATION: Duration = Duration::from_secs(60);

/// Default sliding window: the last 100 calls, Resilience4j's
/// `slidingWindowSize` default (count-based).
pub const DEFAULT_WINDOW_SIZE: usize = 100;

/// Default minimum number of calls in the window before rates are
/// evaluated: 100, Resilience4j's `minimumNumberOfCalls` default.
pub const DEFAULT_MINIMUM_CALLS: u32 = 100;

/// Default wait in the open state before probing: 60 s, Resilience4j's
/// `waitDurationInOpenState` default. It is the base of the backoff.
pub const DEFAULT_OPEN_WAIT: Duration = Duration::from_secs(60);

/// Default cap of the backed-off open wait: 300 s. Resilience4j waits a
/// constant time by default; we borrow Envoy's `max_ejection_time` default
/// (300 s) so that a replica that keeps failing its probes is retried at
/// least every five minutes.
pub const DEFAULT_OPEN_WAIT_CAP: Duration = Duration::from_secs(300);

/// Default number of probe calls admitted in the half-open state: 10,
/// Resilience4j's `permittedNumberOfCallsInHalfOpenState` default.
pub const DEFAULT_HALF_OPEN_PROBES: u32 = 10;

/// Default time a half-open probe may take before it counts as failed: 60 s.
/// Resilience4j's `maxWaitDurationInHalfOpenState` defaults to "forever",
/// which lets a hung probe keep the breaker half-open indefinitely; we bound
/// it by the slow-call duration, since a probe slower than that is at best a
/// slow call.
pub const DEFAULT_HALF_OPEN_TIMEOUT: Duration = DEFAULT_SLOW_CALL_DURATION;

/// Default jitter of the open wait: [`Jitter::Equal`], so that breakers
/// that opened together (one backend behind many clients) do not probe
/// together, while the wait still grows on every re-open.
pub const DEFAULT_JITTER: Jitter = Jitter::Equal;

/// Largest count-based window: 1,000,000 calls (one byte each).
pub const MAX_WINDOW_SIZE: usize = 1_000_000;

/// Longest time-based window: 3,600 one-second buckets.
pub const MAX_TIME_WINDOW: Duration = Duration::from_secs(3600);

/// Largest number of half-open probes: 10,000.
pub const MAX_HALF_OPEN_PROBES: u32 = 10_000;

/// Which calls the failure and slow-call rates are computed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlidingWindow {
    /// The last `n` recorded calls.
    Count(usize),
    /// The calls recorded in the last `n` whole seconds, kept in one bucket
    /// per second (a call leaves the window `n` seconds after the start of
    /// the second it was recorded in, as in Resilience4j).
    Time(Duration),
}

/// How the open wait is randomised.
///
/// The `k`-th consecutive open (`k = 0` for the first after a close) waits
/// a time drawn uniformly from `[lo, hi]`, where
/// `hi = min(cap, base · 2^(k+1))` and
///
/// * [`None`](Jitter::None): no randomness, the wait is `min(cap, base · 2^k)`;
/// * [`Full`](Jitter::Full): `lo = base`;
/// * [`Equal`](Jitter::Equal): `lo = max(base, hi / 2)`.
///
/// Every wait therefore lies in `[base, cap]`: the base is the shortest wait,
/// never shortened by jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Deterministic doubling: `base, 2·base, 4·base, …` up to the cap.
    None,
    /// Anywhere between the base and the doubled ceiling.
    Full,
    /// In the upper half of the doubled ceiling (never below the base).
    Equal,
}

/// Validated settings of a [`CircuitBreaker`](super::CircuitBreaker).
///
/// Rates are percentages in `(0, 100]`, as in Resilience4j. Build one with
/// [`CircuitBreakerConfig::builder`]; [`Default`] gives the named defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct CircuitBreakerConfig {
    pub(crate) failure_rate_threshold: f64,
    pub(crate) slow_call_rate_threshold: f64,
    pub(crate) slow_call_duration: Duration,
    pub(crate) window: SlidingWindow,
    pub(crate) minimum_calls: u32,
    pub(crate) consecutive_failures: Option<u32>,
    pub(crate) open_wait: Duration,
    pub(crate) open_wait_cap: Duration,
    pub(crate) jitter: Jitter,
    pub(crate) half_open_probes: u32,
    pub(crate) half_open_timeout: Duration,
    pub(crate) seed: Option<u64>,
}

impl Default for CircuitBreakerConfig {
    fn default() -> Self {
        Self {
            failure_rate_threshold: DEFAULT_FAILURE_RATE_THRESHOLD,
            slow_call_rate_threshold: DEFAULT_SLOW_CALL_RATE_THRESHOLD,
            slow_call_duration: DEFAULT_SLOW_CALL_DURATION,
            window: SlidingWindow::Count(DEFAULT_WINDOW_SIZE),
            minimum_calls: DEFAULT_MINIMUM_CALLS,
            consecutive_failures: None,
            open_wait: DEFAULT_OPEN_WAIT,
            open_wait_cap: DEFAULT_OPEN_WAIT_CAP,
            jitter: DEFAULT_JITTER,
            half_open_probes: DEFAULT_HALF_OPEN_PROBES,
            half_open_timeout: DEFAULT_HALF_OPEN_TIMEOUT,
            seed: None,
        }
    }
}

impl CircuitBreakerConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> Builder {
        Builder {
            config: Self::default(),
        }
    }

    /// Failure-rate threshold, in percent.
    pub fn failure_rate_threshold(&self) -> f64 {
        self.failure_rate_threshold
    }

    /// Slow-call-rate threshold, in percent.
    pub fn slow_call_rate_threshold(&self) -> f64 {
        self.slow_call_rate_threshold
    }

    /// Duration at or above which a call counts as slow.
    pub fn slow_call_duration(&self) -> Duration {
        self.slow_call_duration
    }

    /// The sliding window.
    pub fn window(&self) -> SlidingWindow {
        self.window
    }

    /// Calls the window must hold before rates are evaluated.
    pub fn minimum_calls(&self) -> u32 {
        self.minimum_calls
    }

    /// Consecutive hard failures that open the breaker, if that mode is on.
    pub fn consecutive_failures(&self) -> Option<u32> {
        self.consecutive_failures
    }

    /// Base of the open wait.
    pub fn open_wait(&self) -> Duration {
        self.open_wait
    }

    /// Cap of the open wait.
    pub fn open_wait_cap(&self) -> Duration {
        self.open_wait_cap
    }

    /// Jitter of the open wait.
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// Probe calls admitted in the half-open state.
    pub fn half_open_probes(&self) -> u32 {
        self.half_open_probes
    }

    /// Time a half-open probe may take before it counts as failed.
    pub fn half_open_timeout(&self) -> Duration {
        self.half_open_timeout
    }
}

/// Builds a [`CircuitBreakerConfig`]; every value is checked in
/// [`build`](Builder::build).
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    config: CircuitBreakerConfig,
}

impl Builder {
    /// Failure rate, in percent of the calls in the window, at or above
    /// which the breaker opens. Allowed: `(0, 100]`. Default
    /// [`DEFAULT_FAILURE_RATE_THRESHOLD`].
    pub fn failure_rate_threshold(mut self, percent: f64) -> Self {
        self.config.failure_rate_threshold = percent;
        self
    }

    /// Slow-call rate, in percent, at or above which the breaker opens.
    /// Allowed: `(0, 100]`. Default [`DEFAULT_SLOW_CALL_RATE_THRESHOLD`].
    pub fn slow_call_rate_threshold(mut self, percent: f64) -> Self {
        self.config.slow_call_rate_threshold = percent;
        self
    }

    /// A call that takes at least this long is slow. Allowed: `> 0`.
    /// Default [`DEFAULT_SLOW_CALL_DURATION`].
    pub fn slow_call_duration(mut self, d: Duration) -> Self {
        self.config.slow_call_duration = d;
        self
    }

    /// Rates over the last `n` calls. Allowed: `1..=`[`MAX_WINDOW_SIZE`].
    /// Default: count-based, [`DEFAULT_WINDOW_SIZE`].
    pub fn count_window(mut self, n: usize) -> Self {
        self.config.window = SlidingWindow::Count(n);
        self
    }

    /// Rates over the calls of the last `d`, a whole number of seconds in
    /// `1 s..=`[`MAX_TIME_WINDOW`].
    pub fn time_window(mut self, d: Duration) -> Self {
        self.config.window = SlidingWindow::Time(d);
        self
    }

    /// Calls the window must hold before rates are evaluated. Allowed: `≥ 1`,
    /// and at most the window size for a count window (a larger minimum
    /// could never be reached). Default [`DEFAULT_MINIMUM_CALLS`].
    pub fn minimum_calls(mut self, n: u32) -> Self {
        self.config.minimum_calls = n;
        self
    }

    /// Also open after `n` hard failures in a row, whatever the window says
    /// and however few calls it holds. Allowed: `≥ 1`. Off by default.
    pub fn consecutive_failures(mut self, n: u32) -> Self {
        self.config.consecutive_failures = Some(n);
        self
    }

    /// The first open wait, and the shortest. Allowed: `> 0` and `≤` the
    /// cap. Default [`DEFAULT_OPEN_WAIT`].
    pub fn open_wait(mut self, base: Duration) -> Self {
        self.config.open_wait = base;
        self
    }

    /// The longest open wait. Allowed: `≥` the base. Default
    /// [`DEFAULT_OPEN_WAIT_CAP`].
    pub fn open_wait_cap(mut self, cap: Duration) -> Self {
        self.config.open_wait_cap = cap;
        self
    }

    /// How the open wait is randomised. Default [`DEFAULT_JITTER`].
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.config.jitter = jitter;
        self
    }

    /// Probe calls admitted in the half-open state. Allowed:
    /// `1..=`[`MAX_HALF_OPEN_PROBES`]. Default [`DEFAULT_HALF_OPEN_PROBES`].
    pub fn half_open_probes(mut self, n: u32) -> Self {
        self.config.half_open_probes = n;
        self
    }

    /// Time an admitted probe may take; a probe still running after it
    /// counts as failed and reopens the breaker. Allowed: `> 0`. Default
    /// [`DEFAULT_HALF_OPEN_TIMEOUT`].
    pub fn half_open_timeout(mut self, d: Duration) -> Self {
        self.config.half_open_timeout = d;
        self
    }

    /// Seeds the jitter so that waits repeat exactly (tests, simulations).
    /// Default: a thread-local generator.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = Some(seed);
        self
    }

    /// Checks every value.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first field out of range.
    pub fn build(self) -> Result<CircuitBreakerConfig, ConfigError> {
        let c = self.config;
        check_percent("failure_rate_threshold", c.failure_rate_threshold)?;
        check_percent("slow_call_rate_threshold", c.slow_call_rate_threshold)?;
        check_positive("slow_call_duration", c.slow_call_duration)?;
        match c.window {
            SlidingWindow::Count(n) => {
                if !(1..=MAX_WINDOW_SIZE).contains(&n) {
                    return Err(ConfigError::new(
                        "count_window",
                        n,
                        "an integer from 1 to 1,000,000",
                    ));
                }
                if c.minimum_calls as usize > n {
                    return Err(ConfigError::new(
                        "minimum_calls",
                        c.minimum_calls,
                        "≥ 1 and at most the count window size",
                    ));
                }
            }
            SlidingWindow::Time(d) => {
                if d.subsec_nanos() != 0 || d.is_zero() || d > MAX_TIME_WINDOW {
                    return Err(ConfigError::new(
                        "time_window",
                        d,
                        "a whole number of seconds from 1 s to 3600 s",
                    ));
                }
            }
        }
        if c.minimum_calls == 0 {
            return Err(ConfigError::new("minimum_calls", 0, "an integer ≥ 1"));
        }
        if c.consecutive_failures == Some(0) {
            return Err(ConfigError::new(
                "consecutive_failures",
                0,
                "an integer ≥ 1",
            ));
        }
        check_positive("open_wait", c.open_wait)?;
        if c.open_wait_cap < c.open_wait || c.open_wait_cap > crate::time::MAX_DURATION {
            return Err(ConfigError::new(
                "open_wait_cap",
                c.open_wait_cap,
                "a duration ≥ open_wait and at most one year",
            ));
        }
        if !(1..=MAX_HALF_OPEN_PROBES).contains(&c.half_open_probes) {
            return Err(ConfigError::new(
                "half_open_probes",
                c.half_open_probes,
                "an integer from 1 to 10,000",
            ));
        }
        check_positive("half_open_timeout", c.half_open_timeout)?;
        Ok(c)
    }
}

fn check_percent(field: &'static str, p: f64) -> Result<(), ConfigError> {
    if p.is_finite() && p > 0.0 && p <= 100.0 {
        Ok(())
    } else {
        Err(ConfigError::new(field, p, "a percentage in (0, 100]"))
    }
}
