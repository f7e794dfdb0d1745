//! The retry budget: retries may add at most a fixed share to the load.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ConfigError;

/// Default time a deposit stays in the budget: 10 s (Finagle's `RetryBudget`
/// and linkerd's default).
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// Default floor: 10 retries per second are allowed whatever the traffic
/// (Finagle, linkerd), so a quiet client can still retry a lone failure.
pub const DEFAULT_MIN_PER_SEC: u32 = 10;

/// Default ratio of retries to requests: 20% (Finagle, linkerd). Retries add
/// at most a fifth to the load of a backend that is already failing.
pub const DEFAULT_RATIO: f64 = 0.2;

/// Buckets the ttl is cut into; a deposit expires between 0.9·ttl and ttl
/// after it was made. Ten is tower's and Finagle's choice.
const BUCKETS: usize = 10;

/// One retry, in budget units. A deposit is `round(ratio · UNIT)` units, so
/// any ratio with six decimals is kept exactly and others to 1 ppm. (tower's
/// `TpsBudget` withdraws `trunc(1 / ratio)` whole tokens per retry: a ratio of
/// 0.6 becomes 1/1 and lets every request retry — tower issue #857.)
const UNIT: i64 = 1_000_000;

/// A retry budget with Finagle/linkerd semantics: every request deposits
/// `ratio` of a retry, every retry (and every hedge) withdraws one; deposits
/// and withdrawals expire after `ttl`, and `min_per_sec · ttl` retries are
/// allowed on top of the deposits in any `ttl` window.
///
/// So over any window of `ttl`, retries ≤ `ratio` · requests +
/// `min_per_sec` · `ttl`: a backend that fails everything sees at most
/// `1 + ratio` times its normal load (plus the floor), never a retry storm.
///
/// Shared by every clone of a [`RetryLayer`](super::RetryLayer)'s services.
/// Cost: one uncontended `Mutex` lock per request and per retry; the
/// critical section is a handful of integer additions, so deposit and
/// withdrawal are exact under concurrency (a lock-free design must either
/// check-then-act, overdrawing under races, or pack counters into one word).
///
/// ```
/// use std::time::Duration;
/// use tower_lb::retry::Budget;
///
/// # fn main() -> Result<(), tower_lb::ConfigError> {
/// let budget = Budget::new(Duration::from_secs(10), 0, 0.6)?;
/// for _ in 0..100 { budget.deposit(); }
/// let retries = (0..100).filter(|_| budget.withdraw()).count();
/// assert_eq!(retries, 60);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Budget {
    window: Mutex<Window>,
    epoch: Instant,
    bucket_ns: u64,
    deposit: i64,
    reserve: i64,
    ttl: Duration,
    min_per_sec: u32,
    ratio: f64,
}

#[derive(Debug)]
struct Window {
    slots: [i64; BUCKETS],
    /// Absolute index (since `epoch`) of the current bucket.
    head: u64,
    /// When the current bucket ends: `epoch + (head + 1) · bucket`. Until
    /// then a deposit compares two instants; only the first one after it
    /// converts its reading and divides to find the new bucket (a 64-bit
    /// division and a conversion were a third of each deposit).
    ends: Instant,
}

impl Default for Budget {
    /// [`DEFAULT_TTL`], [`DEFAULT_MIN_PER_SEC`], [`DEFAULT_RATIO`].
    fn default() -> Self {
        Self::build(DEFAULT_TTL, DEFAULT_MIN_PER_SEC, DEFAULT_RATIO)
    }
}

impl Budget {
    /// A budget keeping deposits for `ttl`, allowing `min_per_sec` retries
    /// per second regardless of traffic, and `ratio` retries per request
    /// (0.2 = 20%).
    ///
    /// # Errors
    /// `budget.ttl` must be within 1 s ..= 60 s; `budget.ratio` a finite
    /// number within 0 ..= 1000; `budget.min_per_sec` at most 1,000,000.
    pub fn new(ttl: Duration, min_per_sec: u32, ratio: f64) -> Result<Self, ConfigError> {
        if !(Duration::from_secs(1)..=Duration::from_secs(60)).contains(&ttl) {
            return Err(ConfigError::new(
                "budget.ttl",
                ttl,
                "a duration within 1 s ..= 60 s",
            ));
        }
        if min_per_sec > 1_000_000 {
            return Err(ConfigError::new(
                "budget.min_per_sec",
                min_per_sec,
                "at most 1000000 retries per second",
            ));
        }
        if !(ratio.is_finite() && (0.0..=1000.0).contains(&ratio)) {
            return Err(ConfigError::new(
                "budget.ratio",
                ratio,
                "a finite number within 0 ..= 1000",
            ));
        }
        Ok(Self::build(ttl, min_per_sec, ratio))
    }

