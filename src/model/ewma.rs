//! Peak-EWMA latency with a spread term, lock-free.
//!
//! Semantics follow Finagle's and tower's peak-EWMA: a sample above the
//! estimate replaces it at once (peaks are believed immediately), otherwise
//! `est = est·w + x·(1−w)` with `w = exp(−Δt/τₛ)` and Δt the time since the
//! previous sample. The spread is an EWMA of `|x − est|` with the same weight,
//! like TCP's RTTVAR.
//!
//! Unlike tower (which takes a `Mutex` and mutates the estimate on every
//! read), reads here project the decay to "now" without writing anything: an
//! idle endpoint's estimate shrinks toward zero as time passes
//! (`est·e^(−idle/τ)`), so a starved endpoint is eventually tried again.
//!
//! **Two time constants, where tower and Finagle have one.** τₛ
//! (`Builder::sample_decay`, 1 s) sets how fast a busy endpoint's estimate
//! follows its samples; τ (`Builder::decay`, 10 s) how fast an idle one's
//! fades. With one constant of 10 s, a replica that slowed down for a
//! couple of seconds kept its peak for about ten after it recovered, and
//! open-loop clients avoided half a fleet of noisy replicas (`noisy-fleet`:
//! p99 0.70 of tower's p2c, 0.46 with τₛ = 1 s); with one constant of 1 s,
//! slow replicas left alone were re-explored ten times as often, and the
//! closed-loop scenarios' p99 rose by up to 3.3× (`seed-steady`).
//!
//! Both numbers live in one `AtomicU64` (two `f32` nanosecond values), so a
//! reader always sees a consistent pair, and a compare-exchange loop never
//! loses a sample. The time of the last sample is a second atomic, written
//! with a plain store: two samples racing on one endpoint may measure their
//! Δt from the same previous sample, slightly over-weighting one of them.
//!
//! A third value, the **failure ratio**, is an EWMA of "this call failed"
//! (1) or "succeeded" (0) over its own, shorter time constant, decaying
//! toward 0 while the endpoint is idle: recent failures make an endpoint
//! expensive, and an endpoint left alone is forgiven and probed again.
//! A failed call never lowers the latency estimate (its sample is at least
//! the current estimate), so a replica that fails in 1 ms does not look fast.
//!
//! **Recovery.** While an endpoint's last sample is a failure, its estimate
//! and spread decay with the failure ratio's time constant (2 s by default,
//! `Builder::failure_decay`) instead of the latency one (10 s): the failure
//! penalty (1 s) fades in seconds. A success ends the fast decay; on a busy
//! endpoint the next sample comes microseconds after a failure, where both
//! constants give the same weight. The flag is the low bit of the sample's
//! time stamp, whose low byte holds flags (256 ns of precision).
//!
//! **The probe.** A fade alone takes `τ_f · ln(penalty / peers' cost)` to
//! bring a failed endpoint back: 17 s for a 1 s penalty against 200 µs
//! peers, and without bound as the peers get faster. Measured from outside
//! (issue 30), a replica of 200 µs that refused connections for 3 s among
//! two peers was first picked 9.7 s after it answered again, and never
//! within 15 s in pools of 8 or 64. So the fade has a deadline:
//! [`PROBE_AFTER`](probe::PROBE_AFTER) failure time constants (3 s by default) after its last
//! failure, or the failed call's own penalty if that is longer (a
//! `Retry-After` is honoured), an endpoint reads as *due a probe*: its
//! failure ratio forgiven and its estimate at most its floor (the unloaded
//! latency it showed before, or the default RTT), as if it had been idle,
//! never as if free (a cost of zero would draw every call until the probe
//! answers). The next pick that draws it sends one call; the answer
//! decides. A success replaces the stale penalty outright, a failure
//! restarts the wait. A dead endpoint therefore takes about one call per
//! 3 s, and a revived one is picked again at most ~3 s after it answers
//! (`tests/conformance/recovery.rs`: every failure kind, pools of 2 to 64,
//! light and heavy load). Under load the deadline is half a second once
//! picks have passed the endpoint over [`PROBE_MISSES`](probe::PROBE_MISSES) times: a replica
//! restarted under load is back within a second, for at most two failed
//! calls per second while it stays down (`tests/it/recovery.rs`).
//!
//! **Staleness.** While an endpoint takes no calls its estimate's excess
//! over its floor fades within [`PEAK_FLOORS`](fade::PEAK_FLOORS) floors, and an estimate
//! older than [`STALE_LATENCIES`](fade::STALE_LATENCIES) latencies is replaced by the next
//! sample instead of blending with it (the picker, which knows the other
//! candidates, tries such an endpoint again: see `PeakEwma`'s notes).

