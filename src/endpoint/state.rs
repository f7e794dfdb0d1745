//! [`EndpointState`]: one endpoint's live state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};

use arc_swap::ArcSwap;
use tokio::time::Instant;

#[cfg(test)]
use super::InFlight;
use super::ewma::{Ewma, decay};
use super::lanes::LANES;
use super::limit::Limit;
use super::parallelism::Parallelism;
use super::reported::Reported;
use super::{EndpointMeta, EndpointObserver, MAX_RETRY_AFTER_PENALTY, Model};
use crate::guards::Guards;
use crate::outcome::{FailureKind, Outcome};

/// The floor latency of the parallelism estimate creeps up this many times
/// slower than the latency EWMA decays, so sustained queueing is not
/// mistaken for a slower replica.
const FLOOR_DECAY_FACTOR: f64 = 6.0;

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

// The bits of an endpoint's health word: why the health owner counts it
// unhealthy. The endpoint stores and reads them; the owner writes them.

/// The endpoint's circuit breaker is not closed (open, half-open, forced).
pub(crate) const BREAKER: u8 = 1;
/// Outlier detection ejected it.
pub(crate) const EJECTED: u8 = 2;
/// Its active health check fails.
pub(crate) const CHECK: u8 = 4;
/// The reasons panic routing sets aside: ejection and failing checks are
/// the balancer's own judgement, which it distrusts when too few endpoints
/// pass it. An open breaker is the user's hard rule and still refuses.
pub(crate) const SOFT: u8 = EJECTED | CHECK;

/// Live state of one endpoint: in-flight count, weight, latency and outcome
/// counters, placement, and the inputs of its health.
#[repr(C)]
pub struct EndpointState {
    /// Everything a pick reads and a response writes, in one cache line:
    /// lane 0 (see [`lanes`](super::lanes)).
    pub(super) hot: Hot,
    /// Lanes 1 and up, with per-thread load (empty without). Apart, so
    /// that an endpoint without them is as small as before lanes: eight
    /// lanes inline made every endpoint 512 bytes longer, and the default
    /// picker over 1024 endpoints 19–28 ns slower per request.
    pub(super) more: Box<[Hot]>,
    id: u64,
    key_hash: u64,
    /// How events and metrics name the endpoint.
    label: Box<str>,
    /// Calls classified as failures, by [`FailureKind::index`].
    failures: [AtomicU64; FailureKind::NAMES.len()],
    /// Completed calls classified `Ignore`.
    ignored: AtomicU64,
    /// Calls dropped before they ended (cancelled, lost hedges).
    abandoned: AtomicU64,
    /// The breaker and outlier counters, for the health owner only (see
    /// [`crate::guards`]).
    guards: Guards,
    /// Reasons the health owner counts this endpoint unhealthy (bit set).
    health_bits: AtomicU8,
    /// Whether the endpoint is in the set the health census counts.
    counted: AtomicBool,
    /// Takes no new picks while set; in-flight calls finish.
    draining: AtomicBool,
    meta: ArcSwap<EndpointMeta>,
    /// The adaptive concurrency limit (+∞ while limits are off).
    limit: Limit,
    /// What the endpoint reported about its own load.
    pub(super) reported: Reported,
    pub(super) model: Arc<Model>,
    pub(super) observer: Option<Box<dyn EndpointObserver>>,
}

/// The fields on the request path, kept to one 64-byte cache line: a pick
/// reads one line per candidate, and two threads picking over the same
/// endpoints bounce one line per endpoint rather than two or three.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Hot {
    pub(super) in_flight: AtomicUsize,
    pub(super) latency: Ewma,
    pub(super) parallelism: Parallelism,
    pub(super) weight: AtomicU64,
    /// Start of this endpoint's slow-start ramp (ns since epoch);
    /// `NO_RAMP` when it has none (read in `slow_start.rs`).
    pub(super) ramp_start: u64,
    pub(super) requests: AtomicU64,
}

pub(super) const NO_RAMP: u64 = u64::MAX;

const _: () = assert!(std::mem::size_of::<Hot>() == 64);

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
    pub(crate) guards: Guards,
    pub(crate) observer: Option<Box<dyn EndpointObserver>>,
}