    fn build(ttl: Duration, min_per_sec: u32, ratio: f64) -> Self {
        let reserve = (f64::from(min_per_sec) * ttl.as_secs_f64() * UNIT as f64).round() as i64;
        let epoch = Instant::now();
        let bucket_ns = (ttl.as_nanos() / BUCKETS as u128).max(1) as u64;
        Self {
            window: Mutex::new(Window {
                slots: [0; BUCKETS],
                head: 0,
                ends: crate::time::after(epoch, Duration::from_nanos(bucket_ns)),
            }),
            epoch,
            bucket_ns,
            deposit: (ratio * UNIT as f64).round() as i64,
            reserve,
            ttl,
            min_per_sec,
            ratio,
        }
    }

    /// Records a request: adds `ratio` of a retry to the budget.
    pub fn deposit(&self) {
        self.deposit_at(Instant::now());
    }

    /// [`deposit`](Self::deposit) at `now` (the retry layer's reading).
    pub(crate) fn deposit_at(&self, now: Instant) {
        let deposit = self.deposit;
        self.with_window_at(now, |w, slot| {
            w.slots[slot] = w.slots[slot].saturating_add(deposit)
        });
    }

    /// Takes one retry from the budget; `false` (and nothing taken) if the
    /// budget holds less than one.
    pub fn withdraw(&self) -> bool {
        let reserve = self.reserve;
        self.with_window(|w, slot| {
            let balance = w.slots.iter().fold(reserve, |a, &b| a.saturating_add(b));
            if balance >= UNIT {
                w.slots[slot] -= UNIT;
                true
            } else {
                false
            }
        })
    }

    /// Retries the budget would allow right now (fractional).
    pub fn balance(&self) -> f64 {
        let reserve = self.reserve;
        self.with_window(|w, _| w.slots.iter().fold(reserve, |a, &b| a.saturating_add(b))) as f64
            / UNIT as f64
    }

    /// The configured time a deposit stays.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The configured floor, in retries per second.
    pub fn min_per_sec(&self) -> u32 {
        self.min_per_sec
    }

    /// The configured ratio of retries to requests.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// Runs `f` on the window, rotated to now, and the current slot.
    fn with_window<T>(&self, f: impl FnOnce(&mut Window, usize) -> T) -> T {
        self.with_window_at(Instant::now(), f)
    }

