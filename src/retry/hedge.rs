//! Hedging: extra attempts when the first is slower than usual.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::{ConfigError, check_positive};
use crate::time::nanos;

/// Default hedge percentile: p95. Hedging at p95 sends about 5% extra
/// requests and cuts the tail above it (Dean & Barroso, "The Tail at Scale").
pub const DEFAULT_HEDGE_PERCENTILE: f64 = 0.95;

/// Default hedges per request: 1. One extra attempt cuts the tail; more
/// multiply load exactly when a backend is slow (A6 allows up to
/// `max_attempts`; set [`Hedge::hedges`] for that).
pub const DEFAULT_HEDGES: u32 = 1;

/// Default lower bound of a percentile-derived hedge delay: 1 ms, so a burst
/// of very fast answers cannot turn hedging into "always send two".
pub const DEFAULT_HEDGE_MIN_DELAY: Duration = Duration::from_millis(1);

/// Default upper bound of a percentile-derived delay, also used until enough
/// samples exist: 1 s.
pub const DEFAULT_HEDGE_MAX_DELAY: Duration = Duration::from_secs(1);

/// Default samples needed before the percentile is trusted: 20 (a p95 of
/// fewer than 20 samples is just the maximum).
pub const DEFAULT_HEDGE_MIN_SAMPLES: usize = 20;

/// Latency samples kept: the last 1,024 attempts that answered well or were
/// cut short. The p95 of 1,024 samples moves by about ±0.7 percentage points
/// of probability from one window to the next (128 moved ±2 points: ±20%
/// of the delay on a long tail, `tests/allocs/retry.rs`
/// `percentile_hedge_delay_stays_at_the_true_p95`). A ring of atomics is
/// lock-free to write and recent by construction; an `hdrhistogram` would need a lock and rotating windows to
/// forget old latency, and could not hold cut-short (censored) samples.
pub const HEDGE_WINDOW: usize = 1024;

/// The percentile is recomputed every this many samples (a sort of the
/// window, about 10 µs for 1,024), not per request: well under 1 µs per
/// request amortised.
const REFRESH: u64 = 64;

/// When to send the hedge, for [`Builder::hedge`](super::Builder::hedge).
///
/// ```
/// use std::time::Duration;
/// use tower_lb::retry::Hedge;
///
/// let fixed = Hedge::fixed(Duration::from_millis(50));
/// let p99 = Hedge::percentile(0.99).min_delay(Duration::from_millis(5));
/// # let _ = (fixed, p99);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hedge {
    pub(crate) delay: Delay,
    pub(crate) hedges: u32,
    pub(crate) min_delay: Duration,
    pub(crate) max_delay: Duration,
    pub(crate) min_samples: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Delay {
    Fixed(Duration),
    Percentile(f64),
}

impl Hedge {
    /// Hedge after a fixed `delay`.
    pub fn fixed(delay: Duration) -> Self {
        Self {
            delay: Delay::Fixed(delay),
            hedges: DEFAULT_HEDGES,
            min_delay: DEFAULT_HEDGE_MIN_DELAY,
            max_delay: DEFAULT_HEDGE_MAX_DELAY,
            min_samples: DEFAULT_HEDGE_MIN_SAMPLES,
        }
    }

    /// Hedge after the `p`-quantile (0.95 = p95) of the latency of the last
    /// [`HEDGE_WINDOW`] attempts, clamped to `min_delay ..= max_delay`;
    /// `max_delay` until `min_samples` samples exist.
    ///
    /// Every attempt counts, not only the ones that won: an attempt that
    /// answered well gives its latency; one that was cancelled (it lost to
    /// its hedge, or its per-try timeout or the deadline cut it) gives the
    /// time it ran as a lower bound. The quantile is the Kaplan–Meier
    /// estimate over both, so the delay does not drift down under load, as
    /// it would if only the fastest attempts of each race were kept.
    pub fn percentile(p: f64) -> Self {
        Self {
            delay: Delay::Percentile(p),
            ..Self::fixed(Duration::ZERO)
        }
    }

    /// Hedges per request at most (default [`DEFAULT_HEDGES`]; within
    /// `1 ..= MAX_ATTEMPTS - 1`, and the layer's `max_attempts` counts them
    /// too). With more than one, gRPC A6's hedging: one more attempt every
    /// delay while none has answered well, and at once when one fails with
    /// a retryable (A6: non-fatal) result; a result that stands (A6: fatal)
    /// ends the request and cancels the rest.
    pub fn hedges(mut self, n: u32) -> Self {
        self.hedges = n;
        self
    }

