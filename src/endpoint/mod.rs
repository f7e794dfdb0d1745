//! The one per-endpoint model of load, latency and outcomes.
//!
//! Every part of the crate (pickers, breakers, ejection, metrics, the lab)
//! reads an endpoint's [`EndpointState`]; nothing keeps a second copy of "how
//! is endpoint i doing". All fields change in place through atomics: a pick
//! reads them without locks, a response writes them without locks.

mod ewma;
pub(crate) mod health;
mod meta;
mod parallelism;
mod slow_start;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::time::Instant;

pub use health::{DEFAULT_PANIC_THRESHOLD, PanicMode};
pub use meta::{EndpointMeta, Locality};
pub use slow_start::SlowStart;

use crate::breaker::{CircuitBreaker, Ticket};
use crate::classify::Outcome;
use crate::outlier::HostStats;
use crate::rng::RngSource;
pub(crate) use ewma::Rates;
use ewma::{Ewma, decay};
use health::Health;
use parallelism::Parallelism;

/// The floor latency of the parallelism estimate creeps up this many times
/// slower than the latency EWMA decays, so sustained queueing is not
/// mistaken for a slower replica.
const FLOOR_DECAY_FACTOR: f64 = 6.0;

/// Default decay time constant τ of the latency EWMA: 10 s, as in Finagle and
/// linkerd. Long enough to smooth bursts, short enough that a replica which
/// recovers (or an idle one) is re-explored within tens of seconds.
pub const DEFAULT_DECAY: Duration = Duration::from_secs(10);

/// Default latency assumed for an endpoint with no samples yet: 30 ms, linkerd's
/// default RTT for a new endpoint.
pub const DEFAULT_RTT: Duration = Duration::from_millis(30);

/// Default latency sample recorded for a failed call: 1 s. A failure must cost
/// more than any plausible success on an RPC path, so a fast-failing replica
/// looks slow; the estimate decays back with τ once it answers again.
pub const DEFAULT_FAILURE_PENALTY: Duration = Duration::from_secs(1);

/// Default time constant of the failure ratio: 2 s. Short, so that a replica
/// that dies is avoided within a few failures and one that recovers (or is
/// left alone) is probed again within seconds; a 10 s latency τ would keep a
/// revived replica out for tens of seconds.
pub const DEFAULT_FAILURE_DECAY: Duration = Duration::from_secs(2);

/// The longest `Retry-After` hint that is turned into a latency penalty: 30 s.
pub const MAX_RETRY_AFTER_PENALTY: Duration = Duration::from_secs(30);

/// Settings shared by all endpoints of one balancer: the latency model, the
/// health rules and the random source.
#[derive(Debug)]
pub(crate) struct Model {
    pub(crate) epoch: Instant,
    pub(crate) rates: Rates,
    pub(crate) default_rtt_ns: f64,
    pub(crate) penalty_ns: f64,
    pub(crate) slow_start: Option<SlowStart>,
    pub(crate) health: Health,
    pub(crate) rng: RngSource,
}

impl Model {
    #[inline]
    pub(crate) fn nanos(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }
}

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

/// Live state of one endpoint: in-flight count, weight, latency and outcome
/// counters.
#[derive(Debug)]
#[repr(C)]
pub struct EndpointState {
    /// Everything a pick reads and a response writes, in one cache line.
    hot: Hot,
    id: u64,
    key_hash: u64,
    failures: AtomicU64,
    picks: AtomicU64,
    outlier: HostStats,
    breaker: Option<CircuitBreaker>,
    /// False once the endpoint has left the set (its breaker's transitions
    /// then no longer count toward the balancer's health census).
    live: Arc<AtomicBool>,
    /// Takes no new picks while set; in-flight calls finish.
    draining: AtomicBool,
    meta: ArcSwap<EndpointMeta>,
    model: Arc<Model>,
    /// Attribute sets and the duration histogram, when the balancer has metrics.
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::EndpointMetrics>,
}