    /// [`with_window`](Self::with_window) at `now`.
    fn with_window_at<T>(&self, now: Instant, f: impl FnOnce(&mut Window, usize) -> T) -> T {
        // Nothing here can panic, so a poisoned lock still holds sound data.
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        if now >= w.ends {
            // `now` is past the head bucket, so its index is above `head`
            // (checked all the same: `ends` saturates at the far future).
            let since = crate::time::nanos(now.saturating_duration_since(self.epoch));
            let idx = since / self.bucket_ns;
            if idx > w.head {
                let stale = (idx - w.head).min(BUCKETS as u64);
                for k in 0..stale {
                    w.slots[((idx - k) % BUCKETS as u64) as usize] = 0;
                }
                w.head = idx;
            }
            let end_ns = w.head.saturating_add(1).saturating_mul(self.bucket_ns);
            w.ends = crate::time::after(self.epoch, Duration::from_nanos(end_ns));
        }
        let slot = (w.head % BUCKETS as u64) as usize;
        f(&mut w, slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_for_every_ratio() {
        for (ratio, want) in [(0.6, 600), (0.2, 200), (0.5, 500), (1.0, 1000), (0.0, 0)] {
            let b = Budget::new(Duration::from_secs(10), 0, ratio).unwrap();
            for _ in 0..1000 {
                b.deposit();
            }
            let got = (0..2000).filter(|_| b.withdraw()).count();
            assert_eq!(got, want, "ratio {ratio}");
        }
        // A third: 333.333 retries per 1000 requests, never 500 or 1000.
        let b = Budget::new(Duration::from_secs(10), 0, 1.0 / 3.0).unwrap();
        for _ in 0..3000 {
            b.deposit();
        }
        assert_eq!((0..3000).filter(|_| b.withdraw()).count(), 999);
    }

    #[test]
    fn floor_allows_min_per_sec_times_ttl() {
        let b = Budget::new(Duration::from_secs(10), 10, 0.2).unwrap();
        assert_eq!((0..1000).filter(|_| b.withdraw()).count(), 100);
        assert_eq!(b.balance(), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn deposits_and_withdrawals_expire_after_ttl() {
        let b = Budget::new(Duration::from_secs(10), 0, 1.0).unwrap();
        for _ in 0..10 {
            b.deposit();
        }
        assert_eq!(b.balance(), 10.0);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(b.withdraw());
        assert_eq!(b.balance(), 9.0);
        // The deposits (bucket 0) expire at 10 s; the withdrawal (bucket 5)
        // stays until 15 s.
        tokio::time::advance(Duration::from_millis(5001)).await;
        assert_eq!(b.balance(), -1.0);
        assert!(!b.withdraw());
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(b.balance(), 0.0);
        // A long idle gap clears everything.
        b.deposit();
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(b.balance(), 0.0);
    }

    /// The window as it was kept before `ends`: every operation converts
    /// its reading and divides to find its bucket.
    struct Reference {
        slots: [i64; BUCKETS],
        head: u64,
    }

    impl Reference {
        fn at(&mut self, b: &Budget, now: Instant) -> usize {
            let since = crate::time::nanos(now.saturating_duration_since(b.epoch));
            let idx = since / b.bucket_ns;
            if idx > self.head {
                for k in 0..(idx - self.head).min(BUCKETS as u64) {
                    self.slots[((idx - k) % BUCKETS as u64) as usize] = 0;
                }
                self.head = idx;
            }
            (self.head % BUCKETS as u64) as usize
        }
    }

    proptest::proptest! {
        /// Rotating on `ends` keeps exactly the deposits and withdrawals
        /// the division did, at bucket edges (0, 1 ns either side of a
        /// multiple of the bucket) and across long gaps.
        #[test]
        fn rotating_at_the_bucket_end_matches_dividing(
            steps in proptest::collection::vec((0u8..6, 0u64..3_000_000_000, proptest::bool::ANY), 1..200),
        ) {
            let b = Budget::new(Duration::from_secs(10), 0, 0.5).unwrap();
            let mut r = Reference { slots: [0; BUCKETS], head: 0 };
            let mut t = 0u64;
            for (kind, ns, deposit) in steps {
                let bucket = b.bucket_ns;
                t = match kind {
                    0 => t,
                    1 => (t / bucket + 1) * bucket,
                    2 => (t / bucket + 1) * bucket - 1,
                    3 => (t / bucket + 1) * bucket + 1,
                    4 => t + 50 * bucket + ns,
                    _ => t + ns,
                };
                let now = b.epoch + Duration::from_nanos(t);
                let slot = r.at(&b, now);
                let unit = if deposit { b.deposit } else { -UNIT };
                r.slots[slot] += unit;
                b.with_window_at(now, |w, slot| w.slots[slot] += unit);
                let want: i64 = r.slots.iter().sum();
                let got = b.with_window_at(now, |w, _| w.slots.iter().sum::<i64>());
                proptest::prop_assert_eq!(got, want, "at {} ns", t);
            }
        }
    }

    #[test]
    fn config_errors() {
        let ttl = Duration::from_secs(10);
        for (r, field) in [
            (
                Budget::new(Duration::from_millis(999), 1, 0.2),
                "budget.ttl",
            ),
            (Budget::new(Duration::from_secs(61), 1, 0.2), "budget.ttl"),
            (Budget::new(ttl, 1_000_001, 0.2), "budget.min_per_sec"),
            (Budget::new(ttl, 1, -0.1), "budget.ratio"),
            (Budget::new(ttl, 1, 1000.1), "budget.ratio"),
            (Budget::new(ttl, 1, f64::NAN), "budget.ratio"),
        ] {
            assert_eq!(r.unwrap_err().field(), field);
        }
        assert!(Budget::new(Duration::from_secs(60), 1_000_000, 1000.0).is_ok());
    }
}
