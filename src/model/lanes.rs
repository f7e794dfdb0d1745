//! An endpoint's request path: the state a pick reads and a call's end
//! writes, one cache line per lane, and the reads and writes themselves.
//!
//! Every answered call writes its endpoint: the in-flight count twice, the
//! request count, the latency estimate and the parallelism (with the
//! excess fade's rate when the floor moves), and the reference count of
//! the guard that owns the endpoint. When two threads share one balancer,
//! each of those writes takes the line from the other core, and removing
//! any single write left the others to bounce the line; with none of
//! them, two threads moved as many requests as two separate balancers do
//! (measured write by write: see docs/performance.md).
//!
//! So each endpoint can keep its request-path state in up to [`LANES`]
//! lanes, one cache line each, where each thread picks and records in its
//! own lane (threads are numbered in the order they first pick, modulo
//! the lanes in use). A guard holds its lane through a per-lane handle
//! ([`Lane`](crate::admission::Lane)), so its reference count is on a line
//! of its own too.
//!
//! What a pick sees under a multi-threaded runtime is then what a balancer
//! per worker would see: the in-flight count, latency estimate and
//! parallelism of this thread's calls. Two things are not per thread:
//!
//! * **Failures** are written to every lane: a replica that fails is
//!   avoided by every thread after one failure, not one per thread, so a
//!   dead replica costs the same errors as with one lane.
//! * **Caps and adaptive limits** need the endpoint's exact count: a
//!   balancer with [`max_in_flight`](crate::balance::Builder::max_in_flight)
//!   or [`AdaptiveConcurrency`](super::AdaptiveConcurrency) uses one lane.
//!
//! Lanes are opt-in ([`per_thread_load`](crate::balance::Builder::per_thread_load)):
//! a thread that weighs only its own calls judges worse when they are few
//! (the lab's `many-clients` over HTTP with `--per-thread-load`). A pick
//! that read every lane's count instead, writing only its own, was tried:
//! reading the line the other core had just written cost as much as
//! sharing it (docs/performance.md).
//!
//! The public accessors ([`EndpointState::in_flight`],
//! [`requests`](EndpointState::requests), [`estimate`](EndpointState::estimate)
//! ...) merge the lanes: sums for the counts, the most recently sampled
//! lane for the estimate and parallelism, the lowest floor. Without
//! per-thread load there is one lane, as before lanes existed.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::ewma::{Ewma, Floor, Idle, PeakFade, Rates};
use super::parallelism::Parallelism;
use super::{EndpointState, Estimate, MAX_RETRY_AFTER_PENALTY};
use crate::outcome::{FailureKind, Outcome};
use crate::time::decay;

/// The most lanes an endpoint has: threads beyond it share lanes.
pub(crate) const LANES: usize = 8;

/// The floor latency of the parallelism estimate creeps up this many times
/// slower than the latency EWMA decays, so sustained queueing is not
/// mistaken for a slower replica.
const FLOOR_DECAY_FACTOR: f64 = 6.0;

/// The lanes a balancer uses, minus one (a power of two minus one): one
/// lane per core this process may run on, up to [`LANES`].
pub(crate) fn mask_for_cores() -> usize {
    static MASK: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MASK.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.min(LANES).next_power_of_two() - 1
    })
}

thread_local! {
    /// This thread's number, in the order threads first picked.
    static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The next thread's number.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The lane this thread uses, under a balancer whose lanes are `mask + 1`.
#[inline(always)]
pub(crate) fn current(mask: usize) -> usize {
    if mask == 0 {
        return 0;
    }
    INDEX.with(|c| {
        let i = c.get();
        if i != usize::MAX {
            i & mask
        } else {
            let i = NEXT.fetch_add(1, Ordering::Relaxed) & (usize::MAX >> 1);
            c.set(i);
            i & mask
        }
    })
}

/// The fields on the request path, kept to one 64-byte cache line: a pick
/// reads one line per candidate, and two threads picking over the same
/// endpoints bounce one line per endpoint rather than two or three.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Hot {
    pub(super) in_flight: AtomicUsize,
    pub(super) latency: Ewma,
    pub(super) parallelism: Parallelism,
    /// The excess fade's rate, written with the floor in `parallelism`.
    pub(super) peak_fade: PeakFade,
    /// The configured weight (`f64` bits), negated when the endpoint has a
    /// slow-start ramp: a pick learns from the word it reads anyway
    /// whether to look up the ramp's start ([`EndpointState::ramp_start`],
    /// off this line).
    pub(super) weight: AtomicU64,
    pub(super) requests: AtomicU64,
}

