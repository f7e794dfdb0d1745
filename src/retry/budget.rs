//! The retry budget: retries may add at most a fixed share to the load.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
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

/// Most shards deposits are spread over (see [`Budget`]).
const MAX_SHARDS: usize = 16;

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
/// Deposits are spread over shards (the machine's parallelism rounded down
/// to a power of two, at most 16), one per thread in turn, each its own
/// lock on its own cache lines: threads depositing at once do not take
/// turns on one lock and hand its line between their cores on every
/// request, as they did with a single window. A deposit locks its thread's
/// shard, uncontended unless more threads than shards deposit at once; a
/// withdrawal (a retry, rare) locks every shard in order, so it sees every
/// deposit made before it and no other withdrawal can overdraw at the same
/// time: deposit and withdrawal stay exact under concurrency (a lock-free
/// design must either check-then-act, overdrawing under races, or pack
/// counters into one word).
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
    shards: Box<[Shard]>,
    epoch: Instant,
    bucket_ns: u64,
    deposit: i64,
    reserve: i64,
    ttl: Duration,
    min_per_sec: u32,
    ratio: f64,
}

/// One shard's window, alone on its cache lines.
#[derive(Debug)]
#[repr(align(128))]
struct Shard(Mutex<Window>);

impl Shard {
    fn lock(&self) -> MutexGuard<'_, Window> {
        // Nothing under the lock can panic, so a poisoned lock still holds
        // sound data.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Deposits and withdrawals per bucket of `ttl / BUCKETS`, the last
/// `BUCKETS` buckets.
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

impl Window {
    fn new(epoch: Instant, bucket_ns: u64) -> Self {
        Self {
            slots: [0; BUCKETS],
            head: 0,
            ends: crate::time::after(epoch, Duration::from_nanos(bucket_ns)),
        }
    }

    /// Moves the window to `now`, clearing the buckets that expired, and
    /// returns the current bucket's slot. Inline: until the bucket ends this
    /// is one comparison, cheaper than the call.
    #[inline]
    fn rotate(&mut self, now: Instant, epoch: Instant, bucket_ns: u64) -> usize {
        if now >= self.ends {
            self.advance(now, epoch, bucket_ns);
        }
        (self.head % BUCKETS as u64) as usize
    }

    /// Moves the head to the bucket of `now` (past the current one's end).
    #[cold]
    fn advance(&mut self, now: Instant, epoch: Instant, bucket_ns: u64) {
        // `now` is past the head bucket, so its index is above `head`
        // (checked all the same: `ends` saturates at the far future).
        let since = crate::time::nanos(now.saturating_duration_since(epoch));
        let idx = since / bucket_ns;
        if idx > self.head {
            let stale = (idx - self.head).min(BUCKETS as u64);
            for k in 0..stale {
                self.slots[((idx - k) % BUCKETS as u64) as usize] = 0;
            }
            self.head = idx;
        }
        let end_ns = self.head.saturating_add(1).saturating_mul(bucket_ns);
        self.ends = crate::time::after(epoch, Duration::from_nanos(end_ns));
    }

    fn sum(&self) -> i64 {
        self.slots.iter().fold(0, |a, &b| a.saturating_add(b))
    }
}

/// Numbers threads in the order they first deposit: thread `k` uses shard
/// `k mod shards`.
static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD: usize = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
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
        let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
        // A power of two, so that a thread finds its shard with a mask.
        let shards = 1 << parallelism.min(MAX_SHARDS).ilog2();
        Self {
            shards: (0..shards)
                .map(|_| Shard(Mutex::new(Window::new(epoch, bucket_ns))))
                .collect(),
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
        let shard = THREAD.with(|t| *t) & (self.shards.len() - 1);
        let mut w = self.shards[shard].lock();
        let slot = w.rotate(now, self.epoch, self.bucket_ns);
        w.slots[slot] = w.slots[slot].saturating_add(self.deposit);
    }

    /// Takes one retry from the budget; `false` (and nothing taken) if the
    /// budget holds less than one.
    pub fn withdraw(&self) -> bool {
        self.with_every_shard(|reserve, windows| {
            let balance = windows
                .iter()
                .flatten()
                .fold(reserve, |a, (w, _)| a.saturating_add(w.sum()));
            if balance < UNIT {
                return false;
            }
            // Any shard may hold the withdrawal: only the sum counts.
            if let Some((w, slot)) = windows[0].as_mut() {
                w.slots[*slot] -= UNIT;
            }
            true
        })
    }

    /// Retries the budget would allow right now (fractional).
    pub fn balance(&self) -> f64 {
        let units = self.with_every_shard(|reserve, windows| {
            windows
                .iter()
                .flatten()
                .fold(reserve, |a, (w, _)| a.saturating_add(w.sum()))
        });
        units as f64 / UNIT as f64
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

    /// Runs `f` with the reserve and every shard's window (the first
    /// `shards` entries), locked in order and moved to now, each with its
    /// current slot. On the stack: a withdrawal allocates nothing.
    fn with_every_shard<T>(
        &self,
        f: impl FnOnce(i64, &mut [Option<(MutexGuard<'_, Window>, usize)>]) -> T,
    ) -> T {
        let now = Instant::now();
        let mut locked: [Option<(MutexGuard<'_, Window>, usize)>; MAX_SHARDS] =
            std::array::from_fn(|i| {
                self.shards.get(i).map(|s| {
                    let mut w = s.lock();
                    let slot = w.rotate(now, self.epoch, self.bucket_ns);
                    (w, slot)
                })
            });
        f(self.reserve, &mut locked)
    }
}

#[cfg(test)]
mod tests;
