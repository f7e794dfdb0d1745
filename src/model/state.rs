//! [`EndpointState`]: one endpoint's record, and its readers for everyone
//! but a pick (the lanes merged; a pick reads its own lane, and the call
//! counts summed over the lanes, in `lanes.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::time::Instant;

use super::ewma::Ewma;
use super::lanes::{Hot, LANES, NO_RAMP, reading};
use super::limit::Limit;
use super::parallelism::Parallelism;
use super::reported::Reported;
use super::{EndpointMeta, EndpointObserver, Model};
use crate::breaker::CircuitBreaker;
use crate::guard::GuardSet;
use crate::outcome::FailureKind;
use crate::outlier::HostStats;

/// A latency estimate for an endpoint, projected to the time it was read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Peak-EWMA latency, in nanoseconds.
    pub mean_ns: f64,
    /// EWMA of the absolute deviation from the estimate, in nanoseconds.
    pub spread_ns: f64,
    /// Recent share of failed calls, in `[0, 1]`, forgiven while idle.
    pub failure_rate: f64,
}

// What a call reads on its endpoint besides `hot` shares the line after it.
const _: () = {
    use std::mem::offset_of;
    let read_by_a_call = [
        offset_of!(EndpointState, model),
        offset_of!(EndpointState, observer),
        offset_of!(EndpointState, id),
        offset_of!(EndpointState, more),
        offset_of!(EndpointState, ramp_start),
        offset_of!(EndpointState, gate.bits),
        offset_of!(EndpointState, gate.guarded),
    ];
    let mut i = 0;
    while i < read_by_a_call.len() {
        assert!(read_by_a_call[i] / 64 == 1);
        i += 1;
    }
};

/// What [admission](crate::admission) keeps on each endpoint. The model
/// stores it and never reads it: admission alone gives its words a meaning
/// (the health bits, the census, each guard's rules), and the health owner
/// writes it through admission. In declared order: the words a call
/// reads first (see [`EndpointState`]'s layout).
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct Gate {
    /// Why the endpoint may not take calls: admission's health bits.
    pub(crate) bits: AtomicU8,
    /// Whether the census counts the endpoint.
    pub(crate) counted: AtomicBool,
    /// Whether the endpoint has any guard: without one, admission skips
    /// the guards altogether (a field, not a question to the guards, so
    /// that a call without them never reaches their code).
    pub(crate) guarded: bool,
    /// The guards the balancer configures (see [`crate::guard`]).
    pub(crate) guards: GuardSet,
    /// The outlier-detection counters.
    pub(crate) outlier: HostStats,
}

/// Live state of one endpoint: in-flight count, weight, latency and outcome
/// counters, placement, and what admission keeps on it.
#[repr(C)]
pub struct EndpointState {
    /// Everything a pick reads and a response writes, in one cache line:
    /// lane 0 (see [`lanes`](super::lanes)).
    pub(super) hot: Hot,
    /// The rest of what a call reads on the endpoint it is sent to, on
    /// the line after `hot`: with many endpoints, the chosen one's lines
    /// are out of the core's nearest cache, and these fields sat on four
    /// lines of their own (docs/performance.md, "The chosen endpoint's
    /// lines").
    pub(crate) model: Arc<Model>,
    pub(crate) observer: Option<Box<dyn EndpointObserver>>,
    /// See [`id`](Self::id).
    pub(crate) id: u64,
    /// Lanes 1 and up, with per-thread load (empty without). Apart, so
    /// that an endpoint without them is as small as before lanes (eight
    /// lanes inline made every endpoint 512 bytes longer and the default
    /// picker over 1024 endpoints slower: see docs/performance.md).
    pub(super) more: Box<[Hot]>,
    /// Start of this endpoint's slow-start ramp (ns since the epoch);
    /// [`NO_RAMP`] when it has none. Its lanes' weights are negated when
    /// it has one.
    pub(super) ramp_start: u64,
    /// What admission keeps on the endpoint (admission's own); its
    /// words first, so that they end the line above.
    pub(crate) gate: Gate,
    key_hash: u64,
    /// How events and metrics name the endpoint.
    label: Box<str>,
    /// Calls classified as failures, by [`FailureKind::index`].
    pub(super) failures: [AtomicU64; FailureKind::NAMES.len()],
    /// Completed calls classified `Ignore`.
    pub(super) ignored: AtomicU64,
    /// Calls dropped before they ended (cancelled, lost hedges).
    pub(super) abandoned: AtomicU64,
    /// Takes no new picks while set; in-flight calls finish.
    draining: AtomicBool,
    meta: ArcSwap<EndpointMeta>,
    /// The adaptive concurrency limit (+∞ while limits are off).
    pub(super) limit: Limit,
    /// What the endpoint reported about its own load.
    pub(super) reported: Reported,
}

