//! Admission: one home for a call's life. It decides, in one place,
//! whether an endpoint may take a call and why not, and it holds the call's
//! slot from then until the call ends.
//!
//! * **The census** ([`census`]): each endpoint's health bits (ejected,
//!   failing its active check, a guard refusing: its breaker not closed) and how many endpoints are
//!   unhealthy, each counted once whatever its reasons. Per pick, O(1): a
//!   [`Route`] (every endpoint healthy, some not, or panic), the panic
//!   decision being the health owner's.
//! * **A pick** ([`admit`]): how health restricts it (the census read
//!   once), which candidates it may choose ([`Terms::admits`], what pickers
//!   ask through [`Pool::is_available`](crate::pick::Pool::is_available)),
//!   and taking the chosen one's in-flight slot and its guards' pass
//!   ([`admit()`]).
//! * **The guards** ([`crate::guard`]): each guard's rules, in a file of
//!   its own and one line of the guards' list (the circuit breaker today);
//!   admission asks them through the endpoint's
//!   [`GuardSet`](crate::guard::GuardSet), which the endpoint's
//!   [`Gate`](crate::model::Gate) stores. The list sits below this module
//!   and the model, so that neither imports the other for it.
//! * **Refusals** ([`explain`]): why no endpoint could take a call.
//! * **The call** ([`inflight`]): [`InFlight`] holds the slot until the
//!   call ends, fails, times out or is dropped, then records it in the
//!   endpoint model, tells the guards and, when it judges every call, the
//!   health owner; [`Completion`] holds it past the answer until the
//!   response body ends.
//!
//! Pickers, the route step and the health owner ask this module; none
//! decides alone. The health owner ([`crate::health`]) keeps the slow path:
//! judging finished calls for outlier ejection, events, the panic decision,
//! active checks; it writes what it decides here ([`Census::set_bit`]).
//! The endpoint model ([`crate::model`]) stores the gate and never reads
//! it.

mod admit;
mod census;
mod explain;
mod inflight;

use std::time::Duration;

pub use inflight::{Completion, InFlight};

#[cfg(test)]
pub(crate) use admit::{Cap, Lane};
pub(crate) use admit::{CapCell, Lanes, Route, Terms, admit};
pub(crate) use census::{CHECK, Census, EJECTED};
pub(crate) use explain::explain;

use crate::model::EndpointState;
use crate::outcome::Outcome;

/// The health owner, as the census sees it: the slow path a pick calls
/// into when there is something to decide.
pub(crate) trait Owner {
    /// The earliest ejection end recorded in the census has passed at
    /// `now_ns`: return the endpoints whose ejection is over (through
    /// [`Census::clear_returned`]).
    fn returns_due(&self, now_ns: u64);

    /// The panic decision: how picks treat health with `unhealthy` of the
    /// `counted` endpoints unhealthy; `Err(())` fails the pick (panic with
    /// `FailFast`).
    fn route(&self, unhealthy: usize, counted: usize) -> Result<Route, ()>;
}

/// Who judges every finished call (the health owner, when outlier
/// detection is on): the call's guards have been told already.
pub(crate) trait Judge: Send + Sync + std::fmt::Debug + 'static {
    /// A call on `state` ended with `outcome` after `latency`, at `now_ns`
    /// since the epoch (the latency model has recorded it already).
    fn finished(&self, state: &EndpointState, outcome: &Outcome, latency: Duration, now_ns: u64);
}
