//! Permits: the right to make one call, and the duty to report it.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::CircuitBreaker;
use crate::outcome::{FailureKind, Outcome};

/// What dropping an unrecorded permit does: a call dropped inside
/// [`balance::timed_out`](crate::balance::timed_out) (a retry layer's
/// per-try timeout, for one) failed with a timeout; any other drop gave up,
/// and only frees its probe slot.
fn settle_dropped(breaker: &CircuitBreaker, ticket: Ticket, admitted: Instant) {
    if crate::scope::dropping_timed_out() {
        let now = Instant::now();
        let latency = crate::time::elapsed(admitted, now);
        breaker.record_ticket(ticket, Outcome::Failure(FailureKind::Timeout), latency, now);
    } else {
        breaker.release_ticket(ticket);
    }
}

/// What the breaker needs to know about an admitted call: the state period
/// (generation) that admitted it, and its probe slot when it is a probe.
///
/// A bare ticket does not release its slot when dropped: the owner must
/// pass it to [`CircuitBreaker::record_ticket`] or
/// [`CircuitBreaker::release_ticket`]. [`Permit`] and [`OwnedPermit`] do
/// that for you; the ticket API exists for owners that already hold the
/// breaker through another `Arc` (the balancer's per-endpoint state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub(crate) generation: u64,
    pub(crate) probe: Option<u64>,
}

/// Permission for one call, borrowed from a [`CircuitBreaker`]: a
/// [`PermitOf`] holding `&CircuitBreaker`.
///
/// Report the call with [`record`](PermitOf::record). Dropping the permit
/// unrecorded (the caller gave up) records nothing and, for a half-open
/// probe, frees its slot for another caller; dropped inside
/// [`balance::timed_out`](crate::balance::timed_out), it records a
/// `Timeout` failure (a timed-out probe is a failed probe).
pub type Permit<'a> = PermitOf<&'a CircuitBreaker>;

/// Like [`Permit`], but owning an `Arc` of its breaker, so it can live in a
/// response future. From [`CircuitBreaker::try_acquire_owned`].
pub type OwnedPermit = PermitOf<Arc<CircuitBreaker>>;

/// A permit for one call, holding its breaker through `B` (a reference for
/// [`Permit`], an `Arc` for [`OwnedPermit`]): one type, so recording,
/// probing and the drop rule are written once.
#[must_use = "dropping a permit records nothing; call `record` when the call completes"]
pub struct PermitOf<B: Deref<Target = CircuitBreaker>> {
    breaker: B,
    ticket: Option<Ticket>,
    admitted: Instant,
}

impl<B: Deref<Target = CircuitBreaker>> PermitOf<B> {
    pub(crate) fn new(breaker: B, ticket: Ticket, admitted: Instant) -> Self {
        Self {
            breaker,
            ticket: Some(ticket),
            admitted,
        }
    }

    /// Records the call's outcome and latency, measured up to `now`.
    ///
    /// Cost: one atomic load, plus an uncontended lock in the closed and
    /// half-open states. A call admitted in an earlier state period (the
    /// breaker has changed state since) is not counted.
    pub fn record(mut self, outcome: Outcome, latency: Duration, now: Instant) {
        if let Some(t) = self.ticket.take() {
            self.breaker.record_ticket(t, outcome, latency, now);
        }
    }

    /// True when this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.is_some_and(|t| t.probe.is_some())
    }

    /// The breaker this permit came from.
    pub fn breaker(&self) -> &B {
        &self.breaker
    }
}

impl<B: Deref<Target = CircuitBreaker>> Drop for PermitOf<B> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            settle_dropped(&self.breaker, t, self.admitted);
        }
    }
}

impl<B: Deref<Target = CircuitBreaker>> fmt::Debug for PermitOf<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("probe", &self.is_probe())
            .finish()
    }
}
