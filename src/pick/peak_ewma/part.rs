//! One candidate's cost, in the parts a pick compares.

use super::{FLOOR_SLACK, TRUST_SAMPLES};

/// One candidate's cost, in parts:
/// `(est + k·spread) · (in_flight / q + 1) / den`, `q` its parallelism as
/// the pick credits it.
#[derive(Clone, Copy)]
pub(super) struct Part {
    pub(super) est: f64,
    pub(super) spread: f64,
    /// Requests in flight.
    pub(super) in_flight: f64,
    /// Its learned parallelism (1 when not learned).
    pub(super) p: f64,
    /// `weight · (1 − f)²`.
    pub(super) den: f64,
    /// Nanoseconds since its last sample.
    pub(super) since: u64,
    /// Its last call succeeded (and no probe of a failed one is due).
    pub(super) answered: bool,
    /// Nothing in flight: an idle endpoint's estimate may have gone stale.
    pub(super) idle: bool,
    /// Its floor latency, ns (+∞ before its first success).
    pub(super) floor: f64,
    /// Calls recorded on it.
    pub(super) samples: u64,
}

impl Part {
    /// A candidate that may not take the call: it costs infinity.
    pub(super) const UNAVAILABLE: Part = Part {
        est: f64::INFINITY,
        spread: 0.0,
        in_flight: 0.0,
        p: 1.0,
        den: 1.0,
        since: 0,
        answered: false,
        idle: false,
        floor: f64::INFINITY,
        samples: 0,
    };

    /// Whether its stale estimate may hide a replica as fast as one of
    /// `reference`: it has answered too few calls to tell (a first answer
    /// may carry a connection's set-up), or it has answered within
    /// [`FLOOR_SLACK`] times `reference` before. A replica whose every
    /// answer was slower is slow, not stale: trying it again costs a slow
    /// call and tells nothing new.
    #[inline(always)]
    pub(super) fn may_be_as_fast_as(&self, reference: f64) -> bool {
        self.samples < TRUST_SAMPLES || self.floor <= FLOOR_SLACK * reference
    }

    /// The cost with its parallelism credited up to `credit`.
    #[inline(always)]
    pub(super) fn cost(&self, k: f64, credit: f64) -> f64 {
        let q = self.p.min(credit);
        (self.est + k * self.spread) * (self.in_flight + q) / (q * self.den)
    }
}
