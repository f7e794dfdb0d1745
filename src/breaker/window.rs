//! Sliding windows of call outcomes: the last N calls, or the last T seconds
//! in one-second buckets. Both keep running totals, so recording is O(1)
//! (amortised, for the time window) and reading the totals is free.

use super::config::SlidingWindow;

/// Flag of a failed call.
pub(crate) const FAILED: u8 = 1;
/// Flag of a slow call.
pub(crate) const SLOW: u8 = 2;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Calls, failed calls and slow calls (a call may be both failed and slow).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) calls: u64,
    pub(crate) failed: u64,
    pub(crate) slow: u64,
}

impl Totals {
    fn add(&mut self, flags: u8) {
        self.calls += 1;
        self.failed += u64::from(flags & FAILED != 0);
        self.slow += u64::from(flags & SLOW != 0);
    }

    fn sub(&mut self, other: &Totals) {
        self.calls -= other.calls;
        self.failed -= other.failed;
        self.slow -= other.slow;
    }

    fn sub_flags(&mut self, flags: u8) {
        self.calls -= 1;
        self.failed -= u64::from(flags & FAILED != 0);
        self.slow -= u64::from(flags & SLOW != 0);
    }
}

#[derive(Debug)]
pub(crate) enum Window {
    Count {
        slots: Box<[u8]>,
        next: usize,
        filled: usize,
        totals: Totals,
    },
    Time {
        buckets: Box<[Bucket]>,
        /// The latest second (since the breaker's epoch) recorded into.
        latest: u64,
        totals: Totals,
    },
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bucket {
    second: u64,
    totals: Totals,
}

impl Window {
    pub(crate) fn new(kind: SlidingWindow) -> Self {
        match kind {
            SlidingWindow::Count(n) => Window::Count {
                slots: vec![0; n.max(1)].into_boxed_slice(),
                next: 0,
                filled: 0,
                totals: Totals::default(),
            },
            SlidingWindow::Time(d) => Window::Time {
                buckets: vec![Bucket::default(); d.as_secs().max(1) as usize].into_boxed_slice(),
                latest: 0,
                totals: Totals::default(),
            },
        }
    }

    /// Records one call with `flags` at `now_ns()` (ns since the epoch).
    /// The time is asked for only by a time window: a count window (the
    /// default) records without converting the clock reading.
    pub(crate) fn record(&mut self, flags: u8, now_ns: impl FnOnce() -> u64) {
        match self {
            Window::Count {
                slots,
                next,
                filled,
                totals,
            } => {
                if *filled == slots.len() {
                    totals.sub_flags(slots[*next]);
                } else {
                    *filled += 1;
                }
                slots[*next] = flags;
                totals.add(flags);
                *next = (*next + 1) % slots.len();
            }
            Window::Time {
                buckets,
                latest,
                totals,
            } => {
                let second = now_ns() / NANOS_PER_SEC;
                advance(buckets, latest, totals, second);
                let len = buckets.len() as u64;
                // A call stamped before the window (a racing, older `now`)
                // has already expired.
                if second + len <= *latest {
                    return;
                }
                let bucket = &mut buckets[(second % len) as usize];
                if bucket.second == second {
                    bucket.totals.add(flags);
                    totals.add(flags);
                }
            }
        }
    }

    /// True when recording a call with no flags (a success, not slow)
    /// would change nothing a reader can see: a full count window holding
    /// only such calls, where the new one evicts one like it. A time window
    /// counts every call, so it is never quiet.
    pub(crate) fn is_quiet(&self) -> bool {
        matches!(self, Window::Count { slots, filled, totals, .. }
            if *filled == slots.len() && totals.failed == 0 && totals.slow == 0)
    }

    /// The totals as of the last record.
    pub(crate) fn totals(&self) -> Totals {
        match self {
            Window::Count { totals, .. } | Window::Time { totals, .. } => *totals,
        }
    }

    /// The totals as seen at `now_ns`, without expiring anything (time
    /// windows drop the buckets that have left the window by then).
    pub(crate) fn totals_at(&self, now_ns: u64) -> Totals {
        match self {
            Window::Count { totals, .. } => *totals,
            Window::Time { buckets, .. } => {
                let second = now_ns / NANOS_PER_SEC;
                let len = buckets.len() as u64;
                let mut sum = Totals::default();
                for b in buckets.iter() {
                    if b.second <= second && b.second + len > second {
                        sum.calls += b.totals.calls;
                        sum.failed += b.totals.failed;
                        sum.slow += b.totals.slow;
                    }
                }
                sum
            }
        }
    }