    /// Lower bound of a percentile-derived delay (default [`DEFAULT_HEDGE_MIN_DELAY`]).
    pub fn min_delay(mut self, d: Duration) -> Self {
        self.min_delay = d;
        self
    }

    /// Upper bound of a percentile-derived delay, and the delay until enough
    /// samples exist (default [`DEFAULT_HEDGE_MAX_DELAY`]).
    pub fn max_delay(mut self, d: Duration) -> Self {
        self.max_delay = d;
        self
    }

    /// Samples needed before the percentile is used (default
    /// [`DEFAULT_HEDGE_MIN_SAMPLES`]).
    pub fn min_samples(mut self, n: usize) -> Self {
        self.min_samples = n;
        self
    }

    pub(crate) fn validate(self) -> Result<Self, ConfigError> {
        match self.delay {
            Delay::Fixed(d) => {
                check_positive("hedge.delay", d)?;
            }
            Delay::Percentile(p) => {
                if !(p.is_finite() && p > 0.0 && p <= 1.0) {
                    return Err(ConfigError::new(
                        "hedge.percentile",
                        p,
                        "a number within 0 < p ≤ 1",
                    ));
                }
            }
        }
        if !(1..super::MAX_ATTEMPTS).contains(&self.hedges) {
            return Err(ConfigError::new(
                "hedge.hedges",
                self.hedges,
                "within 1 ..= 9 (attempts are at most 10)",
            ));
        }
        check_positive("hedge.min_delay", self.min_delay)?;
        check_positive("hedge.max_delay", self.max_delay)?;
        if self.max_delay < self.min_delay {
            return Err(ConfigError::new(
                "hedge.max_delay",
                self.max_delay,
                "a duration ≥ hedge.min_delay",
            ));
        }
        if !(1..=HEDGE_WINDOW).contains(&self.min_samples) {
            return Err(ConfigError::new(
                "hedge.min_samples",
                self.min_samples,
                "within 1 ..= 1024 (the window size)",
            ));
        }
        Ok(self)
    }
}

/// Recent attempt latencies and the hedge delay derived from them.
#[derive(Debug)]
pub(crate) struct Hedger {
    config: Hedge,
    /// `latency_ns << 1 | censored`: the low bit marks a lower bound.
    samples: Box<[AtomicU64]>,
    written: AtomicU64,
    /// The current delay in ns; recomputed every [`REFRESH`] samples.
    delay_ns: AtomicU64,
}

impl Hedger {
    pub(crate) fn new(config: Hedge) -> Self {
        let initial = match config.delay {
            Delay::Fixed(d) => d,
            Delay::Percentile(_) => config.max_delay,
        };
        Self {
            config,
            samples: (0..HEDGE_WINDOW).map(|_| AtomicU64::new(0)).collect(),
            written: AtomicU64::new(0),
            delay_ns: AtomicU64::new(nanos(initial)),
        }
    }

    /// Hedges per request at most.
    #[inline]
    pub(crate) fn max_hedges(&self) -> u32 {
        self.config.hedges
    }

    /// The delay after which to send a hedge.
    #[inline]
    pub(crate) fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay_ns.load(Ordering::Relaxed))
    }

    /// Records the latency of an attempt that answered well.
    #[inline]
    pub(crate) fn record(&self, latency: Duration) {
        self.push(latency, false);
    }

    /// Records that a cancelled attempt ran for `elapsed` without an answer:
    /// its latency is at least that.
    #[inline]
    pub(crate) fn record_lower_bound(&self, elapsed: Duration) {
        self.push(elapsed, true);
    }

    fn push(&self, latency: Duration, censored: bool) {
        let Delay::Percentile(p) = self.config.delay else {
            return;
        };
        let i = self.written.fetch_add(1, Ordering::Relaxed);
        let v = (nanos(latency).min(u64::MAX >> 1) << 1) | u64::from(censored);
        self.samples[(i % HEDGE_WINDOW as u64) as usize].store(v, Ordering::Relaxed);
        let n = i + 1;
        if n >= self.config.min_samples as u64
            && (n.is_multiple_of(REFRESH) || n == self.config.min_samples as u64)
        {
            self.refresh(p, n.min(HEDGE_WINDOW as u64) as usize);
        }
    }

    fn refresh(&self, p: f64, n: usize) {
        let mut buf = [0u64; HEDGE_WINDOW];
        for (b, s) in buf.iter_mut().zip(self.samples.iter()).take(n) {
            *b = s.load(Ordering::Relaxed);
        }
        let q = km_quantile(&mut buf[..n], p);
        let min = nanos(self.config.min_delay);
        let max = nanos(self.config.max_delay);
        self.delay_ns.store(q.clamp(min, max), Ordering::Relaxed);
    }
}