use std::sync::atomic::{AtomicU64, Ordering};

mod fade;
mod probe;

use crate::time::decay;
pub(crate) use fade::stale_after;
use fade::{FAILED, TIME, fade_excess, misses, stamp_of};
pub(crate) use fade::{Floor, PeakFade};
use probe::{probe_due, read_failed};

#[derive(Debug)]
pub(crate) struct Ewma {
    /// High 32 bits: estimate (f32 ns); low 32 bits: spread (f32 ns).
    packed: AtomicU64,
    /// Nanoseconds since the balancer's epoch at the last sample, with the
    /// low bit set when that sample was a failure.
    stamp: AtomicU64,
    /// Failure ratio in `[0, 1]`, as `f64` bits.
    failure: AtomicU64,
}

/// Time constants of one balancer's EWMAs, as reciprocals.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rates {
    /// 1/τ of the latency estimate and spread.
    pub(crate) latency: f64,
    /// 1/τ of the failure ratio.
    pub(crate) failure: f64,
    /// 1/τ with which the estimate and spread follow samples.
    pub(crate) sample: f64,
    /// The failure penalty, ns: a failed endpoint whose estimate is no
    /// longer (no `Retry-After`, no slow failure) may be probed early.
    pub(crate) penalty: f64,
}

/// What a read of the EWMAs gives, decayed to the time of the read (the
/// tests' view; readers go through `lanes.rs`, which also applies the probe).
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    pub(crate) est: f64,
    pub(crate) spread: f64,
    pub(crate) failure: f64,
}

/// A read with the latency decay left as a factor: the estimate and spread
/// as last written, and the weight `e^(−idle/τ)` that decays them to the
/// time of the read (the failure ratio is decayed already). A pick that
/// multiplies its cost by `weight` last computes the decay beside the rest
/// of the cost instead of before it, off the pick's critical path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Idle {
    pub(crate) est: f64,
    pub(crate) spread: f64,
    pub(crate) weight: f64,
    pub(crate) failure: f64,
    /// The last sample failed and the wait for a probe is over: the reader
    /// substitutes the endpoint's floor (see [`Idle::probe`]).
    pub(crate) due: bool,
    /// When due, the latency clock's decay since the last sample (else 1).
    pub(crate) idle: f64,
    /// The last sample failed and no probe is due yet: a pick that draws
    /// the endpoint and passes it over counts a miss ([`Ewma::miss`]).
    pub(crate) waiting: bool,
    /// Nanoseconds since the last sample (or since the endpoint joined).
    pub(crate) since: u64,
}

/// The failure ratio `failure` decayed over `dt`: only paying for the decay
/// when there is something to decay.
#[inline(always)]
fn decayed_failure(failure: f64, dt: u64, rates: Rates) -> f64 {
    if failure > 0.0 {
        failure * decay(dt, rates.failure)
    } else {
        0.0
    }
}

/// [`Ewma::read_idle`] of an estimate whose last sample succeeded, `dt`
/// ago: its excess over the floor faded, then the idle fade as a factor.
#[inline(always)]
fn answered(est: f64, spread: f64, failure: f64, dt: u64, rates: Rates, floor: Floor) -> Idle {
    Idle {
        est: fade_excess(est, floor, dt, rates.latency),
        spread: spread.max(0.0),
        weight: decay(dt, rates.latency),
        failure: decayed_failure(failure, dt, rates),
        due: false,
        idle: 1.0,
        waiting: false,
        since: dt,
    }
}

