//! Adaptive per-endpoint concurrency: a limit on requests in flight learned
//! from latency, in the manner of Netflix's concurrency-limits (Gradient2)
//! and Envoy's adaptive concurrency filter.
//!
//! After each successful call of latency `L` on an endpoint whose unloaded
//! ("floor") latency is `F` (the model's, see
//! [`EndpointState::floor_latency`](super::EndpointState::floor_latency)):
//!
//! * `g = clamp(tolerance · F / L, 1/2, 1)`: 1 while latency stays within
//!   `tolerance` of the floor, smaller as queueing appears (at most halving
//!   per update, so one outlier cannot collapse the limit);
//! * `target = g · limit · (1 + growth)` (at least `limit + 1` when `g = 1`,
//!   so small limits grow too), and `limit += smoothing · (target − limit)`.
//!
//! So the limit grows by `growth` while latency stays near the floor, and
//! settles where `L ≈ tolerance · (1 + growth) · F`: a bounded queue instead
//! of one that grows with the offered load. The growth is relative, not
//! Gradient2's fixed queue allowance, so that many independent balancers,
//! each with a small share of an endpoint, settle at the same latency as
//! one balancer would. The limit does not move while fewer than half of it
//! are in flight (the caller, not the endpoint, limits the rate: the limit
//! does not bind, and latency noise on a lightly used endpoint would walk
//! it down), and a call that times out or is shed by the endpoint (HTTP
//! 429, gRPC `RESOURCE_EXHAUSTED`) cuts it by [`DROP_FACTOR`].
//!
//! An endpoint at its limit is skipped by every picker; when every endpoint
//! is, the call fails at once with [`Error::Overloaded`](crate::Error::Overloaded).
//! Limits stay within `min_limit..=max_limit`.
//!
//! The floor follows latency down at once and up only slowly (see
//! [`PeakEwma`](crate::pick::PeakEwma)), so `tolerance` must cover the
//! endpoint's natural spread: raise it for endpoints whose latency varies
//! widely without load.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ConfigError;

/// Default tolerance: latency up to 1.25× the floor counts as unqueued.
/// Envoy's adaptive concurrency adds a 25% buffer (`min_rtt_buffer`) to the
/// measured minimum for the same purpose.
pub const DEFAULT_TOLERANCE: f64 = 1.25;

/// Default relative growth per update: 10%.
pub const DEFAULT_GROWTH: f64 = 0.1;

/// Default smoothing: 0.2, Gradient2's (`smoothing`).
pub const DEFAULT_SMOOTHING: f64 = 0.2;

/// Default initial limit: 20, Gradient2's `initialLimit`.
pub const DEFAULT_INITIAL_LIMIT: usize = 20;

/// Default lowest limit: 1. A client-side balancer's share of an endpoint
/// may be a request or two; a server-side limiter's floor (Gradient2's 20)
/// would never shed.
pub const DEFAULT_MIN_LIMIT: usize = 1;

/// Default highest limit: 1000, Envoy's `max_concurrency_limit`.
pub const DEFAULT_MAX_LIMIT: usize = 1000;

/// Highest `max_limit` accepted: a million requests in flight per endpoint.
pub const MAX_LIMIT: usize = 1_000_000;

/// A call that timed out or was shed (HTTP 429) cuts the limit by this
/// factor: 0.9, concurrency-limits' AIMD `backoffRatio`.
pub const DROP_FACTOR: f64 = 0.9;

/// Adaptive per-endpoint concurrency limits
/// ([`Builder::adaptive_concurrency`](crate::balance::Builder::adaptive_concurrency));
/// off by default. Setters never fail; the build validates.
///
/// ```
/// use tower_lb::endpoint::AdaptiveConcurrency;
/// let limits = AdaptiveConcurrency::new().tolerance(1.5).max_limit(200);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveConcurrency {
    pub(crate) initial: usize,
    pub(crate) min: usize,
    pub(crate) max: usize,
    pub(crate) tolerance: f64,
    pub(crate) growth: f64,
    pub(crate) smoothing: f64,
}

impl Default for AdaptiveConcurrency {
    fn default() -> Self {
        Self {
            initial: DEFAULT_INITIAL_LIMIT,
            min: DEFAULT_MIN_LIMIT,
            max: DEFAULT_MAX_LIMIT,
            tolerance: DEFAULT_TOLERANCE,
            growth: DEFAULT_GROWTH,
            smoothing: DEFAULT_SMOOTHING,
        }
    }
}

impl AdaptiveConcurrency {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The limit of a new endpoint, in `min_limit..=max_limit` (default 20).
    pub fn initial_limit(mut self, n: usize) -> Self {
        self.initial = n;
        self
    }