/// The `p`-quantile of samples encoded as `ns << 1 | censored`, by the
/// Kaplan–Meier estimator: the smallest observed latency at which the
/// estimated share of attempts answered reaches `p`. Censored samples
/// (lower bounds) leave the risk set without counting as answers. When the
/// answers never reach `p` (most attempts were cut), the largest sample is
/// the best lower bound there is.
fn km_quantile(samples: &mut [u64], p: f64) -> u64 {
    // At equal times an answer sorts before a lower bound (its low bit is 0).
    samples.sort_unstable();
    let mut at_risk = samples.len() as f64;
    let mut survive = 1.0;
    for &v in samples.iter() {
        if v & 1 == 0 {
            survive *= 1.0 - 1.0 / at_risk;
            if 1.0 - survive >= p - 1e-12 {
                return v >> 1;
            }
        }
        at_risk -= 1.0;
    }
    samples.last().map_or(0, |&v| v >> 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_of_recent_samples() {
        let h = Hedger::new(Hedge::percentile(0.9).validate().unwrap());
        assert_eq!(h.delay(), DEFAULT_HEDGE_MAX_DELAY, "too few samples");
        for ms in 1..=20 {
            h.record(Duration::from_millis(ms));
        }
        assert_eq!(h.delay(), Duration::from_millis(18));
        // The window forgets: a window of 5 ms samples replaces the old ones.
        for _ in 0..HEDGE_WINDOW {
            h.record(Duration::from_millis(5));
        }
        assert_eq!(h.delay(), Duration::from_millis(5));
        // Clamped to the bounds.
        for _ in 0..HEDGE_WINDOW {
            h.record(Duration::from_secs(9));
        }
        assert_eq!(h.delay(), DEFAULT_HEDGE_MAX_DELAY);
    }

    #[test]
    fn lower_bounds_keep_the_quantile_from_drifting_down() {
        // Latencies 1..=100 ms; every attempt above 50 ms is cut at 50 ms
        // (it lost a race). Dropping the cut ones would give a p90 of 45 ms;
        // as lower bounds they keep 90% of attempts below the estimate.
        let h = Hedger::new(Hedge::percentile(0.9).validate().unwrap());
        for ms in 1..=100u64 {
            if ms <= 50 {
                h.record(Duration::from_millis(ms));
            } else {
                h.record_lower_bound(Duration::from_millis(50));
            }
        }
        // Only half the answers are seen, so p90 is past the last answer:
        // the largest lower bound, 50 ms, not 45 ms.
        assert_eq!(h.delay(), Duration::from_millis(50));
        let mut s: Vec<u64> = (1..=10u64).map(|ms| ms << 1).collect();
        s.extend([(4u64 << 1) | 1, (4 << 1) | 1]);
        // 12 samples, two cut at 4: the answers above 4 carry their weight.
        assert_eq!(km_quantile(&mut s, 0.5), 6);
    }

    #[test]
    fn fixed_delay_ignores_samples() {
        let h = Hedger::new(Hedge::fixed(Duration::from_millis(7)));
        for _ in 0..100 {
            h.record(Duration::from_secs(1));
        }
        assert_eq!(h.delay(), Duration::from_millis(7));
    }

    #[test]
    fn config_errors() {
        let ms = Duration::from_millis;
        for (h, field) in [
            (Hedge::fixed(Duration::ZERO), "hedge.delay"),
            (Hedge::percentile(0.0), "hedge.percentile"),
            (Hedge::percentile(1.5), "hedge.percentile"),
            (Hedge::percentile(f64::NAN), "hedge.percentile"),
            (
                Hedge::percentile(0.9).min_delay(Duration::ZERO),
                "hedge.min_delay",
            ),
            (
                Hedge::percentile(0.9).min_delay(ms(5)).max_delay(ms(4)),
                "hedge.max_delay",
            ),
            (Hedge::percentile(0.9).min_samples(0), "hedge.min_samples"),
            (Hedge::fixed(Duration::MAX), "hedge.delay"),
            (
                Hedge::percentile(0.9).max_delay(Duration::MAX),
                "hedge.max_delay",
            ),
            (
                Hedge::percentile(0.9).min_samples(HEDGE_WINDOW + 1),
                "hedge.min_samples",
            ),
        ] {
            assert_eq!(h.validate().unwrap_err().field(), field);
        }
    }
}
