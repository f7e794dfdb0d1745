//! A failed endpoint: how it reads until a probe is due, when it is due
//! (the misses it counts are flag bits of the EWMA's stamp, in
//! `fade.rs`), and how it reads then. Out of the request path's way: no
//! read comes here while every endpoint answers.

use std::sync::atomic::Ordering;

use super::fade::{FAILED, MISS, misses};
use super::{Ewma, Idle, Rates, decayed_failure};
use crate::time::decay;

/// A failed endpoint is due a probe this many failure time constants after
/// its last failure: 1.5, so 3 s with the default `failure_decay` of 2 s.
/// A revived endpoint then waits at most 3 s for its first call, within the
/// 5 s recovery target with room for a call that times out after 1 s and
/// is recorded after the revival; a dead one costs about one call per 3 s
/// (`tests/it/recovery.rs` bounds a 30 s outage at twelve).
pub(crate) const PROBE_AFTER: f64 = 1.5;

/// Under load a failed endpoint is probed sooner: once picks have drawn it
/// and passed it over [`PROBE_MISSES`] times since its last failure, it is
/// due [`PROBE_EARLY_NS`] (half a second) after that failure. A replica
/// restarted under load is then back within about half a second (a kill
/// and restart over real HTTP took three seconds, and once six, with the
/// wait of [`PROBE_AFTER`] alone), for at most two failed calls per
/// second while it stays down, and at most one in [`PROBE_MISSES`] of the
/// picks that considered it; under light load (fewer draws) the wait
/// stays [`PROBE_AFTER`] failure time constants. Retries (or outlier
/// ejection, which keeps an ejected endpoint out of every pick) hide those
/// failed calls from the callers.
pub(crate) const PROBE_MISSES: u64 = 64;

/// See [`PROBE_MISSES`].
pub(crate) const PROBE_EARLY_NS: f64 = 500e6;

/// Whether an endpoint whose last sample failed `dt` ns ago, leaving the
/// estimate `est` ns, and that picks passed over `misses` times since, is
/// due a probe: [`PROBE_AFTER`] failure time constants have passed, and the
/// estimate's own length (a `Retry-After` penalty, a call that took long
/// to fail) too; or, under load ([`PROBE_MISSES`]), [`PROBE_EARLY_NS`] when
/// the estimate is no more than the plain failure penalty.
#[inline]
pub(super) fn probe_due(dt: u64, est: f64, misses: u64, rates: Rates) -> bool {
    let dt = dt as i64 as f64;
    (dt * rates.failure >= PROBE_AFTER && dt >= est)
        || (misses >= PROBE_MISSES && dt >= PROBE_EARLY_NS && est <= rates.penalty)
}

impl Idle {
    /// The reading of an endpoint due a probe: its failure forgiven, its
    /// estimate at most `floor_ns` faded like an idle endpoint's since the
    /// last sample (so it competes with idle peers on equal terms; an
    /// unfaded floor lost to every peer whose estimate had faded below it,
    /// and in a pool of 64 under light load the probe never came). Its
    /// in-flight calls still raise its cost, so a probe that hangs draws no
    /// herd. Out of line: the request path never needs it while every
    /// endpoint answers.
    #[cold]
    #[inline(never)]
    pub(crate) fn probe(self, floor_ns: f64) -> Idle {
        Idle {
            est: (self.est * self.weight).min(floor_ns * self.idle),
            spread: 0.0,
            weight: 1.0,
            failure: 0.0,
            due: true,
            idle: self.idle,
            waiting: false,
            since: self.since,
        }
    }
}

/// [`Ewma::read_idle`](super::Ewma::read_idle) of an estimate whose last sample (stamped `raw`,
/// `dt` ago) failed: its estimate stands, decaying on the failure clock,
/// until a probe is due.
#[cold]
#[inline(never)]
pub(super) fn read_failed(
    est: f64,
    spread: f64,
    failure: f64,
    raw: u64,
    dt: u64,
    rates: Rates,
) -> Idle {
    let due = probe_due(dt, est, misses(raw), rates);
    Idle {
        est,
        spread: spread.max(0.0),
        weight: decay(dt, rates.failure),
        failure: decayed_failure(failure, dt, rates),
        due,
        idle: if due { decay(dt, rates.latency) } else { 1.0 },
        waiting: !due,
        since: dt,
    }
}

impl Ewma {
    /// Counts that a pick drew this failed endpoint, not yet due a probe,
    /// and passed it over (see [`PROBE_MISSES`]). Out of line: only a
    /// failed endpoint's reads come here, a bounded number of times per
    /// failure.
    #[cold]
    #[inline(never)]
    pub(crate) fn miss(&self) {
        let raw = self.stamp.load(Ordering::Relaxed);
        if raw & FAILED != 0 && misses(raw) < PROBE_MISSES {
            let _ =
                self.stamp
                    .compare_exchange(raw, raw + MISS, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}