/// How a new endpoint starts.
pub(crate) struct Birth {
    pub(crate) id: u64,
    pub(crate) key_hash: u64,
    pub(crate) label: Box<str>,
    pub(crate) weight: f64,
    pub(crate) meta: EndpointMeta,
    /// Where its slow-start ramp starts (ns since the epoch; in the past
    /// for an endpoint resuming a remembered ramp), if it ramps.
    pub(crate) ramp_start: Option<u64>,
    pub(crate) gate: Gate,
    pub(crate) observer: Option<Box<dyn EndpointObserver>>,
}

/// A lane's copy of the weight `w` (> 0): negated when the endpoint ramps
/// (see [`Hot::weight`]).
fn lane_weight(w: f64, ramp_start: u64) -> f64 {
    if ramp_start == NO_RAMP { w } else { -w }
}

impl EndpointState {
    pub(crate) fn new(birth: Birth, model: &Arc<Model>, now: Instant) -> Self {
        let now_ns = model.clock.nanos(now);
        let ramp_start = match birth.ramp_start {
            Some(start) if model.slow_start.is_some() => start.min(NO_RAMP - 1),
            _ => NO_RAMP,
        };
        let weight = lane_weight(birth.weight, ramp_start);
        let lane = || Hot {
            in_flight: Default::default(),
            latency: Ewma::new(model.default_rtt_ns, now_ns),
            parallelism: Parallelism::new(),
            peak_fade: Default::default(),
            weight: AtomicU64::new(weight.to_bits()),
            requests: AtomicU64::new(0),
        };
        Self {
            hot: lane(),
            more: (0..model.lane_mask.min(LANES - 1))
                .map(|_| lane())
                .collect(),
            ramp_start,
            id: birth.id,
            key_hash: birth.key_hash,
            label: birth.label,
            failures: Default::default(),
            ignored: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            gate: birth.gate,
            draining: AtomicBool::new(false),
            meta: ArcSwap::from_pointee(birth.meta),
            limit: Limit::new(model.adaptive.as_ref()),
            reported: Reported::new(),
            model: Arc::clone(model),
            observer: birth.observer,
        }
    }

    /// A number unique to this endpoint within its balancer, never reused.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// XXH64 (seed 0) of the endpoint key's `Hash` output: the endpoint's
    /// position input for the hash pickers, the same in every process.
    pub fn key_hash(&self) -> u64 {
        self.key_hash
    }

    /// How health events, `tracing` and metrics name this endpoint: its
    /// key's label (see [`Builder::labels`](crate::balance::Builder::labels)).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The adaptive concurrency limit: requests this endpoint may have in
    /// flight (see [`AdaptiveConcurrency`](super::AdaptiveConcurrency));
    /// `None` while the balancer has no adaptive limits.
    pub fn concurrency_limit(&self) -> Option<f64> {
        let l = self.limit.get();
        l.is_finite().then_some(l)
    }

