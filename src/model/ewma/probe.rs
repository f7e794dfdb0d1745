//! When a failed endpoint is due a probe (the misses it counts are flag
//! bits of the EWMA's stamp, in `ewma.rs`).

use super::Rates;

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
