//! The guards, and why no endpoint could take a call.
//!
//! A guard is what an endpoint carries, besides its health bits, that can
//! refuse a call: today its circuit breaker. Each guard has its settings in
//! [`GuardSettings`], its state in a field of
//! [`model::Gate`](crate::model::Gate), and its rules in [`Guards`]: how
//! it admits a call, whether a pick may consider the endpoint, what a
//! finished call tells it, and how its refusal is counted. A new guard (a
//! per-endpoint rate limit, say) is a block in each of them here, and a
//! field in the gate.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::admit::Route;
use super::admit::Terms;
use super::census::{CHECK, EJECTED};
use crate::breaker::{CircuitBreaker, CircuitBreakerConfig, Ticket, Transition};
use crate::error::{Error, Unavailable};
use crate::model::{EndpointState, Gate};
use crate::outcome::Outcome;

/// The guards' settings, as the builder collects them: a field per guard.
#[derive(Debug, Clone, Default)]
pub(crate) struct GuardSettings {
    /// Per-endpoint circuit breakers.
    pub(crate) breaker: Option<CircuitBreakerConfig>,
}

impl GuardSettings {
    /// Whether any guard is on (then endpoints can be unhealthy).
    pub(crate) fn any(&self) -> bool {
        self.breaker.is_some()
    }

    /// The state of a new endpoint's gate: its guards as these settings
    /// make them, with `on_breaker` hearing its breaker's transitions.
    pub(crate) fn gate(&self, on_breaker: impl Fn(Transition) + Send + Sync + 'static) -> Gate {
        let breaker = self
            .breaker
            .clone()
            .map(|cfg| CircuitBreaker::new(cfg).on_transition(on_breaker));
        Gate {
            guarded: breaker.is_some(),
            breaker,
            ..Gate::default()
        }
    }
}

/// What a call admitted by the guards must give back when it ends: today
/// the breaker's ticket (the state period that admitted it and its probe
/// slot). Opaque to everyone but the guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass(Ticket);

/// One endpoint's guards, as admission works them: each guard's rules, a
/// block per guard in each method.
#[derive(Clone, Copy)]
pub(crate) struct Guards<'a>(pub(crate) &'a Gate);

impl Guards<'_> {
    /// Asks the guards to admit one call at `now`: `Ok(None)` without a
    /// guard that gives passes (nothing to give back), the call's pass when
    /// they admit it, `Err` when one refuses.
    #[inline]
    pub(crate) fn admit(self, now: Instant) -> Result<Option<Pass>, ()> {
        match &self.0.breaker {
            Some(b) => b.acquire_ticket(now).map(|t| Some(Pass(t))).map_err(drop),
            None => Ok(None),
        }
    }

    /// Whether a pick may consider the endpoint at `now`. An overdue probe
    /// is let through to the admission, which moves the breaker back to
    /// open (and refuses): a breaker never stays half-open on a probe that
    /// never answers.
    #[inline]
    pub(crate) fn permit(self, now: Instant) -> bool {
        self.0
            .breaker
            .as_ref()
            .is_none_or(|b| b.is_call_permitted(now) || b.is_probe_overdue(now))
    }

    /// Reports how the call `pass` admitted ended.
    pub(crate) fn record(self, pass: Pass, outcome: Outcome, latency: Duration, now: Instant) {
        if let Some(b) = &self.0.breaker {
            b.record_ticket(pass.0, outcome, latency, now);
        }
    }

    /// Gives back what the call `pass` admitted holds (a half-open probe's
    /// slot), for a call that will not be reported.
    pub(crate) fn release(self, pass: Pass) {
        if let Some(b) = &self.0.breaker {
            b.release_ticket(pass.0);
        }
    }

    /// Counts in `u` why the guards refuse a call at `now`, with the time
    /// until they admit one again; false when none refuses.
    fn count_refusal(self, now: Instant, u: &mut Unavailable) -> bool {
        let Some(b) = self
            .0
            .breaker
            .as_ref()
            .filter(|b| !b.is_call_permitted(now))
        else {
            return false;
        };
        u.breaker_open += 1;
        if let Some(t) = b.time_until_permitted(now) {
            u.retry_in = Some(u.retry_in.map_or(t, |r| r.min(t)));
        }
        true
    }
}

/// Why no endpoint of `states` took the call, counted once per endpoint:
/// `Overloaded` when every endpoint is at its cap (fixed or adaptive), else
/// `AllUnavailable` with the reasons and the time until the first guard
/// admits again. O(n); only on a refusal.
pub(crate) fn explain<E>(states: &[Arc<EndpointState>], terms: &Terms<'_>) -> Error<E> {
    let mut u = Unavailable::default();
    let soft = terms.route != Route::Panic;
    for s in states {
        let bits = s.health_bits();
        if terms.cap.reached(s) {
            u.capped += 1;
        } else if soft && bits & EJECTED != 0 {
            u.ejected += 1;
        } else if soft && bits & CHECK != 0 {
            u.failing_checks += 1;
        } else if !Guards(&s.gate).count_refusal(terms.now, &mut u) {
            u.other += 1;
        }
    }
    if u.capped == states.len() {
        Error::Overloaded
    } else {
        Error::AllUnavailable(u)
    }
}
