//! Time arithmetic that never panics: every `Instant + Duration` and every
//! duration-to-nanoseconds conversion in the crate goes through here, with
//! `Epoch`, which turns the clock's readings into nanoseconds since a
//! fixed instant on the request path, and `decay`, the weight `e^(−Δt/τ)`
//! every latency estimate applies over the time since its last sample.
//!
//! Configured durations are bounded when a builder validates them (see
//! [`MAX_DURATION`]); these helpers make the arithmetic safe anyway, so that
//! a clock near its end or a bound missed somewhere degrades to "very far in
//! the future" instead of a panic on the request path. Only the standard
//! library's public API is used: no reading of an `Instant`'s private
//! layout, whatever it would save.
//!
//! The request path's own clock, `Clock`, is here too: the CPU's
//! time-stamp counter (through `quanta`), tied to tokio's clock. A
//! balancer and a retry layer built where tokio's clock is paused read
//! tokio's clock instead (see
//! [`balance::Builder::build`](crate::balance::Builder::build)).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::time::Instant;

/// The longest duration any setting of this crate accepts: one year. Longer
/// timeouts, waits and ejections mean "never" in a running service; the
/// bound keeps every deadline representable on every platform's clock.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// A duration in nanoseconds, saturating at `u64::MAX` (584 years).
///
/// Seconds and nanoseconds apart rather than `Duration::as_nanos`: no
/// 128-bit arithmetic on the request path, which converts two readings per
/// call.
#[inline(always)]
pub(crate) fn nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// `now + d`, or the latest instant the clock can represent near it when
/// that overflows (then `now + MAX_DURATION`, else `now`).
#[inline]
pub(crate) fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(MAX_DURATION))
        .unwrap_or(now)
}

/// A fixed instant, and the readings of the clock after it as nanoseconds
/// since it: what the endpoint model and the breakers store their times as
/// (one word, in an atomic).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Epoch {
    at: Instant,
}

impl Epoch {
    /// The epoch `at`.
    pub(crate) fn new(at: Instant) -> Self {
        Self { at }
    }

    /// The epoch itself.
    #[cfg(test)]
    pub(crate) fn instant(&self) -> Instant {
        self.at
    }

    /// The instant `ns` nanoseconds after the epoch (saturating): the
    /// inverse of [`nanos`](Self::nanos) for instants after the epoch.
    pub(crate) fn at(&self, ns: u64) -> Instant {
        after(self.at, Duration::from_nanos(ns))
    }

    /// Nanoseconds from the epoch to `t` (0 before it; saturating).
    #[inline(always)]
    pub(crate) fn nanos(&self, t: Instant) -> u64 {
        nanos(t.saturating_duration_since(self.at))
    }
}

/// `now - start`, or zero when `start` is later: the retry layer measures
/// every attempt with it.
#[inline]
pub(crate) fn elapsed(start: Instant, now: Instant) -> Duration {
    now.saturating_duration_since(start)
}

/// Weight of the old estimate after `dt_ns` with time constant τ, given as
/// `inv_tau_ns = 1/τ` (a multiplication instead of a division): `exp(−Δt/τ)`.
///
/// Busy endpoints are read and written every few microseconds against a τ of
/// seconds, so Δt/τ is tiny on the hot path; there a cubic Taylor polynomial
/// (below 1/64, error under 3e-9) replaces the libm call. One polynomial for
/// the whole range, not a linear case below 1/4096 beside it: which of the
/// two applied depended on how long ago each candidate was last sampled, a
/// branch the CPU could not predict (measured: see docs/performance.md).
#[inline(always)]
pub(crate) fn decay(dt_ns: u64, inv_tau_ns: f64) -> f64 {
    // Through i64: one instruction on x86-64, where u64 → f64 takes several.
    // Δt never comes near 2^63 ns (292 years).
    let x = dt_ns as i64 as f64 * inv_tau_ns;
    if x < 1.0 / 64.0 {
        1.0 - x * (1.0 - x * (0.5 - x * (1.0 / 6.0)))
    } else {
        exp_neg(x)
    }
}