    /// The in-flight count at which this endpoint takes no more calls under
    /// its adaptive limit (`in_flight < limit` admits): `ceil(limit)`.
    #[inline(always)]
    pub(crate) fn adaptive_cap(&self) -> usize {
        self.limit.get().ceil() as usize
    }

    /// Outlier-detection counters and ejection state.
    pub fn outlier(&self) -> &HostStats {
        &self.gate.outlier
    }

    /// Whether outlier detection has ejected this endpoint at `now`.
    pub fn is_ejected(&self, now: Instant) -> bool {
        self.gate.outlier.is_ejected(self.model.clock.nanos(now))
    }

    /// This endpoint's circuit breaker, when the balancer has breakers.
    #[inline(always)]
    pub fn breaker(&self) -> Option<&CircuitBreaker> {
        self.gate.guards.breaker.as_ref()
    }

    /// The endpoint's locality, priority and labels.
    pub fn meta(&self) -> Arc<EndpointMeta> {
        self.meta.load_full()
    }

    pub(crate) fn set_meta(&self, meta: EndpointMeta) {
        self.meta.store(Arc::new(meta));
    }

    /// Whether the endpoint is draining: it takes no new picks (unless no
    /// endpoint that is not draining is left) and its calls in flight finish.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub(crate) fn set_draining(&self, on: bool) {
        self.draining.store(on, Ordering::Relaxed);
    }

    /// Calls classified as failures.
    pub fn failures(&self) -> u64 {
        self.failures
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .sum()
    }

    /// Calls classified as failures, by kind, in the order of
    /// [`FailureKind::NAMES`].
    pub fn failures_by_kind(&self) -> [u64; FailureKind::NAMES.len()] {
        std::array::from_fn(|i| self.failures[i].load(Ordering::Relaxed))
    }

    /// The instant `now_ns` after the balancer's epoch.
    pub(crate) fn instant_at(&self, now_ns: u64) -> Instant {
        self.model.clock.at(now_ns)
    }

    /// The lanes in use, minus one (a power of two minus one).
    pub(crate) fn mask(&self) -> usize {
        self.more.len()
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
        f64::from_bits(self.hot.weight.load(Ordering::Relaxed)).abs()
    }

    /// Sets the weight, in every lane's copy.
    pub(crate) fn set_weight(&self, w: f64) {
        let w = lane_weight(w, self.ramp_start);
        for h in self.lanes() {
            h.weight.store(w.to_bits(), Ordering::Relaxed);
        }
    }

    /// The weight after slow start, at `now`.
    pub fn effective_weight(&self, now: Instant) -> f64 {
        self.view(0).weight_ns(self.model.clock.nanos(now))
    }

    /// How far into its ramp this endpoint is at `now_ns` (the window when it
    /// never ramped or has finished): what a re-insertion resumes from.
    pub(crate) fn ramp_elapsed_ns(&self, now_ns: u64) -> u64 {
        let Some(ss) = &self.model.slow_start else {
            return 0;
        };
        match self.ramp_start {
            NO_RAMP => ss.window_ns(),
            start => now_ns.saturating_sub(start).min(ss.window_ns()),
        }
    }

    /// The latency estimate projected to `now` (decay applied, nothing
    /// written): the estimate of the lane sampled last.
    pub fn estimate(&self, now: Instant) -> Estimate {
        reading(
            self,
            self.freshest(),
            self.model.clock.nanos(now),
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

/// A pool of endpoints is a pool of outlier hosts to the detector.
impl AsRef<HostStats> for Arc<EndpointState> {
    fn as_ref(&self) -> &HostStats {
        self.outlier()
    }
}

impl std::fmt::Debug for EndpointState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointState")
            .field("id", &self.id)
            .field("label", &self.label)
            .field("in_flight", &self.in_flight())
            .field("weight", &self.weight())
            .field("requests", &self.requests())
            .field("failures", &self.failures())
            .field("draining", &self.is_draining())
            .finish_non_exhaustive()
    }
}
