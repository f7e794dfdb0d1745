//! The endpoint model: what an endpoint is like, learned from the calls it
//! takes. Pure: it knows nothing of admission or health.
//!
//! Every part of the crate (pickers, admission, breakers, ejection,
//! metrics, the lab) reads an endpoint's [`EndpointState`]; nothing keeps a
//! second copy of "how is endpoint i doing". All fields change in place
//! through atomics: a pick reads them without locks, a response writes them
//! without locks.
//!
//! * **The record** ([`state`]): identity, counters, placement, and what
//!   [admission](crate::admission) keeps on the endpoint ([`Gate`]), which
//!   the model stores and never reads.
//! * **The request path** ([`lanes`]): the in-flight count, the latency
//!   estimate and the parallelism, one cache line per lane, and the reads a
//!   pick makes and the record a call's end writes.
//! * **Latency:** peak-EWMA with a spread term, decay while idle, a failure
//!   ratio, staleness and the failed endpoint's probe ([`ewma`]), and the
//!   parallelism the endpoint shows without queueing ([`parallelism`]).
//! * **Placement:** weight, slow-start ramp ([`slow_start`]),
//!   [`EndpointMeta`] (locality, priority, labels), draining.
//! * **Reported load** ([`reported`]): the endpoint's last
//!   [ORCA load report](crate::orca), trusted for a bounded time.
//! * **Limits** ([`limit`]): with [`AdaptiveConcurrency`], a limit on calls
//!   in flight learned from latency against the floor.
//!
//! Public names are re-exported by [`crate::endpoint`].

mod ewma;
mod lanes;
mod limit;
mod meta;
mod parallelism;
mod reported;
mod slow_start;
mod state;

use std::time::Duration;

pub use limit::{
    AdaptiveConcurrency, DEFAULT_GROWTH, DEFAULT_INITIAL_LIMIT, DEFAULT_MAX_LIMIT,
    DEFAULT_MIN_LIMIT, DEFAULT_SMOOTHING, DEFAULT_TOLERANCE, DROP_FACTOR, MAX_LIMIT,
};
pub use meta::{EndpointMeta, Locality};
pub use reported::ReportedLoad;
pub(crate) use slow_start::RampMemory;
pub use slow_start::{DEFAULT_AGGRESSION, DEFAULT_MIN_WEIGHT_PERCENT, MAX_MEMORY, SlowStart};
pub(crate) use state::{Birth, Gate};
pub use state::{EndpointState, Estimate};

pub(crate) use ewma::{Rates, stale_after};
pub(crate) use lanes::{View, current as current_lane, mask_for_cores};

use crate::outcome::Outcome;

/// Default decay time constant τ of the latency EWMA: 10 s, as in Finagle and
/// linkerd. Long enough to smooth bursts, short enough that a replica which
/// recovers (or an idle one) is re-explored within tens of seconds.
pub const DEFAULT_DECAY: Duration = Duration::from_secs(10);

/// Default time constant with which an endpoint's latency estimate follows
/// its samples while it takes calls: 1 s. Replicas slow down and recover on
/// the scale of seconds (noisy neighbours, GC, a batch job); with the 10 s
/// of [`DEFAULT_DECAY`] the estimate kept a slowdown's peak for about 10 s
/// after it ended. In the lab's open-loop `noisy-fleet` (20 replicas, a
/// quarter slowed 1–4× every 2 s, 10 clients, 0.9 load; sim, seeds 1–3)
/// the default's p99 went from 0.70 of tower's p2c + PeakEwma to 0.46 with
/// 1 s (0.52 with 2 s, 0.48 with 0.5 s), while the closed-loop scenarios
/// stayed within 3% or improved (`many-clients` p99 −14%, `streaming` p99
/// −39%). Idle endpoints still fade with [`DEFAULT_DECAY`], so a slow
/// replica is not re-explored more often than before.
pub const DEFAULT_SAMPLE_DECAY: Duration = Duration::from_secs(1);

/// Default latency assumed for an endpoint with no samples yet: 30 ms, linkerd's
/// default RTT for a new endpoint.
pub const DEFAULT_RTT: Duration = Duration::from_millis(30);

/// Default latency sample recorded for a failed call: 1 s. A failure must cost
/// more than any plausible success on an RPC path, so a fast-failing replica
/// looks slow; the estimate decays back with τ once it answers again.
pub const DEFAULT_FAILURE_PENALTY: Duration = Duration::from_secs(1);

/// Default time constant of the failure ratio: 2 s. Short, so that a replica
/// that dies is avoided within a few failures and one that recovers (or is
/// left alone) is probed again within seconds (1.5 of it, 3 s, after its
/// last failure; see [`Builder::failure_decay`](crate::balance::Builder::failure_decay));
/// a 10 s latency τ would keep a revived replica out for tens of seconds.
pub const DEFAULT_FAILURE_DECAY: Duration = Duration::from_secs(2);

/// The longest `Retry-After` hint that is turned into a latency penalty: 30 s.
pub const MAX_RETRY_AFTER_PENALTY: Duration = Duration::from_secs(30);

/// Settings shared by all endpoints of one balancer: the latency model's
/// time constants, penalties and limits.
pub(crate) struct Model {
    /// The balancer's epoch, and the request path's clock counting from
    /// it.
    pub(crate) clock: crate::time::Clock,
    pub(crate) rates: Rates,
    pub(crate) default_rtt_ns: f64,
    pub(crate) penalty_ns: f64,
    pub(crate) slow_start: Option<SlowStart>,
    /// How long a load report is trusted, in ns.
    pub(crate) report_expiry_ns: u64,
    /// Adaptive per-endpoint concurrency limits, when on.
    pub(crate) adaptive: Option<AdaptiveConcurrency>,
    /// The lanes each endpoint uses, minus one (see [`lanes`]): 0 with a
    /// cap or adaptive limits, which need the exact count.
    pub(crate) lane_mask: usize,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("rates", &self.rates)
            .field("default_rtt_ns", &self.default_rtt_ns)
            .field("penalty_ns", &self.penalty_ns)
            .field("slow_start", &self.slow_start)
            .field("report_expiry_ns", &self.report_expiry_ns)
            .field("adaptive", &self.adaptive)
            .finish_non_exhaustive()
    }
}

impl Model {
    /// Nanoseconds since the balancer's epoch (0 before it; saturating).
    #[inline]
    pub(crate) fn nanos(&self, t: tokio::time::Instant) -> u64 {
        self.clock.nanos(t)
    }
}

/// Per-endpoint observer for finished calls (metrics implement it), created
/// when the endpoint joins. The model never depends on who observes.
pub(crate) trait EndpointObserver: Send + Sync + 'static {
    /// One finished call, `Ignore`d ones included.
    fn finished(&self, outcome: Outcome, latency: Duration);
}