/// `e^-x` for `x ≥ 0`, within a relative 3e-7: `2^-y` with `y = x·log2 e`,
/// the nearest integer of `y` into the exponent bits and the rest (|t| ≤
/// ln2/2) through a degree-6 Taylor polynomial. An idle endpoint's decay is
/// read on every pick that draws it, where libm's `exp` was a large share
/// of the pick.
///
/// The polynomial is evaluated by Estrin's scheme (pairs of terms, then
/// powers of `t²`), four dependent steps instead of Horner's twelve, with
/// every coefficient a multiplication: where a third of the candidates are
/// idle endpoints (starved by a latency spike for up to a minute), Horner's
/// chain and its one division were a large share of the pick.
#[inline]
pub(crate) fn exp_neg(x: f64) -> f64 {
    let y = x * std::f64::consts::LOG2_E;
    if y >= 1022.0 {
        return 0.0;
    }
    // Truncation of y + 0.5 rounds (y ≥ 0) without a libm call.
    let n = (y + 0.5) as i64;
    let t = (y - n as f64) * std::f64::consts::LN_2;
    // e^-t = Σ (-t)^k / k!, k = 0..=6.
    let t2 = t * t;
    let t4 = t2 * t2;
    let low = (1.0 - t) + t2 * (0.5 - t * (1.0 / 6.0));
    let high = (1.0 / 24.0 - t * (1.0 / 120.0)) + t2 * (1.0 / 720.0);
    let p = low + t4 * high;
    p * f64::from_bits(((1023 - n) as u64) << 52)
}

// ---- The request path's clock ----
//
/// How often, in the counter's time, its readings are tied to tokio's
/// clock again: 100 ms. Were the counter's scale off by 100 ppm (a poor
/// calibration, or the OS slewing its clock), the readings would part by
/// 10 µs in that time, the model's finest time (its latency floor). Taking
/// the offset costs one tokio reading per interval, on the call that finds
/// it due.
pub(crate) const ANCHOR_EVERY: Duration = Duration::from_millis(100);

/// How long the pause check spins on the standard clock: tokio's clock,
/// unless paused, moves on by as much.
const PAUSE_CHECK: Duration = Duration::from_micros(1);

/// The clock a balancer reads on every call: when the call starts (the
/// pick's "now" and the call's start) and when it answers (its latency and
/// the sample's time). Two readings per request; under a retry layer,
/// the layer's two (see [`Reading`]), and none of the balancer's own.
///
/// Everywhere else the crate reads tokio's clock, as tower does, so that a
/// test on tokio's paused clock drives every timer. The request path reads
/// the CPU's counter instead, through `quanta`: its invariant time-stamp
/// counter where the CPU has one (x86-64 with an invariant TSC, AArch64's
/// system counter), the OS's monotonic clock elsewhere. A counter reading
/// scaled to nanoseconds is a fraction of a tokio reading (the vDSO's
/// `clock_gettime`), and the two readings were the largest part of the
/// default balancer's time per request: docs/performance.md, "The request
/// path's clock", has the figures.
///
/// **One time, two sources.** The counter's nanoseconds are tied to the
/// epoch's (tokio's clock) by an offset, taken again from tokio's clock
/// once every [`ANCHOR_EVERY`] of counter time, by whichever call finds it
/// due. The scale quanta measured at start-up is right within parts per
/// million and the OS slews its own clock by as much, so between two
/// anchorings the readings part by at most the drift of one interval
/// (microseconds); a reading never drifts further from tokio's clock than
/// that. Timestamps from either source can be compared, and an epoch
/// reading converts to a tokio [`Instant`](tokio::time::Instant) for a
/// timer.
///
/// **Tests on a paused clock.** A balancer built where tokio's clock is
/// paused (`#[tokio::test(start_paused = true)]`, the lab's `--sim`) reads
/// tokio's clock on the request path too, so that latencies are the paused
/// clock's. The clock is chosen once, when the balancer is built: pause the
/// runtime before building a balancer whose timing a test controls.
#[derive(Debug)]
pub(crate) struct Clock {
    epoch: Epoch,
    counter: Option<Counter>,
}