    /// Forgets every call.
    pub(crate) fn reset(&mut self) {
        match self {
            Window::Count {
                slots,
                next,
                filled,
                totals,
            } => {
                slots.fill(0);
                *next = 0;
                *filled = 0;
                *totals = Totals::default();
            }
            // Keep `latest`: seconds never go backwards.
            Window::Time {
                buckets, totals, ..
            } => {
                for b in buckets.iter_mut() {
                    b.totals = Totals::default();
                }
                *totals = Totals::default();
            }
        }
    }
}

/// Moves the time window forward to `second`, emptying the buckets of the
/// seconds that enter it (and so dropping the calls that leave it).
fn advance(buckets: &mut [Bucket], latest: &mut u64, totals: &mut Totals, second: u64) {
    if second <= *latest {
        return;
    }
    let len = buckets.len() as u64;
    let first = (*latest + 1).max((second + 1).saturating_sub(len));
    for s in first..=second {
        let b = &mut buckets[(s % len) as usize];
        totals.sub(&b.totals);
        *b = Bucket {
            second: s,
            totals: Totals::default(),
        };
    }
    *latest = second;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const SEC: u64 = NANOS_PER_SEC;

    fn t(calls: u64, failed: u64, slow: u64) -> Totals {
        Totals {
            calls,
            failed,
            slow,
        }
    }

    #[test]
    fn count_window_keeps_the_last_n() {
        let mut w = Window::new(SlidingWindow::Count(3));
        w.record(FAILED, || 0);
        w.record(SLOW, || 0);
        w.record(FAILED | SLOW, || 0);
        assert_eq!(w.totals(), t(3, 2, 2));
        w.record(0, || 0); // evicts the first FAILED
        assert_eq!(w.totals(), t(3, 1, 2));
        w.record(0, || 0); // evicts SLOW
        w.record(0, || 0); // evicts FAILED | SLOW
        assert_eq!(w.totals(), t(3, 0, 0));
        w.reset();
        assert_eq!(w.totals(), t(0, 0, 0));
        w.record(FAILED, || 0);
        assert_eq!(w.totals(), t(1, 1, 0));
    }

    #[test]
    fn only_a_full_count_window_of_plain_successes_is_quiet() {
        let mut w = Window::new(SlidingWindow::Count(3));
        w.record(0, || 0);
        w.record(0, || 0);
        assert!(!w.is_quiet(), "not full: a success still counts");
        w.record(0, || 0);
        assert!(w.is_quiet());
        w.record(SLOW, || 0);
        assert!(!w.is_quiet());
        for _ in 0..2 {
            w.record(0, || 0);
            assert!(!w.is_quiet(), "the slow call is still in the window");
        }
        w.record(0, || 0);
        assert!(w.is_quiet());
        let before = w.totals();
        w.record(0, || 0);
        assert_eq!(
            w.totals(),
            before,
            "a success in a quiet window changes nothing"
        );
        w.record(FAILED, || 0);
        assert!(!w.is_quiet());
        let mut time = Window::new(SlidingWindow::Time(Duration::from_secs(1)));
        time.record(0, || 0);
        assert!(!time.is_quiet());
    }

    #[test]
    fn time_window_expires_whole_seconds() {
        let mut w = Window::new(SlidingWindow::Time(Duration::from_secs(3)));
        w.record(FAILED, || 0); // second 0
        w.record(0, || SEC / 2); // second 0
        w.record(SLOW, || SEC + 1); // second 1
        w.record(0, || 2 * SEC); // second 2
        assert_eq!(w.totals(), t(4, 1, 1));
        assert_eq!(w.totals_at(3 * SEC - 1), t(4, 1, 1));
        // At 3 s, second 0 leaves the window.
        assert_eq!(w.totals_at(3 * SEC), t(2, 0, 1));
        w.record(0, || 3 * SEC);
        assert_eq!(w.totals(), t(3, 0, 1));
        // A jump longer than the window empties it.
        w.record(FAILED, || 100 * SEC);
        assert_eq!(w.totals(), t(1, 1, 0));
        assert_eq!(w.totals_at(103 * SEC), t(0, 0, 0));
    }

    #[test]
    fn time_window_accepts_late_stamps_inside_it_only() {
        let mut w = Window::new(SlidingWindow::Time(Duration::from_secs(3)));
        w.record(0, || 10 * SEC);
        w.record(FAILED, || 8 * SEC); // still inside (8, 9, 10)
        w.record(FAILED, || 7 * SEC); // already expired
        assert_eq!(w.totals(), t(2, 1, 0));
        w.record(0, || 11 * SEC); // the window is now (9, 10, 11): second 8 leaves
        assert_eq!(w.totals(), t(2, 0, 0));
    }
}
