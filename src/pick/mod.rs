//! Pickers: how [`Balance`](crate::Balance) chooses an endpoint for a request.
//!
//! A picker is two traits:
//!
//! * [`Picker`] holds what does not depend on the request: its name and the
//!   per-snapshot [`Picker::Table`] it precomputes whenever the endpoint set or
//!   a weight changes (a hash ring, a Maglev table, a weighted schedule).
//! * [`Pick<Req>`] chooses an index for one request, given a [`Pool`] that
//!   exposes the endpoints' live state.
//!
//! Adding a picker means one new file here (its module line and re-export
//! beside the others) and one line in the registry ([`AnyPicker`], in
//! `registry.rs`), which the lab, the benches and the tests iterate by
//! [`NAMES`]; a picker's registry name is its [`Picker::name`]. The registry
//! also serves applications that choose a picker from configuration:
//! `AnyPicker::by_name("ring_hash", key)?` is a picker like any other.
//!
//! Setters on pickers never fail; [`Balance::build`](crate::balance::Builder::build)
//! calls [`Picker::validate`] and names a bad field (`choices`, `vnodes`,
//! `table_size`, `bounded_load`, ...).
//!
//! | picker | rule |
//! |---|---|
//! | [`RoundRobin`] | next index, skipping unavailable endpoints |
//! | [`WeightedRoundRobin`] | smooth weighted round robin (precomputed stride schedule) |
//! | [`Random`] | weighted random |
//! | [`LeastInFlight`] | full scan, fewest in-flight per unit weight, random tie-break |
//! | [`P2cLeastInFlight`] | two weighted-random candidates, fewer in-flight wins |
//! | [`LeastResponseTime`] | full scan, lowest latency estimate (starves others; for comparison) |
//! | [`OrcaRoundRobin`] | smooth weighted round robin, weights from the endpoints' [load reports](crate::orca) (gRPC A58) |
//! | [`PeakEwma`] (default) | lowest `(est + k·spread)·(in_flight/p + 1) / (weight·(1−f)²)` among `choices` candidates (`p` learned parallelism, `f` failure ratio) |
//! | [`KeyHash`] | `hash(key) mod n`: request affinity, not consistent (the published study's IP hash) |
//! | [`RingHash`] | ketama-style ring, points per weight unit, optional bounded load |
//! | [`Maglev`] | prime-sized lookup table, O(1), optional bounded load |
//! | [`Prequal`] | probes random endpoints for requests in flight and expected latency; the lowest latency among the cold (RIF under a quantile), else the lowest RIF (needs [`probe::spawn`](crate::probe::spawn) and servers that answer probes) |

mod best_of;
pub mod hash;
pub mod key;
mod least_in_flight;
mod least_response_time;
mod orca_round_robin;
mod p2c_least_in_flight;
mod peak_ewma;
mod pool;
pub mod prequal;
mod random;
mod registry;
mod round_robin;
#[cfg(test)]
pub(crate) mod testing;
mod weighted_round_robin;

use std::sync::Arc;

pub use hash::{KeyHash, Maglev, RingHash};
#[cfg(feature = "http")]
pub use key::{ClientIp, ForwardedFor, Header, Path};
pub use key::{KeyFn, RequestKey, key_fn};
pub use least_in_flight::LeastInFlight;
pub use least_response_time::LeastResponseTime;
pub use orca_round_robin::{
    DEFAULT_BLACKOUT, DEFAULT_ERROR_PENALTY, DEFAULT_WEIGHT_UPDATE_PERIOD,
    MIN_WEIGHT_UPDATE_PERIOD, OrcaRoundRobin, WeightTable,
};
pub use p2c_least_in_flight::P2cLeastInFlight;
pub use peak_ewma::{DEFAULT_CHOICES, DEFAULT_SPREAD_FACTOR, DEFAULT_UTILIZATION_FADE, PeakEwma};
pub use pool::Pool;
pub use prequal::Prequal;
pub use random::Random;
pub use registry::{AnyPicker, AnyTable, NAMES};
pub use round_robin::RoundRobin;
pub use weighted_round_robin::{Schedule, WeightedRoundRobin};

pub use best_of::MAX_CHOICES;
pub(crate) use best_of::{Sampler, best_of_fraction, cost_key, key_winner};

use crate::model::EndpointState;

/// The request-independent half of a picker.
pub trait Picker: Send + Sync + 'static {
    /// Precomputed per endpoint-set snapshot; `()` for pickers that need none.
    type Table: Send + Sync + 'static;

    /// A short, stable name (`"peak_ewma"`), used in metrics and the lab.
    fn name(&self) -> &'static str;

    /// Builds the table for a new snapshot of the endpoint set. Called on
    /// every membership or weight change, never per request.
    fn table(&self, endpoints: &[Arc<EndpointState>]) -> Self::Table;

    /// Checks the picker's settings; [`Balance::build`](crate::balance::Builder::build)
    /// calls it, so a bad setting is a [`ConfigError`](crate::ConfigError)
    /// naming the field, not a panic or a silent clamp. Setters never fail.
    fn validate(&self) -> Result<(), crate::error::ConfigError> {
        Ok(())
    }

    /// The pool a probing picker's answers go to
    /// ([`Prequal`], filled by [`probe::spawn`](crate::probe::spawn));
    /// `None` (the default) for pickers that take no probes. A picker that
    /// wraps another passes it on.
    fn probe_pool(&self) -> Option<&Arc<prequal::ProbePool>> {
        None
    }
}

/// Chooses an endpoint for one request.
pub trait Pick<Req>: Picker {
    /// Returns the index of an available endpoint, or `None` when the
    /// picker finds none ([`Pool::is_available`] is false for all it tried).
    /// Must not panic for any pool, including an empty one.
    fn pick(&self, req: &Req, pool: &Pool<'_, Self::Table>) -> Option<usize>;

    /// The request's affinity key, for pickers that keep one (the hash
    /// pickers return their request key). The [route step](crate::route)
    /// then chooses the request's priority level and locality from it
    /// rather than at random, so a key stays in one routed set while the
    /// shares hold. Default: none.
    #[inline]
    fn affinity(&self, req: &Req) -> Option<u64> {
        let _ = req;
        None
    }
}
