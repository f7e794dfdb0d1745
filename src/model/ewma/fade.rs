//! Time since the last sample, and what it does to an estimate: the
//! stamp that records when the last sample was taken (with flags in its
//! low byte: whether that sample failed, and the picks that passed the
//! failed endpoint over since); how an idle estimate loses its hold (its
//! excess over the floor fades in floors); and when an estimate is too
//! old to describe the replica (stale).

use std::sync::atomic::{AtomicU64, Ordering};

/// While an endpoint takes no calls, its estimate's excess over its floor
/// latency (its unloaded service time, see `parallelism.rs`) fades to
/// nothing within this many floors: the excess is a queue, a slowdown or
/// a hiccup, each of which lasts some service times, not the seconds of
/// the idle fade. The floor itself keeps fading with the idle constant
/// (`Builder::decay`), so every endpoint is explored again in time.
///
/// The excess fades in a straight line, not exponentially with this many
/// floors as its time constant, as it did at first: the line starts as
/// steep, is gone at a known time instead of lingering for several, and
/// costs a multiplication where the exponential's polynomial and branch
/// sat on every pick's critical path, once per candidate (the
/// measurement is in docs/performance.md). In the lab's family (both of
/// its seeds) and its LAN fleets over real sockets the default balanced
/// as well or better with the line; a line reaching the floor in twice
/// the time, as much area as the exponential, did no better (docs/lab.md,
/// "After the linear fade").
///
/// On identical replicas answering in 200 µs over real sockets, one
/// scheduler hiccup of a few milliseconds used to raise a replica's
/// estimate twenty-fold and keep it unpicked for the ten-odd seconds the
/// idle fade took to bring it back; now it takes tens of milliseconds.
pub(crate) const PEAK_FLOORS: f64 = 1000.0;

/// The shortest fade [`PEAK_FLOORS`] gives: 10 ms (a floor of 0, a
/// replica answering within the clock's tick, must not make it instant).
const MIN_PEAK_FADE_NS: f64 = 10e6;

/// An endpoint's floor latency with the rate at which an estimate's
/// excess over it fades: the inverse of [`PEAK_FLOORS`] floors (10 ms at
/// least), 0 for an unknown floor.
///
/// The rate is kept beside the floor ([`PeakFade`]), written when the
/// floor moves, not worked out by every read: a division per candidate
/// of every pick, and one per answer before its estimate could be written,
/// sat on the request path's longest chain (docs/performance.md,
/// "The fade's rate kept beside the floor").
#[derive(Debug, Clone, Copy)]
pub(crate) struct Floor {
    /// The floor latency, ns (+∞ before the first success).
    pub(crate) ns: f64,
    /// The excess fade's rate, ns⁻¹.
    pub(crate) fade: f64,
}

#[cfg(test)]
impl Floor {
    /// No floor known yet: no excess to fade.
    pub(crate) const UNKNOWN: Floor = Floor {
        ns: f64::INFINITY,
        fade: 0.0,
    };

    /// A floor of `ns` with its fade's rate.
    pub(crate) fn of(ns: f64) -> Floor {
        Floor {
            ns,
            fade: peak_rate(ns),
        }
    }
}

/// The rate at which the excess over a floor of `floor_ns` fades: the
/// inverse of the time it takes (0 for an unknown floor, +∞).
#[inline]
fn peak_rate(floor_ns: f64) -> f64 {
    1.0 / (floor_ns * PEAK_FLOORS).max(MIN_PEAK_FADE_NS)
}

/// A lane's excess fade rate (`f64` bits), written whenever its floor
/// moves, so that it is [`peak_rate`] of the floor beside it. Not always:
/// a read may fall between the two writes, and two answers racing on one
/// lane may leave the rate of the other's floor until the floor moves
/// again (the floor is a load and a store too, so both are floors of
/// samples a moment apart).
#[derive(Debug, Default)]
pub(crate) struct PeakFade(AtomicU64);

impl PeakFade {
    /// The rate as last written (0 before the first floor).
    #[inline(always)]
    pub(crate) fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    /// The floor moved to `floor_ns` (as its readers read it).
    #[inline]
    pub(crate) fn set(&self, floor_ns: f64) {
        self.0
            .store(peak_rate(floor_ns).to_bits(), Ordering::Relaxed);
    }
}

/// The estimate `est` after `dt` ns without a sample, its excess over
/// the floor faded in a line that reaches zero within [`PEAK_FLOORS`]
/// floors, as a value that the idle fade (on `latency`, applied by the
/// reader) then multiplies. Where the idle fade is as fast (a floor of 10
/// ms or more, at the default `decay`), only the idle fade applies.
#[inline(always)]
pub(super) fn fade_excess(est: f64, floor: Floor, dt: u64, latency: f64) -> f64 {
    if est > floor.ns {
        let rel = floor.fade.max(latency) - latency;
        floor.ns + (est - floor.ns) * (1.0 - dt as i64 as f64 * rel).max(0.0)
    } else {
        est
    }
}

/// An estimate older than this many of an endpoint's latencies is stale:
/// the replica it describes has since drained its queue, ended its
/// hiccup or restarted. A pick treats a stale, idle endpoint as no worse
/// than the best candidate beside it (so it is tried again), and the
/// answer to that try replaces the stale estimate outright instead of
/// blending with it. Counted in the pool's latency, not the endpoint's own
/// (a hiccup or a connection set-up may have inflated that): on identical
/// 200 µs replicas a starved replica is tried again within a tenth of a
/// second, while a replica ten times slower than a 10 ms pool is tried once
/// every ten seconds.
pub(crate) const STALE_LATENCIES: f64 = 1000.0;

/// The shortest staleness [`STALE_LATENCIES`] gives: 10 ms, the clock's
/// tick (a latency of 0 must not make every estimate stale at once).
pub(crate) const MIN_STALE_NS: f64 = 10e6;

/// How long an estimate of `latency_ns` stays current: see
/// [`STALE_LATENCIES`].
#[inline(always)]
pub(crate) fn stale_after(latency_ns: f64) -> f64 {
    (latency_ns * STALE_LATENCIES).max(MIN_STALE_NS)
}

/// The stamp's low bit: the last sample was a failure.
pub(super) const FAILED: u64 = 1;

/// The stamp's next bits, after a failure: how many picks drew the
/// endpoint and passed it over since (saturating at
/// [`PROBE_MISSES`](super::probe::PROBE_MISSES)).
pub(super) const MISS: u64 = 2;

/// The stamp's flag bits (the time keeps the rest: 256 ns of precision).
pub(super) const FLAGS: u64 = 0xFF;

/// The stamp's time.
pub(super) const TIME: u64 = !FLAGS;

/// The stamp of a sample taken at `now_ns`: rounded up, so that a read at
/// the same time sees no idleness at all.
#[inline(always)]
pub(super) fn stamp_of(now_ns: u64) -> u64 {
    now_ns.saturating_add(FLAGS) & TIME
}

#[inline(always)]
pub(super) fn misses(raw: u64) -> u64 {
    (raw & FLAGS) >> 1
}