impl Clock {
    /// The clock of a balancer built here and now, counting from `epoch`:
    /// tokio's when its clock is paused here, else the counter.
    pub(crate) fn detect(epoch: Epoch) -> Self {
        Self {
            epoch,
            counter: (!runtime_clock_paused()).then(Counter::new),
        }
    }

    /// Tokio's clock, always, counting from `epoch`.
    #[cfg(test)]
    pub(crate) fn runtime(epoch: Epoch) -> Self {
        Self {
            epoch,
            counter: None,
        }
    }

    /// Whether the request path reads the counter.
    #[cfg(test)]
    pub(crate) fn is_counter(&self) -> bool {
        self.counter.is_some()
    }

    /// The epoch the readings count from.
    #[inline(always)]
    pub(crate) fn epoch(&self) -> &Epoch {
        &self.epoch
    }

    /// The time now, in nanoseconds since the epoch.
    #[inline(always)]
    pub(crate) fn now_ns(&self) -> u64 {
        match &self.counter {
            Some(c) => c.now_ns(&self.epoch),
            None => self.epoch.nanos(Instant::now()),
        }
    }

    /// The time now, in nanoseconds since the epoch, or at `given`, a raw
    /// reading of the counter a layer above took for this call or poll
    /// (see [`Reading`]): the counter's raw values are one process-wide
    /// time, so a reading taken by another clock of the counter stands in
    /// for this one's. A clock reading tokio's clock reads it.
    #[inline(always)]
    pub(crate) fn now_ns_or(&self, given: Option<u64>) -> u64 {
        match (&self.counter, given) {
            (Some(c), Some(raw)) => c.ns_at(raw, &self.epoch),
            _ => self.now_ns(),
        }
    }

    /// The time now, as tokio's [`Instant`] and, on the counter, the raw
    /// value it came from, which a balancer below takes instead of reading
    /// its own clock again (see [`Reading`]).
    #[inline(always)]
    pub(crate) fn read(&self) -> Reading {
        match &self.counter {
            Some(c) => {
                let raw = c.source.raw();
                Reading {
                    at: self.epoch.at(c.ns_at(raw, &self.epoch)),
                    raw: Some(raw),
                }
            }
            None => Reading::runtime(),
        }
    }

    /// Nanoseconds from the epoch to `t`: [`Epoch::nanos`].
    #[inline(always)]
    pub(crate) fn nanos(&self, t: Instant) -> u64 {
        self.epoch.nanos(t)
    }

    /// The instant `ns` after the epoch: [`Epoch::at`].
    #[inline]
    pub(crate) fn at(&self, ns: u64) -> Instant {
        self.epoch.at(ns)
    }
}

/// Whether tokio's clock stands still here: it does not move while the
/// standard clock moves by [`PAUSE_CHECK`]. A paused clock moves only when
/// told to or when its runtime idles, neither of which can happen inside
/// this synchronous spin; an unpaused one is the standard clock.
fn runtime_clock_paused() -> bool {
    let before = Instant::now();
    let spin = std::time::Instant::now();
    while spin.elapsed() < PAUSE_CHECK {
        std::hint::spin_loop();
    }
    Instant::now() == before
}

/// The counter and its tie to the epoch.
#[derive(Debug)]
struct Counter {
    source: quanta::Clock,
    /// The counter's raw reading its nanoseconds count from.
    origin: u64,
    anchor: Anchor,
}