/// Spread value marking an estimate that is still the default RTT.
const UNSAMPLED: f64 = -1.0;

#[inline]
fn pack(est: f64, spread: f64) -> u64 {
    (u64::from((est as f32).to_bits()) << 32) | u64::from((spread as f32).to_bits())
}

#[inline]
fn unpack(v: u64) -> (f64, f64) {
    (
        f64::from(f32::from_bits((v >> 32) as u32)),
        f64::from(f32::from_bits(v as u32)),
    )
}

impl Ewma {
    /// Starts at `initial_ns` (the default RTT) as if sampled at `now_ns`.
    /// The default is a prior, not an observation: the first real sample
    /// replaces it outright (a negative spread marks "no sample yet"), so a
    /// fast replica is not mistaken for a 30 ms one for tens of seconds.
    pub(crate) fn new(initial_ns: f64, now_ns: u64) -> Self {
        Self {
            packed: AtomicU64::new(pack(initial_ns, UNSAMPLED)),
            stamp: AtomicU64::new(stamp_of(now_ns)),
            failure: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// Records one call's latency `x_ns`, taken at `now_ns`, and whether it
    /// `failed` (then the sample counts as at least the current estimate).
    /// Returns the time since the previous sample.
    pub(crate) fn observe(
        &self,
        x_ns: f64,
        failed: bool,
        now_ns: u64,
        rates: Rates,
        floor: Floor,
    ) -> u64 {
        // A load and a store, not a read-modify-write: two samples racing on
        // one endpoint may both measure Δt from the same previous sample,
        // which only over-weights one of them a little. An uncontended RMW
        // costs as much as the rest of the update.
        let raw = self.stamp.load(Ordering::Acquire);
        let prev = raw & TIME;
        let stamp = stamp_of(now_ns) | u64::from(failed);
        if stamp & TIME >= prev && stamp != raw {
            self.stamp.store(stamp, Ordering::Release);
        }
        let dt = now_ns.saturating_sub(prev);
        let w = if raw & FAILED == 0 {
            decay(dt, rates.sample)
        } else {
            decay(dt, rates.failure)
        };
        let wf = if failed || self.failure.load(Ordering::Relaxed) != 0 {
            decay(dt, rates.failure)
        } else {
            1.0
        };
        let x_fail = if failed { 1.0 } else { 0.0 };
        // The answer to a probe decides: a success forgives the failures
        // before it (they were the replica that died, not the one that
        // answers), so a replica back under load takes its share within a
        // second instead of waiting seconds for its failure ratio to fade.
        let probe_answered = !failed
            && raw & FAILED != 0
            && probe_due(
                dt,
                unpack(self.packed.load(Ordering::Relaxed)).0,
                misses(raw),
                rates,
            );
        if probe_answered {
            self.failure.store(0f64.to_bits(), Ordering::Relaxed);
        } else if failed || self.failure.load(Ordering::Relaxed) != 0 {
            // A success on an endpoint with no failure history changes
            // nothing: skip the write on the common path.
            let _ = self
                .failure
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| {
                    let f = f64::from_bits(bits) * wf + x_fail * (1.0 - wf);
                    // Flush tiny ratios to an exact zero so the skip applies again.
                    Some(if f < 1e-6 { 0f64 } else { f }.to_bits())
                });
        }
        let mut cur = self.packed.load(Ordering::Acquire);
        loop {
            let (est, spread) = unpack(cur);
            // What readers saw: the excess over the floor faded (not after
            // a failure, whose penalty fades on the failure clock).
            let est = if raw & FAILED == 0 && spread >= 0.0 {
                fade_excess(est, floor, dt, 0.0)
            } else {
                est
            };
            let x_ns = if failed { x_ns.max(est) } else { x_ns };
            // The answer to a probe: readers had the floor, not the stale
            // penalty, so a success starts afresh rather than blending.
            // A stale estimate (see `STALE_LATENCIES`) is replaced too.
            let fresh = spread < 0.0
                || (!failed && raw & FAILED != 0 && probe_due(dt, est, misses(raw), rates))
                || (!failed && raw & FAILED == 0 && dt as i64 as f64 >= stale_after(x_ns));
            // The spread a fresh estimate starts with is the one it had
            // (the replica's noise, at most the sample itself), so that a
            // replica back from a stale estimate or a failure does not
            // undercut peers whose noise is known and draw a herd; a first
            // sample has no spread to keep.
            let (new_est, new_spread) = if fresh {
                (x_ns, spread.clamp(0.0, x_ns))
            } else {
                let dev = (x_ns - est).abs();
                let new_spread = spread * w + dev * (1.0 - w);
                let new_est = if x_ns > est {
                    x_ns
                } else {
                    est * w + x_ns * (1.0 - w)
                };
                (new_est, new_spread)
            };
            match self.packed.compare_exchange_weak(
                cur,
                pack(new_est, new_spread),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return dt,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Records that a call has taken at least `x_ns` without answering (it
    /// was abandoned at `now_ns`): a censored sample, which can only raise
    /// the estimate, like a peak. Shorter than the estimate, it says nothing
    /// and changes nothing.
    pub(crate) fn observe_lower_bound(&self, x_ns: f64, now_ns: u64, rates: Rates, floor: Floor) {
        let r = self.read_idle(now_ns, rates, floor);
        let est_now = r.est * r.weight;
        if x_ns <= est_now {
            return;
        }
        self.observe(x_ns, false, now_ns, rates, floor);
    }

    /// When the last sample was taken, in ns since the epoch.
    pub(crate) fn stamp(&self) -> u64 {
        self.stamp.load(Ordering::Relaxed) & TIME
    }

    /// The estimate, spread and failure ratio projected to `now_ns`,
    /// without mutation.
    #[cfg(test)]
    pub(crate) fn read(&self, now_ns: u64, rates: Rates) -> Reading {
        let r = self.read_idle(now_ns, rates, Floor::UNKNOWN);
        Reading {
            est: r.est * r.weight,
            spread: r.spread * r.weight,
            failure: r.failure,
        }
    }

    /// [`read`](Self::read) with the decay left as a factor.
    #[inline]
    pub(crate) fn read_idle(&self, now_ns: u64, rates: Rates, floor: Floor) -> Idle {
        let (est, spread) = unpack(self.packed.load(Ordering::Acquire));
        let raw = self.stamp.load(Ordering::Acquire);
        let failure = f64::from_bits(self.failure.load(Ordering::Relaxed));
        let dt = now_ns.saturating_sub(raw & TIME);
        if raw & FAILED != 0 {
            return read_failed(est, spread, failure, raw, dt, rates);
        }
        answered(est, spread, failure, dt, rates, floor)
    }

    /// [`read_idle`](Self::read_idle) of an estimate whose last sample
    /// succeeded; `None` when it failed (then read it with `read_idle`, out
    /// of line): the request path's read while every endpoint answers.
    #[inline(always)]
    pub(crate) fn read_answered(&self, now_ns: u64, rates: Rates, floor: Floor) -> Option<Idle> {
        let (est, spread) = unpack(self.packed.load(Ordering::Acquire));
        let raw = self.stamp.load(Ordering::Acquire);
        let failure = f64::from_bits(self.failure.load(Ordering::Relaxed));
        let dt = now_ns.saturating_sub(raw & TIME);
        (raw & FAILED == 0).then(|| answered(est, spread, failure, dt, rates, floor))
    }

    /// The estimate as last written, with no decay or fade applied (a
    /// failed endpoint's reads its penalty): enough to tell whether two
    /// endpoints' latencies are alike, at the cost of one load.
    #[inline(always)]
    pub(crate) fn written(&self) -> f64 {
        unpack(self.packed.load(Ordering::Relaxed)).0
    }
}

#[cfg(test)]
mod tests;