    /// The lowest limit, `>= 1` (default 1).
    pub fn min_limit(mut self, n: usize) -> Self {
        self.min = n;
        self
    }

    /// The highest limit, in `min_limit..=1_000_000` (default 1000).
    pub fn max_limit(mut self, n: usize) -> Self {
        self.max = n;
        self
    }

    /// How far above the floor latency may go before the limit falls: a
    /// finite factor in `1..=100` (default 1.25).
    pub fn tolerance(mut self, factor: f64) -> Self {
        self.tolerance = factor;
        self
    }

    /// Relative growth per update while latency stays near the floor, in
    /// `0..=1` (default 0.1).
    pub fn growth(mut self, fraction: f64) -> Self {
        self.growth = fraction;
        self
    }

    /// How far each update moves the limit toward its target, in `(0, 1]`
    /// (default 0.2).
    pub fn smoothing(mut self, fraction: f64) -> Self {
        self.smoothing = fraction;
        self
    }

    /// Checks the settings; the balancer's build calls it.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the field (`adaptive_concurrency.min_limit`,
    /// `.max_limit`, `.initial_limit`, `.tolerance`, `.growth`, `.smoothing`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.min < 1 {
            return Err(ConfigError::new(
                "adaptive_concurrency.min_limit",
                self.min,
                "an integer >= 1",
            ));
        }
        if self.max < self.min || self.max > MAX_LIMIT {
            return Err(ConfigError::new(
                "adaptive_concurrency.max_limit",
                self.max,
                "an integer in min_limit..=1000000",
            ));
        }
        if !(self.min..=self.max).contains(&self.initial) {
            return Err(ConfigError::new(
                "adaptive_concurrency.initial_limit",
                self.initial,
                "an integer in min_limit..=max_limit",
            ));
        }
        if !(self.tolerance.is_finite() && (1.0..=100.0).contains(&self.tolerance)) {
            return Err(ConfigError::new(
                "adaptive_concurrency.tolerance",
                self.tolerance,
                "a finite number in 1..=100",
            ));
        }
        if !(0.0..=1.0).contains(&self.growth) {
            return Err(ConfigError::new(
                "adaptive_concurrency.growth",
                self.growth,
                "a number in 0..=1",
            ));
        }
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(ConfigError::new(
                "adaptive_concurrency.smoothing",
                self.smoothing,
                "a number in (0, 1]",
            ));
        }
        Ok(())
    }

    fn clamp(&self, limit: f64) -> f64 {
        limit.clamp(self.min as f64, self.max as f64)
    }
}

/// One endpoint's current limit (`f64` bits; +∞ while limits are off).
#[derive(Debug)]
pub(crate) struct Limit(AtomicU64);

impl Limit {
    pub(crate) fn new(cfg: Option<&AdaptiveConcurrency>) -> Self {
        let l = cfg.map_or(f64::INFINITY, |c| c.initial as f64);
        Self(AtomicU64::new(l.to_bits()))
    }

    #[inline(always)]
    pub(crate) fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    fn set(&self, l: f64) {
        self.0.store(l.to_bits(), Ordering::Relaxed);
    }

    /// One successful call: `latency_ns` with `concurrency` in flight at
    /// dispatch (itself included), against `floor_ns`. A load and a store,
    /// as the parallelism estimate does: a sample lost to a racing update
    /// costs a heuristic nothing.
    pub(crate) fn observe(
        &self,
        cfg: &AdaptiveConcurrency,
        latency_ns: f64,
        floor_ns: f64,
        concurrency: usize,
    ) {
        if !(floor_ns.is_finite() && floor_ns > 0.0 && latency_ns > 0.0) {
            return;
        }
        let limit = self.get();
        if (concurrency as f64) < limit / 2.0 {
            // The caller, not the endpoint, limits the rate: the sample
            // says nothing about where the limit binds (Netflix's Vegas
            // limit skips these too). Without this, latency jitter on a
            // lightly used endpoint walks its limit down to the minimum,
            // and the next burst is refused while it grows back.
            return;
        }
        let g = (cfg.tolerance * floor_ns / latency_ns).clamp(0.5, 1.0);
        let target = if g >= 1.0 {
            (limit * (1.0 + cfg.growth)).max(limit + 1.0)
        } else {
            limit * g * (1.0 + cfg.growth)
        };
        self.set(cfg.clamp(limit + cfg.smoothing * (target - limit)));
    }

    /// A call timed out or was shed: cut the limit.
    pub(crate) fn dropped(&self, cfg: &AdaptiveConcurrency) {
        self.set(cfg.clamp(self.get() * DROP_FACTOR));
    }
}

#[cfg(test)]
mod tests;