impl Hot {
    /// This lane's floor latency with its fade's rate.
    #[inline(always)]
    pub(super) fn floor(&self) -> Floor {
        Floor {
            ns: self.parallelism.floor(),
            fade: self.peak_fade.get(),
        }
    }
}

/// [`EndpointState::ramp_start`] of an endpoint that does not ramp.
pub(super) const NO_RAMP: u64 = u64::MAX;

const _: () = assert!(std::mem::size_of::<Hot>() == 64);

/// One endpoint as the picks of one lane see it, the lane's line looked
/// up once: a pick reads four of its fields per candidate, and looked up
/// per field, the lane's index was read back and the address recomputed
/// after every atomic load. The parallelism word (floor and parallelism)
/// is read once, here: the estimate's read needs the floor and the cost
/// the parallelism, and two atomic loads of one word stay two.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub(crate) state: &'a EndpointState,
    hot: &'a Hot,
    /// This lane's floor latency, with its fade's rate, and parallelism.
    floor: Floor,
    parallelism: f64,
}

impl View<'_> {
    /// Requests in flight in this lane.
    #[inline(always)]
    pub(crate) fn in_flight(self) -> usize {
        self.hot.in_flight.load(Ordering::Relaxed)
    }

    /// This lane's estimate with the decay left as a factor.
    #[inline(always)]
    pub(crate) fn estimate_idle(self, now_ns: u64, rates: Rates) -> Idle {
        read(self.state, self.hot, now_ns, rates, self.floor)
    }

    /// This lane's estimate as last written, without its fades (see
    /// [`Ewma::written`]).
    #[inline(always)]
    pub(crate) fn written_estimate(self) -> f64 {
        self.hot.latency.written()
    }

    /// This lane's parallelism.
    #[inline(always)]
    pub(crate) fn parallelism(self) -> f64 {
        self.parallelism
    }

    /// Calls this lane has recorded on the endpoint.
    #[inline(always)]
    pub(crate) fn samples(self) -> u64 {
        self.hot.requests.load(Ordering::Relaxed)
    }

    /// This lane's floor latency in ns (+∞ before its first success).
    #[inline(always)]
    pub(crate) fn floor_ns(self) -> f64 {
        self.floor.ns
    }

    /// The weight after slow start at `now_ns`, from this lane's copy.
    #[inline(always)]
    pub(crate) fn weight_ns(self, now_ns: u64) -> f64 {
        let w = f64::from_bits(self.hot.weight.load(Ordering::Relaxed));
        if w > 0.0 {
            w
        } else {
            -w * self.state.ramp_factor(now_ns)
        }
    }
}