/// The fields on the request path, kept to one 64-byte cache line: a pick
/// reads one line per candidate, and two threads picking over the same
/// endpoints bounce one line per endpoint rather than two or three.
#[derive(Debug)]
#[repr(C, align(64))]
struct Hot {
    in_flight: AtomicUsize,
    latency: Ewma,
    parallelism: Parallelism,
    weight: AtomicU64,
    /// Start of this endpoint's slow-start ramp (ns since epoch);
    /// `NO_RAMP` when it has none.
    ramp_start: u64,
    requests: AtomicU64,
}

const NO_RAMP: u64 = u64::MAX;

const _: () = assert!(std::mem::size_of::<Hot>() == 64);

impl EndpointState {
    pub(crate) fn new(
        id: u64,
        key_hash: u64,
        weight: f64,
        model: &Arc<Model>,
        now: Instant,
        ramp: bool,
    ) -> Self {
        let now_ns = model.nanos(now);
        let live = Arc::new(AtomicBool::new(true));
        let breaker = model.health.breaker.clone().map(|cfg| {
            CircuitBreaker::new(cfg).on_transition(health::count_transitions(model, &live))
        });
        Self {
            hot: Hot {
                in_flight: AtomicUsize::new(0),
                latency: Ewma::new(model.default_rtt_ns, now_ns),
                parallelism: Parallelism::new(),
                weight: AtomicU64::new(weight.to_bits()),
                ramp_start: if ramp && model.slow_start.is_some() {
                    now_ns
                } else {
                    NO_RAMP
                },
                requests: AtomicU64::new(0),
            },
            id,
            key_hash,
            failures: AtomicU64::new(0),
            picks: AtomicU64::new(0),
            outlier: HostStats::default(),
            breaker,
            live,
            draining: AtomicBool::new(false),
            meta: ArcSwap::from_pointee(EndpointMeta::default()),
            model: Arc::clone(model),
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// Attaches the endpoint's metrics (before it is shared).
    #[cfg(feature = "metrics")]
    pub(crate) fn with_metrics(mut self, metrics: crate::metrics::EndpointMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    #[cfg(feature = "metrics")]
    pub(crate) fn metrics(&self) -> Option<&crate::metrics::EndpointMetrics> {
        self.metrics.as_ref()
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

    /// Requests dispatched to this endpoint and not yet finished.
    #[inline(always)]
    pub fn in_flight(&self) -> usize {
        self.hot.in_flight.load(Ordering::Relaxed)
    }

    /// The configured weight.
    #[inline(always)]
    pub fn weight(&self) -> f64 {
        f64::from_bits(self.hot.weight.load(Ordering::Relaxed))
    }

    pub(crate) fn set_weight(&self, w: f64) {
        self.hot.weight.store(w.to_bits(), Ordering::Relaxed);
    }

    /// The weight after slow start, at `now_ns` (ns since the balancer's epoch).
    #[inline(always)]
    pub(crate) fn effective_weight_ns(&self, now_ns: u64) -> f64 {
        let w = self.weight();
        // `ramp_start` is only set when the model has slow start.
        match self.hot.ramp_start {
            NO_RAMP => w,
            start => match &self.model.slow_start {
                Some(ss) => w * ss.factor(now_ns.saturating_sub(start)),
                None => w,
            },
        }
    }

    /// The weight after slow start, at `now`.
    pub fn effective_weight(&self, now: Instant) -> f64 {
        self.effective_weight_ns(self.model.nanos(now))
    }

    #[inline(always)]
    pub(crate) fn estimate_ns(&self, now_ns: u64) -> Estimate {
        self.estimate_with(now_ns, self.model.rates)
    }

    /// [`estimate_ns`](Self::estimate_ns) with the model's rates already at
    /// hand (a pick carries them, saving a pointer chase per candidate).
    #[inline(always)]
    pub(crate) fn estimate_with(&self, now_ns: u64, rates: Rates) -> Estimate {
        let r = self.hot.latency.read(now_ns, rates);
        Estimate {
            mean_ns: r.est,
            spread_ns: r.spread,
            failure_rate: r.failure,
        }
    }

    /// The latency estimate projected to `now` (decay applied, nothing written).
    pub fn estimate(&self, now: Instant) -> Estimate {
        self.estimate_ns(self.model.nanos(now))
    }

    /// How many requests this endpoint appears to serve at once without
    /// queueing, learned from this balancer's own traffic (at least 1; see
    /// the `parallelism` notes in the crate docs of [`PeakEwma`](crate::pick::PeakEwma)).
    #[inline(always)]
    pub fn parallelism(&self) -> f64 {
        self.hot.parallelism.get()
    }

    /// The unloaded ("floor") latency the parallelism estimate is measured
    /// against; `None` before the first successful call.
    pub fn floor_latency(&self) -> Option<Duration> {
        let f = self.hot.parallelism.floor();
        f.is_finite().then(|| Duration::from_nanos(f as u64))
    }

    /// Outlier-detection counters and ejection state.
    pub fn outlier(&self) -> &HostStats {
        &self.outlier
    }

    /// Whether outlier detection has ejected this endpoint at `now`.
    pub fn is_ejected(&self, now: Instant) -> bool {
        self.outlier.is_ejected(self.model.nanos(now))
    }

    /// This endpoint's circuit breaker, when the balancer has breakers.
    pub fn breaker(&self) -> Option<&CircuitBreaker> {
        self.breaker.as_ref()
    }

    /// Whether a pick at `now_ns` may choose this endpoint as far as health
    /// goes (`ejection`: honour outlier ejection, off in panic routing).
    #[inline]
    pub(crate) fn is_pickable(&self, now: Instant, now_ns: u64, ejection: bool) -> bool {
        if ejection && self.outlier.is_ejected(now_ns) {
            return false;
        }
        self.breaker
            .as_ref()
            .is_none_or(|b| b.is_call_permitted(now))
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

    /// Marks the endpoint as gone from the set.
    pub(crate) fn retire(&self) {
        self.live.store(false, Ordering::Relaxed);
    }

    /// Calls that completed with an outcome other than `Ignore`.
    pub fn requests(&self) -> u64 {
        self.hot.requests.load(Ordering::Relaxed)
    }

    /// Calls classified as failures.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Times the balancer picked this endpoint and dispatched a call to it
    /// (calls later cancelled or classified `Ignore` included). Counted only
    /// when the balancer reports metrics (`Builder::metrics`): otherwise the
    /// request path skips the extra atomic add, and this stays 0.
    pub fn picks(&self) -> u64 {
        self.picks.load(Ordering::Relaxed)
    }

    /// Takes one in-flight slot, unless the endpoint already has `cap`, and
    /// a call permit from its breaker, unless the breaker refuses; counts
    /// the pick when both are granted.
    #[inline]
    pub(crate) fn try_dispatch(
        self: &Arc<Self>,
        cap: Option<usize>,
        now: Instant,
    ) -> Option<InFlight> {
        let mut guard = self.try_acquire(cap)?;
        if let Some(b) = &self.breaker {
            // On refusal the guard drops here and gives the slot back.
            guard.ticket = Some(b.acquire_ticket(now).ok()?);
        }
        #[cfg(feature = "metrics")]
        if self.metrics.is_some() {
            self.picks.fetch_add(1, Ordering::Relaxed);
        }
        Some(guard)
    }

    /// Takes one in-flight slot, unless the endpoint already has `cap`.
    #[inline]
    pub(crate) fn try_acquire(self: &Arc<Self>, cap: Option<usize>) -> Option<InFlight> {
        let before = match cap {
            None => self.hot.in_flight.fetch_add(1, Ordering::Relaxed),
            Some(cap) => self
                .hot
                .in_flight
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n < cap).then_some(n + 1)
                })
                .ok()?,
        };
        Some(InFlight {
            state: Arc::clone(self),
            concurrency: before + 1,
            ticket: None,
            start_ns: 0,
            pending: false,
        })
    }

    /// Feeds one completed call into the model; `concurrency` is the number
    /// of requests that were in flight when it was dispatched, itself included.
    pub(crate) fn record(
        &self,
        outcome: Outcome,
        latency_ns: u64,
        now_ns: u64,
        concurrency: usize,
    ) {
        let lat = latency_ns as f64;
        let (sample, failed) = match outcome {
            Outcome::Ignore => return,
            Outcome::Success => (lat, false),
            Outcome::Failure(kind) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                if kind.is_hard() {
                    let penalty = kind.retry_after().map_or(self.model.penalty_ns, |d| {
                        d.min(MAX_RETRY_AFTER_PENALTY).as_nanos() as u64 as f64
                    });
                    (lat.max(penalty), true)
                } else {
                    (lat, false)
                }
            }
        };
        self.hot.requests.fetch_add(1, Ordering::Relaxed);
        let rates = self.model.rates;
        let dt = self.hot.latency.observe(sample, failed, now_ns, rates);
        if outcome == Outcome::Success {
            self.hot.parallelism.observe(sample, concurrency, || {
                (
                    decay(dt, rates.latency),
                    decay(dt, rates.latency * (1.0 / FLOOR_DECAY_FACTOR)),
                )
            });
        }
    }
}

/// One in-flight request on an endpoint. Dropping it releases the slot, exactly
/// once, whether the call succeeded, failed, timed out or was abandoned.
#[derive(Debug)]
pub struct InFlight {
    state: Arc<EndpointState>,
    concurrency: usize,
    /// The breaker's permit for this call, when the endpoint has a breaker.
    ticket: Option<Ticket>,
    /// When the call was dispatched, in ns since the balancer's epoch.
    start_ns: u64,
    /// Dispatched and not completed: a drop now is an abandoned call.
    pending: bool,
}

impl InFlight {
    /// The endpoint this request is on.
    pub fn endpoint(&self) -> &Arc<EndpointState> {
        &self.state
    }

