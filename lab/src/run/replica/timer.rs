//! When a backend's service ends: the drawn service time, kept on average
//! against the coarseness of tokio's timers.
//!
//! tokio's timers tick in milliseconds, and a deadline between two ticks
//! fires at the later one (over real time, a little later still, when the
//! process is busy): left alone, every service time would be rounded up,
//! about half a millisecond on average, which on 10 ms replicas takes 5%
//! of their capacity and turns a load of 0.9 into one of 0.95.
//!
//! * In `--sim`, every instant is a tick since the run's start, and the end
//!   is rounded to one of its two neighbouring ticks at random, in
//!   proportion to its distance from them: each service takes its drawn
//!   time on average, exactly. (Whole milliseconds, like the published
//!   study's delays, are kept as they are and draw nothing.)
//! * Over real time, the lateness of each wake-up is measured and the next
//!   deadlines are set that much earlier: an integral controller that holds
//!   the mean lateness at zero, under whatever load the process carries.
//! * Over real time, services shorter than a few milliseconds (LAN
//!   replicas) wait on a thread of their own instead, whose wake-ups are
//!   precise to tens of microseconds ([`super::precise`]).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// A share of each wake-up's lateness moved into the next deadlines.
const GAIN: i64 = 16;

/// One backend's service timer.
#[derive(Debug, Default)]
pub struct Timer {
    sim: bool,
    /// Real time: how much earlier than its end a service's timer is set, ns.
    early_ns: AtomicI64,
}

impl Timer {
    /// A timer for `--sim` (`true`) or real time.
    pub fn new(sim: bool) -> Self {
        Self {
            sim,
            early_ns: AtomicI64::new(0),
        }
    }

    /// When to wake for a service of `d` that starts now, and the end it
    /// stands for; `coin(p)` is true with probability `p` (the rounding in
    /// `--sim`).
    pub fn deadline(&self, d: Duration, coin: impl FnOnce(f64) -> bool) -> (Instant, Instant) {
        let now = Instant::now();
        let end = now + d;
        if self.sim {
            let ms = Duration::from_millis(1);
            let sub = (d.as_nanos() % ms.as_nanos()) as u64;
            if sub == 0 {
                return (end, end);
            }
            let whole = end - Duration::from_nanos(sub);
            let p = sub as f64 / ms.as_nanos() as f64;
            let at = if coin(p) { whole + ms } else { whole };
            return (at, end);
        }
        let early = self.early_ns.load(Ordering::Relaxed).max(0) as u64;
        (
            end.checked_sub(Duration::from_nanos(early))
                .unwrap_or(now)
                .max(now),
            end,
        )
    }

    /// Waits out a service of `d` that starts now: in `--sim` and for
    /// services of [`super::precise::PRECISE_BELOW`] or more on tokio's
    /// timers ([`Timer::deadline`]), shorter ones over real time on the
    /// precise thread ([`super::precise`]).
    pub async fn wait(&self, d: Duration, coin: impl FnOnce(f64) -> bool) {
        if !self.sim && d < super::precise::PRECISE_BELOW {
            super::precise::sleep(d).await;
            return;
        }
        let (wake, end) = self.deadline(d, coin);
        tokio::time::sleep_until(wake).await;
        self.woke(end);
    }

    /// Real time: a service meant to end at `end` has woken now.
    pub fn woke(&self, end: Instant) {
        if self.sim {
            return;
        }
        let now = Instant::now();
        let late = if now >= end {
            (now - end).as_nanos() as i64
        } else {
            -((end - now).as_nanos() as i64)
        };
        self.early_ns.fetch_add(late / GAIN, Ordering::Relaxed);
    }
}