impl EndpointState {
    /// Endpoint as lane `lane`'s picks see it.
    #[inline(always)]
    pub(crate) fn view(&self, lane: usize) -> View<'_> {
        let hot = self.lane(lane);
        let (ns, parallelism) = hot.parallelism.read();
        View {
            state: self,
            hot,
            floor: Floor {
                ns,
                fade: hot.peak_fade.get(),
            },
            parallelism,
        }
    }

    /// The lanes in use, lane 0 first.
    pub(super) fn lanes(&self) -> impl Iterator<Item = &Hot> {
        std::iter::once(&self.hot).chain(self.more.iter())
    }

    /// Calls that completed with an outcome other than `Ignore`.
    pub fn requests(&self) -> u64 {
        self.lanes()
            .map(|h| h.requests.load(Ordering::Relaxed))
            .sum()
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

    /// Lane `lane`'s line; lane 0 for a lane this endpoint does not have.
    #[inline(always)]
    pub(super) fn lane(&self, lane: usize) -> &Hot {
        // Lane 0 (every call of a balancer without per-thread load) does
        // not read `more`, which lies on the endpoint's next cache line.
        if lane == 0 {
            return &self.hot;
        }
        self.more.get(lane - 1).unwrap_or(&self.hot)
    }

    /// Lane `lane`'s estimate at `now_ns`, with the model's rates at hand
    /// (a pick carries them, saving a pointer chase per candidate).
    #[inline(always)]
    pub(crate) fn estimate_with(&self, now_ns: u64, rates: Rates, lane: usize) -> Estimate {
        reading(self, self.lane(lane), now_ns, rates)
    }

    /// The slow-start factor at `now_ns`, in `[0, 1]`: 1 when not
    /// ramping (told by lane `lane`'s weight, on the line a pick reads).
    #[inline(always)]
    pub(crate) fn ramp_ns(&self, now_ns: u64, lane: usize) -> f64 {
        if f64::from_bits(self.lane(lane).weight.load(Ordering::Relaxed)) > 0.0 {
            1.0
        } else {
            self.ramp_factor(now_ns)
        }
    }

    /// The slow-start factor of this endpoint's ramp at `now_ns`. Out of
    /// line: only endpoints that ramp come here.
    #[inline(never)]
    fn ramp_factor(&self, now_ns: u64) -> f64 {
        // `ramp_start` is only set when the model has slow start.
        self.model
            .slow_start
            .as_ref()
            .map_or(1.0, |ss| ss.factor(now_ns.saturating_sub(self.ramp_start)))
    }

    /// Takes one in-flight slot in lane `lane`, unless the endpoint already
    /// has `cap` (a capped balancer has one lane); returns the lane's count
    /// in flight with it.
    #[inline]
    pub(crate) fn take_slot(&self, cap: Option<usize>, lane: usize) -> Option<usize> {
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

    /// Gives an in-flight slot of lane `lane` back.
    #[inline]
    pub(crate) fn release(&self, lane: usize) {
        self.lane(lane).in_flight.fetch_sub(1, Ordering::Release);
    }

    /// Feeds one completed call into lane `lane`'s latency model;
    /// `concurrency` is the number of requests that were in flight in the
    /// lane when it was dispatched, itself included. A hard failure's
    /// penalty goes to every lane.
    pub(crate) fn record(
        &self,
        outcome: &Outcome,
        latency_ns: u64,
        now_ns: u64,
        concurrency: usize,
        lane: usize,
    ) {
        let lat = latency_ns as f64;
        let (sample, failed, success) = match *outcome {
            Outcome::Ignore => {
                self.ignored.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Outcome::Success => (lat, false, true),
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
                    (lat.max(penalty), true, false)
                } else {
                    (lat, false, false)
                }
            }
        };
        let hot = self.lane(lane);
        hot.requests.fetch_add(1, Ordering::Relaxed);
        let rates = self.model.rates;
        let dt = hot
            .latency
            .observe(sample, failed, now_ns, rates, hot.floor());
        if failed && !self.more.is_empty() {
            self.spread_failure(sample, now_ns, lane);
        }
        if success {
            let moved = hot.parallelism.observe(sample, concurrency, || {
                (
                    decay(dt, rates.latency),
                    decay(dt, rates.latency * (1.0 / FLOOR_DECAY_FACTOR)),
                )
            });
            if let Some(floor) = moved {
                hot.peak_fade.set(floor);
            }
            if let Some(cfg) = &self.model.adaptive {
                let floor = hot.parallelism.floor();
                self.limit.observe(cfg, sample, floor, concurrency);
            }
        }
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
fn read(state: &EndpointState, hot: &Hot, now_ns: u64, rates: Rates, floor: Floor) -> Idle {
    match hot.latency.read_answered(now_ns, rates, floor) {
        Some(e) => e,
        None => failed::read_failed(state, hot, now_ns, rates, floor),
    }
}

/// A lane's estimate at `now_ns`.
#[inline(always)]
pub(super) fn reading(state: &EndpointState, hot: &Hot, now_ns: u64, rates: Rates) -> Estimate {
    let r = read(state, hot, now_ns, rates, hot.floor());
    Estimate {
        mean_ns: r.est * r.weight,
        spread_ns: r.spread * r.weight,
        failure_rate: r.failure,
    }
}

mod failed;
#[cfg(test)]
mod tests;
