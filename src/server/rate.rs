//! Answers and failures per second over the last second, lock-free: ten
//! buckets of 100 ms, each a count stamped with its bucket number.

use std::sync::atomic::{AtomicU64, Ordering};

/// Width of one bucket, in ns.
const BUCKET_NS: u64 = 100_000_000;
/// Buckets in the window: one second.
const BUCKETS: usize = 10;

/// Counts in the last second.
pub(crate) struct Window {
    /// High 32 bits: bucket number; low 32 bits: count.
    buckets: [AtomicU64; BUCKETS],
}

fn pack(tick: u64, count: u64) -> u64 {
    (tick << 32) | (count & 0xFFFF_FFFF)
}

impl Window {
    pub(crate) fn new() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(pack(u64::from(u32::MAX), 0))),
        }
    }

    fn tick(now_ns: u64) -> u64 {
        (now_ns / BUCKET_NS) & 0xFFFF_FFFF
    }

    /// One event at `now_ns`.
    pub(crate) fn record(&self, now_ns: u64) {
        let tick = Self::tick(now_ns);
        let b = &self.buckets[tick as usize % BUCKETS];
        let mut cur = b.load(Ordering::Relaxed);
        loop {
            let next = if cur >> 32 == tick {
                pack(tick, (cur & 0xFFFF_FFFF).saturating_add(1).min(0xFFFF_FFFF))
            } else {
                // A bucket from a second ago: start it again.
                pack(tick, 1)
            };
            match b.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Events per second over the second before `now_ns`.
    pub(crate) fn per_second(&self, now_ns: u64) -> f64 {
        let now = Self::tick(now_ns);
        let sum: u64 = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .filter(|&v| now.wrapping_sub(v >> 32) & 0xFFFF_FFFF < BUCKETS as u64)
            .map(|v| v & 0xFFFF_FFFF)
            .sum();
        sum as f64 * 1e9 / (BUCKET_NS * BUCKETS as u64) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_last_second_only() {
        let w = Window::new();
        assert_eq!(w.per_second(0), 0.0);
        for i in 0..50 {
            w.record(i * 10_000_000);
        }
        assert_eq!(w.per_second(499_000_000), 50.0);
        // At 1 s the first 100 ms have left the window.
        assert_eq!(w.per_second(1_000_000_000), 40.0);
        // A second after the last, they have all left.
        assert_eq!(w.per_second(1_600_000_000), 0.0);
        w.record(2_000_000_000);
        assert_eq!(w.per_second(2_000_000_000), 1.0);
    }
}
