//! One endpoint's lanes read: as one lane's picks see it ([`View`]), and
//! merged for everyone else (the public accessors).

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::ewma::Rates;
use super::state::Hot;
use super::{EndpointState, Estimate, Idle};

/// One endpoint as the picks of one lane see it, the lane's line looked
/// up once: a pick reads four of its fields per candidate, and looked up
/// per field, the lane's index was read back and the address recomputed
/// after every atomic load.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub(crate) state: &'a EndpointState,
    hot: &'a Hot,
}

impl<'a> View<'a> {
    /// Requests in flight in this lane.
    #[inline(always)]
    pub(crate) fn in_flight(self) -> usize {
        self.hot.in_flight.load(Ordering::Relaxed)
    }

    /// This lane's estimate with the decay left as a factor.
    #[inline(always)]
    pub(crate) fn estimate_idle(self, now_ns: u64, rates: Rates) -> Idle {
        read(self.state, self.hot, now_ns, rates)
    }

    /// This lane's parallelism.
    #[inline(always)]
    pub(crate) fn parallelism(self) -> f64 {
        self.hot.parallelism.get()
    }

    /// Calls this lane has recorded on the endpoint.
    #[inline(always)]
    pub(crate) fn samples(self) -> u64 {
        self.hot.requests.load(Ordering::Relaxed)
    }

    /// This lane's floor latency in ns (+∞ before its first success).
    #[inline(always)]
    pub(crate) fn floor_ns(self) -> f64 {
        self.hot.parallelism.floor()
    }

    /// The weight after slow start at `now_ns`, from this lane's copy.
    #[inline(always)]
    pub(crate) fn weight_ns(self, now_ns: u64) -> f64 {
        let w = f64::from_bits(self.hot.weight.load(Ordering::Relaxed));
        self.state.ramped(w, self.hot.ramp_start, now_ns)
    }
}

impl EndpointState {
    /// Endpoint as lane `lane`'s picks see it.
    #[inline(always)]
    pub(crate) fn view(&self, lane: usize) -> View<'_> {
        View {
            state: self,
            hot: self.lane(lane),
        }
    }

    /// Lane `lane`'s line (see [`lanes`](super::lanes)); lane 0 for a
    /// lane this endpoint does not have.
    #[inline(always)]
    pub(super) fn lane(&self, lane: usize) -> &Hot {
        // Lane 0 wraps to `usize::MAX`, which no endpoint has.
        self.more.get(lane.wrapping_sub(1)).unwrap_or(&self.hot)
    }

    /// The lanes in use, minus one (a power of two minus one).
    pub(super) fn mask(&self) -> usize {
        self.more.len()
    }

    /// The lanes in use, lane 0 first.
    pub(super) fn lanes(&self) -> impl Iterator<Item = &Hot> {
        std::iter::once(&self.hot).chain(self.more.iter())
    }

    /// The lane sampled last: what the merged reads of the estimate and
    /// the parallelism report.
    fn freshest(&self) -> &Hot {
        self.lanes()
            .max_by_key(|h| h.latency.stamp())
            .unwrap_or(&self.hot)
    }

    /// Requests dispatched to this endpoint and not yet finished, by every
    /// thread (with [per-thread load](crate::balance::Builder::per_thread_load),
    /// the lanes' counts summed; a pick weighs its own lane's,
    /// [`Pool::in_flight`](crate::pick::Pool::in_flight)).
    #[inline]
    pub fn in_flight(&self) -> usize {
        self.lanes()
            .map(|h| h.in_flight.load(Ordering::Relaxed))
            .sum()
    }

    /// The configured weight.
    #[inline]
    pub fn weight(&self) -> f64 {
        f64::from_bits(self.hot.weight.load(Ordering::Relaxed))
    }

    /// Sets the weight, in every lane's copy.
    pub(crate) fn set_weight(&self, w: f64) {
        for h in self.lanes() {
            h.weight.store(w.to_bits(), Ordering::Relaxed);
        }
    }

    /// Lane `lane`'s estimate at `now_ns`, with the model's rates at hand
    /// (a pick carries them, saving a pointer chase per candidate).
    #[inline(always)]
    pub(crate) fn estimate_with(&self, now_ns: u64, rates: Rates, lane: usize) -> Estimate {
        reading(self, self.lane(lane), now_ns, rates)
    }

    /// The latency estimate projected to `now` (decay applied, nothing
    /// written): the estimate of the lane sampled last.
    pub fn estimate(&self, now: Instant) -> Estimate {
        reading(
            self,
            self.freshest(),
            self.model.nanos(now),
            self.model.rates,
        )
    }

    /// How many requests this endpoint appears to serve at once without
    /// queueing, learned from this balancer's own traffic (at least 1; see
    /// the notes on parallelism in [`PeakEwma`](crate::pick::PeakEwma)):
    /// the figure of the lane sampled last.
    pub fn parallelism(&self) -> f64 {
        self.freshest().parallelism.get()
    }

    /// The unloaded ("floor") latency the parallelism estimate is measured
    /// against, the lowest of the lanes'; `None` before the first
    /// successful call.
    pub fn floor_latency(&self) -> Option<Duration> {
        let f = self
            .lanes()
            .map(|h| h.parallelism.floor())
            .fold(f64::INFINITY, f64::min);
        f.is_finite().then(|| Duration::from_nanos(f as u64))
    }
}

/// A lane's EWMAs at `now_ns`, every reader's one way in: a failed
/// endpoint due a probe reads at its floor (see `ewma`'s notes on the
/// probe), its lane's unloaded latency or, before any success, the default
/// RTT; while a call is in flight in the lane it reads as before, so the
/// probe is one call, not every call that draws the endpoint until the
/// first answers (a breaker's half-open state admits one probe for the
/// same reason: a dead endpoint that draws many picks would take each of
/// them until the first probe failed). A failed endpoint that is not due
/// yet counts the pick that passed it over (see `ewma`'s notes on the
/// probe).
#[inline(always)]
fn read(state: &EndpointState, hot: &Hot, now_ns: u64, rates: Rates) -> Idle {
    let e = hot
        .latency
        .read_idle(now_ns, rates, hot.parallelism.floor());
    if e.waiting {
        hot.latency.miss();
    }
    if e.due && hot.in_flight.load(Ordering::Relaxed) == 0 {
        let floor = hot.parallelism.floor();
        e.probe(if floor.is_finite() {
            floor
        } else {
            state.model.default_rtt_ns
        })
    } else {
        e
    }
}

/// A lane's estimate at `now_ns`.
#[inline(always)]
fn reading(state: &EndpointState, hot: &Hot, now_ns: u64, rates: Rates) -> Estimate {
    let r = read(state, hot, now_ns, rates);
    Estimate {
        mean_ns: r.est * r.weight,
        spread_ns: r.spread * r.weight,
        failure_rate: r.failure,
    }
}
