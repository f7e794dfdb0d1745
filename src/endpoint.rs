//! Endpoints: the one per-endpoint model of load, latency and outcomes, and
//! a call's slot on an endpoint from admission to its end.
//!
//! Every part of the crate (pickers, breakers, ejection, metrics, the lab)
//! reads an endpoint's [`EndpointState`]; nothing keeps a second copy of "how
//! is endpoint i doing". All fields change in place through atomics: a pick
//! reads them without locks, a response writes them without locks.
//!
//! * **Load:** requests in flight, held by an [`InFlight`] guard from
//!   dispatch until the call ends, fails, times out or is dropped; released
//!   exactly once.
//! * **Latency:** peak-EWMA with a spread term and decay while idle, a
//!   failure ratio, and the parallelism the endpoint shows without queueing
//!   (see [`PeakEwma`](crate::pick::PeakEwma) for how a pick uses them).
//! * **Placement:** weight, slow-start ramp, [`EndpointMeta`] (locality,
//!   priority, labels), draining.
//! * **Reported load:** the endpoint's last [ORCA load report](crate::orca),
//!   trusted for a bounded time, and A58's weight inputs.
//! * **Concurrency limit:** with [`AdaptiveConcurrency`], a limit on calls in
//!   flight learned from latency against the floor.
//! * **Health:** whether the endpoint may take a call (its circuit breaker,
//!   outlier ejection, its active check) is decided in one place, the
//!   balancer's admission; [`EndpointState::is_unhealthy`] and its
//!   neighbours show what it decided.
//!
//! How a finished call is recorded: the guard measures the latency, asks the
//! classifier for the outcome, feeds the latency model, then the endpoint's
//! guards (its breaker) and, when it judges calls, the
//! [health owner](crate::health) (outlier rules, events). A call the stack
//! times out (the balancer's own timeout, a retry layer's per-try timeout)
//! is a failure of kind [`Timeout`](crate::classify::FailureKind::Timeout);
//! a call its caller abandons (a dropped future, a lost hedge) records only
//! how long it waited, as a lower bound on the endpoint's latency.
//!
//! (The names here come from two places inside the crate: the endpoint
//! model, and admission, the one home of a call's life; see
//! `ARCHITECTURE.md`.)

pub use crate::admission::{Completion, InFlight};
pub use crate::model::{
    AdaptiveConcurrency, DEFAULT_AGGRESSION, DEFAULT_DECAY, DEFAULT_FAILURE_DECAY,
    DEFAULT_FAILURE_PENALTY, DEFAULT_GROWTH, DEFAULT_INITIAL_LIMIT, DEFAULT_MAX_LIMIT,
    DEFAULT_MIN_LIMIT, DEFAULT_MIN_WEIGHT_PERCENT, DEFAULT_RTT, DEFAULT_SAMPLE_DECAY,
    DEFAULT_SMOOTHING, DEFAULT_TOLERANCE, DROP_FACTOR, EndpointMeta, EndpointState, Estimate,
    Locality, MAX_LIMIT, MAX_MEMORY, MAX_RETRY_AFTER_PENALTY, ReportedLoad, SlowStart,
};