    /// Requests in flight on the endpoint when this one was dispatched,
    /// itself included.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Starts the call's clock (`now_ns` since the balancer's epoch).
    #[inline]
    pub(crate) fn started_at(mut self, now_ns: u64) -> Self {
        self.start_ns = now_ns;
        self.pending = true;
        self
    }

    /// Ends the call: measures its latency, asks `classify` for its outcome,
    /// records both in every part of the model (latency, breaker, outlier
    /// detection), then releases the slot.
    #[inline]
    pub(crate) fn finish(self, classify: impl FnOnce(Duration) -> Outcome) {
        let now = Instant::now();
        let now_ns = self.state.model.nanos(now);
        let latency_ns = now_ns.saturating_sub(self.start_ns);
        let latency = Duration::from_nanos(latency_ns);
        let outcome = classify(latency);
        self.complete(outcome, latency, now, now_ns);
    }

    fn complete(mut self, outcome: Outcome, latency: Duration, now: Instant, now_ns: u64) {
        self.pending = false;
        let state = &*self.state;
        state.record(outcome, latency.as_nanos() as u64, now_ns, self.concurrency);
        #[cfg(feature = "metrics")]
        if let Some(m) = &state.metrics {
            m.record(outcome, latency);
        }
        if let (Some(b), Some(t)) = (&state.breaker, self.ticket.take()) {
            b.record_ticket(t, outcome, latency, now);
        }
        let model = &*state.model;
        if let Some(o) = &model.health.outlier {
            if let Some(reason) = state.outlier.record(&o.cfg, outcome, latency, now_ns) {
                let pool = model.health.pool();
                let r = model.rng.next_u64();
                o.detector
                    .eject(&o.cfg, &pool, &state.outlier, reason, now_ns, r);
            }
            if o.detector.is_due(now_ns) {
                let pool = model.health.pool();
                let r = model.rng.next_u64();
                o.detector.maybe_evaluate(&o.cfg, &pool, now_ns, r);
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.pending {
            // Abandoned (a timeout, a lost hedge, a caller gone): not a
            // failure, but the endpoint took at least this long. Without it
            // an endpoint that never answers would have its calls cut by
            // per-try timeouts, record nothing, and look idle and fast.
            let state = &*self.state;
            let now_ns = state.model.nanos(Instant::now());
            let waited = now_ns.saturating_sub(self.start_ns) as f64;
            state
                .hot
                .latency
                .observe_lower_bound(waited, now_ns, state.model.rates);
        }
        if let (Some(b), Some(t)) = (&self.state.breaker, self.ticket.take()) {
            // Abandoned: frees a half-open probe slot, records nothing.
            b.release_ticket(t);
        }
        self.state.hot.in_flight.fetch_sub(1, Ordering::Release);
    }
}