impl Counter {
    fn new() -> Self {
        // The first clock of the process measures the counter's rate
        // against the OS's clock, about half a millisecond; later ones
        // reuse it.
        let source = quanta::Clock::new();
        let origin = source.raw();
        Self {
            source,
            origin,
            anchor: Anchor::new(),
        }
    }

    #[inline(always)]
    fn now_ns(&self, epoch: &Epoch) -> u64 {
        self.ns_at(self.source.raw(), epoch)
    }

    /// The epoch's nanoseconds at the counter's raw value `raw`.
    #[inline(always)]
    fn ns_at(&self, raw: u64, epoch: &Epoch) -> u64 {
        let counter_ns = self.source.delta_as_nanos(self.origin, raw);
        self.anchor
            .epoch_ns(counter_ns, || epoch.nanos(Instant::now()))
    }
}

/// One reading of the clock, taken by a layer above the balancer for the
/// call or poll it makes into it (see [`scope::at`](crate::scope::at)):
/// the time as tokio's [`Instant`], for the layers' deadlines and
/// latencies, and the counter's raw value it was converted from, which
/// the balancer converts to its own epoch instead of reading the counter
/// again.
///
/// A stack of a retry layer over a balancer so reads the clock twice per
/// call, as a balancer alone does: at the call and at the answer. A
/// reading stands for the whole call or poll it was taken for: what the
/// service below does synchronously inside the poll that answers (parsing
/// a response head, say) is not in the balancer's latency, as it was not
/// when the layer handed down tokio's reading. Where a reading of the
/// counter is cheap beside the work around it the two extra readings
/// hardly show; where it is dear they were a large share of the stack's
/// time (docs/performance.md, "The stack reads the clock twice", has the
/// figures and their command).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    /// The time, as tokio's clock counts it.
    pub(crate) at: Instant,
    /// The counter's raw value at `at`; `None` when read from tokio's
    /// clock (a clock on a paused runtime), which a balancer reading the
    /// counter does not take.
    pub(crate) raw: Option<u64>,
}

impl Reading {
    /// Tokio's clock, now.
    #[inline]
    pub(crate) fn runtime() -> Self {
        Self {
            at: Instant::now(),
            raw: None,
        }
    }
}

/// The offset from the counter's nanoseconds to the epoch's, taken from
/// tokio's clock when due. Two words written once an interval and read by
/// every call: a reader that sees the new due time with the old offset
/// reads one interval's drift off, which the module allows anyway.
#[derive(Debug)]
struct Anchor {
    /// Epoch nanoseconds minus counter nanoseconds at the last anchoring
    /// (wrapping: the counter may be ahead of the epoch).
    offset: AtomicU64,
    /// The counter's nanoseconds at which the next anchoring is due: 0 at
    /// first, so that the first reading takes the offset.
    due: AtomicU64,
}

impl Anchor {
    fn new() -> Self {
        Self {
            offset: AtomicU64::new(0),
            due: AtomicU64::new(0),
        }
    }

    /// The epoch's nanoseconds at the counter's `counter_ns`: through the
    /// offset, or, when an anchoring is due, `runtime_ns()` itself (read
    /// then, and the offset taken from it).
    #[inline(always)]
    fn epoch_ns(&self, counter_ns: u64, runtime_ns: impl FnOnce() -> u64) -> u64 {
        if counter_ns >= self.due.load(Relaxed) {
            return self.take(counter_ns, runtime_ns());
        }
        counter_ns.wrapping_add(self.offset.load(Relaxed))
    }

    #[cold]
    #[inline(never)]
    fn take(&self, counter_ns: u64, runtime_ns: u64) -> u64 {
        self.offset
            .store(runtime_ns.wrapping_sub(counter_ns), Relaxed);
        self.due
            .store(counter_ns.saturating_add(nanos(ANCHOR_EVERY)), Relaxed);
        runtime_ns
    }
}

#[cfg(test)]
mod tests;