impl EndpointState {
    pub(crate) fn new(birth: Birth, model: &Arc<Model>, now: Instant) -> Self {
        let now_ns = model.nanos(now);
        let ramp_start = match birth.ramp_start {
            Some(start) if model.slow_start.is_some() => start.min(NO_RAMP - 1),
            _ => NO_RAMP,
        };
        let lane = || Hot {
            in_flight: AtomicUsize::new(0),
            latency: Ewma::new(model.default_rtt_ns, now_ns),
            parallelism: Parallelism::new(),
            weight: AtomicU64::new(birth.weight.to_bits()),
            ramp_start,
            requests: AtomicU64::new(0),
        };
        Self {
            hot: lane(),
            more: (0..model.lane_mask.min(LANES - 1))
                .map(|_| lane())
                .collect(),
            id: birth.id,
            key_hash: birth.key_hash,
            label: birth.label,
            failures: Default::default(),
            ignored: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            guards: birth.guards,
            health_bits: AtomicU8::new(0),
            counted: AtomicBool::new(false),
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

    /// The endpoint's guards (breaker, outlier counters), for the health
    /// owner: its public readers (`breaker`, `outlier`, `is_ejected`) are
    /// written there.
    #[inline(always)]
    pub(crate) fn guards(&self) -> &Guards {
        &self.guards
    }

    /// Nanoseconds from the balancer's epoch to `now`.
    #[inline]
    pub(crate) fn nanos(&self, now: Instant) -> u64 {
        self.model.nanos(now)
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

    /// Whether the endpoint fails its active health check
    /// ([`crate::check`]): it then takes no picks outside panic routing.
    pub fn is_failing_check(&self) -> bool {
        self.health_bits() & CHECK != 0
    }

    /// Whether the health owner counts this endpoint unhealthy: its breaker
    /// is not closed, it is ejected, or it fails its active check (each
    /// endpoint counts once toward the panic threshold, whatever the reasons).
    pub fn is_unhealthy(&self) -> bool {
        self.health_bits() != 0
    }

    /// The reasons the health owner counts this endpoint unhealthy, as bits.
    #[inline(always)]
    pub(crate) fn health_bits(&self) -> u8 {
        self.health_bits.load(Ordering::Relaxed)
    }

    /// Sets the health bits (the health owner's lock held).
    pub(crate) fn set_health_bits(&self, bits: u8) {
        self.health_bits.store(bits, Ordering::Relaxed);
    }

    /// Whether the health census counts this endpoint.
    pub(crate) fn is_counted(&self) -> bool {
        self.counted.load(Ordering::Relaxed)
    }

    /// Enters or leaves the census (the health owner's lock held).
    pub(crate) fn set_counted(&self, on: bool) {
        self.counted.store(on, Ordering::Relaxed);
    }

    /// Calls that completed with an outcome other than `Ignore`.
    pub fn requests(&self) -> u64 {
        self.lanes()
            .map(|h| h.requests.load(Ordering::Relaxed))
            .sum()
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

    /// Times the balancer picked this endpoint and dispatched a call to it:
    /// calls completed (whatever their outcome), dropped before an answer,
    /// and in flight. Derived from those counters, so counting picks costs
    /// the request path nothing.
    pub fn picks(&self) -> u64 {
        // The in-flight count is released after the completion counters are
        // bumped: read it first (acquire) so the sum never goes backwards.
        let in_flight: u64 = self
            .lanes()
            .map(|h| h.in_flight.load(Ordering::Acquire) as u64)
            .sum();
        in_flight
            + self.requests()
            + self.ignored.load(Ordering::Relaxed)
            + self.abandoned.load(Ordering::Relaxed)
    }

    /// Takes one in-flight slot in lane 0, unless the endpoint already has
    /// `cap` (a guard with no call started: pickers' tests load endpoints
    /// with it).
    #[cfg(test)]
    pub(crate) fn try_acquire(self: &Arc<Self>, cap: Option<usize>) -> Option<InFlight> {
        let concurrency = self.take_slot(cap, 0)?;
        Some(InFlight::new(
            super::Lane::new(Arc::clone(self), 0),
            concurrency,
        ))
    }

    /// Takes one in-flight slot in lane `lane`, unless the endpoint already
    /// has `cap` (a capped balancer has one lane); returns the lane's count
    /// in flight with it.
    #[inline]
    pub(super) fn take_slot(&self, cap: Option<usize>, lane: usize) -> Option<usize> {
        let hot = self.lane(lane);
        let before = match cap {
            None => hot.in_flight.fetch_add(1, Ordering::Relaxed),
            Some(cap) => hot
                .in_flight
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n < cap).then_some(n + 1)
                })
                .ok()?,
        };
        Some(before + 1)
    }

    /// The instant `now_ns` after the balancer's epoch.
    pub(crate) fn instant_at(&self, now_ns: u64) -> Instant {
        self.model.epoch.at(now_ns)
    }

    /// Gives an in-flight slot of lane `lane` back.
    #[inline]
    pub(super) fn release(&self, lane: usize) {
        self.lane(lane).in_flight.fetch_sub(1, Ordering::Release);
    }

    /// Counts a call dropped before it ended and records how long it had
    /// waited as a lower bound on the latency: an endpoint that never
    /// answers has its calls cut and must not look idle and fast.
    pub(super) fn record_abandoned(&self, waited_ns: u64, now_ns: u64, lane: usize) {
        self.abandoned.fetch_add(1, Ordering::Relaxed);
        let hot = self.lane(lane);
        hot.latency.observe_lower_bound(
            waited_ns as f64,
            now_ns,
            self.model.rates,
            hot.parallelism.floor(),
        );
    }

    /// Feeds one completed call into lane `lane`'s latency model;
    /// `concurrency` is the number of requests that were in flight in the
    /// lane when it was dispatched, itself included. A hard failure's
    /// penalty goes to every lane (see [`lanes`](super::lanes)).
    pub(crate) fn record(
        &self,
        outcome: &Outcome,
        latency_ns: u64,
        now_ns: u64,
        concurrency: usize,
        lane: usize,
    ) {
        let lat = latency_ns as f64;
        let (sample, failed) = match *outcome {
            Outcome::Ignore => {
                self.ignored.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Outcome::Success => (lat, false),
            Outcome::Failure(kind) => {
                self.failures[kind.index()].fetch_add(1, Ordering::Relaxed);
                if let (Some(cfg), FailureKind::Timeout | FailureKind::Overloaded { .. }) =
                    (&self.model.adaptive, kind)
                {
                    self.limit.dropped(cfg);
                }
                if kind.is_hard() {
                    let penalty = kind.retry_after().map_or(self.model.penalty_ns, |d| {
                        crate::time::nanos(d.min(MAX_RETRY_AFTER_PENALTY)) as f64
                    });
                    (lat.max(penalty), true)
                } else {
                    (lat, false)
                }
            }
        };
        let hot = self.lane(lane);
        hot.requests.fetch_add(1, Ordering::Relaxed);
        let rates = self.model.rates;
        let dt = hot
            .latency
            .observe(sample, failed, now_ns, rates, hot.parallelism.floor());
        if failed && !self.more.is_empty() {
            self.spread_failure(sample, now_ns, lane);
        }
        if *outcome == Outcome::Success {
            hot.parallelism.observe(sample, concurrency, || {
                (
                    decay(dt, rates.latency),
                    decay(dt, rates.latency * (1.0 / FLOOR_DECAY_FACTOR)),
                )
            });
            if let Some(cfg) = &self.model.adaptive {
                let floor = hot.parallelism.floor();
                self.limit.observe(cfg, sample, floor, concurrency);
            }
        }
    }

    /// Writes a hard failure's penalty `sample` into the lanes other than
    /// `lane`: a failing replica is avoided by every thread after one
    /// failure. Out of line: failures are rare, and the request path's
    /// success stays small.
    #[inline(never)]
    fn spread_failure(&self, sample: f64, now_ns: u64, lane: usize) {
        for (i, h) in self.lanes().enumerate() {
            if i != lane {
                let floor = h.parallelism.floor();
                h.latency
                    .observe(sample, true, now_ns, self.model.rates, floor);
            }
        }
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
