//! Latency by requests in flight: Prequal's server-side estimator.
//!
//! Each request's latency is filed under the number of requests in flight
//! when it arrived (itself included): its *level*. The estimate for a level
//! is the median of the most recent [`SLOTS`] latencies filed there, so it
//! follows the server's current speed within a few requests, and a burst of
//! slow requests at one level does not move the others. Lock-free: a
//! request writes one slot of its level (a relaxed store after a
//! `fetch_add` on the level's cursor), and a reader copies at most
//! [`SLOTS`] numbers.

use std::sync::atomic::{AtomicU32, Ordering};

/// Latencies kept per level: the median of 16 recent values moves with the
/// server within a few requests and ignores a single outlier.
pub const SLOTS: usize = 16;

/// Levels kept: requests in flight beyond this share the last level.
pub const LEVELS: usize = 64;

/// A slot never written.
const EMPTY: u32 = u32::MAX;

/// One level's recent latencies, in microseconds.
struct Level {
    slots: [AtomicU32; SLOTS],
    next: AtomicU32,
}

impl Level {
    fn new() -> Self {
        Self {
            slots: std::array::from_fn(|_| AtomicU32::new(EMPTY)),
            next: AtomicU32::new(0),
        }
    }

    fn record(&self, micros: u32) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) as usize % SLOTS;
        self.slots[i].store(micros.min(EMPTY - 1), Ordering::Relaxed);
    }

    /// The median of the latencies kept, if any.
    fn median(&self) -> Option<u32> {
        let mut v = [0u32; SLOTS];
        let mut n = 0;
        for s in &self.slots {
            let x = s.load(Ordering::Relaxed);
            if x != EMPTY {
                v[n] = x;
                n += 1;
            }
        }
        if n == 0 {
            return None;
        }
        let v = &mut v[..n];
        v.sort_unstable();
        // The lower median: an even count favours the faster half, as a
        // level's first samples are often its fastest.
        Some(v[(n - 1) / 2])
    }
}

/// Latency by level.
pub(crate) struct Levels {
    levels: Box<[Level]>,
}

impl Levels {
    pub(crate) fn new() -> Self {
        Self {
            levels: (0..LEVELS).map(|_| Level::new()).collect(),
        }
    }

    /// The slot of `level` (1 is a request that found the server idle).
    fn index(level: usize) -> usize {
        level.clamp(1, LEVELS) - 1
    }

    /// Files a latency of `micros` under `level`.
    pub(crate) fn record(&self, level: usize, micros: u32) {
        self.levels[Self::index(level)].record(micros);
    }

    /// The median latency at `level`, in microseconds; when that level has
    /// none yet, the nearest level below that has (a lower bound: less
    /// load), else the nearest above; `None` before any request.
    pub(crate) fn estimate(&self, level: usize) -> Option<u32> {
        let at = Self::index(level);
        (0..=at)
            .rev()
            .chain(at + 1..LEVELS)
            .find_map(|i| self.levels[i].median())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_the_recent_values_at_each_level() {
        let l = Levels::new();
        assert_eq!(l.estimate(1), None);
        for us in [10, 30, 20] {
            l.record(1, us);
        }
        assert_eq!(l.estimate(1), Some(20));
        // Level 3 has nothing: level 1 stands in (a lower bound).
        assert_eq!(l.estimate(3), Some(20));
        for us in [100, 300, 200, 400] {
            l.record(3, us);
        }
        // Four values: the lower median.
        assert_eq!(l.estimate(3), Some(200));
        // Level 2 falls back down to level 1, not up to 3.
        assert_eq!(l.estimate(2), Some(20));
        // Past the last level, the last level.
        l.record(1000, 7);
        assert_eq!(l.estimate(LEVELS + 5), Some(7));
    }

    #[test]
    fn old_values_leave_as_new_ones_come() {
        let l = Levels::new();
        for _ in 0..SLOTS {
            l.record(2, 1_000);
        }
        for _ in 0..SLOTS / 2 + 1 {
            l.record(2, 10);
        }
        assert_eq!(l.estimate(2), Some(10));
    }

    #[test]
    fn only_levels_above_answer_when_none_below_has_values() {
        let l = Levels::new();
        l.record(5, 50);
        assert_eq!(l.estimate(2), Some(50));
        // Level 0 is level 1.
        assert_eq!(l.estimate(0), Some(50));
    }
}
