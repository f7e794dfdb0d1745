//! Admission: may this endpoint take this call, and why no endpoint could.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::Health;
use super::census::{CHECK, EJECTED, Route};
use crate::endpoint::{Cap, EndpointState, InFlight, Lane};
use crate::error::{Error, Refusal, Unavailable};

impl Health {
    /// Takes an in-flight slot on `state` in `lane`, its handle there
    /// (unless it is at its `cap`), and a permit
    /// from its breaker (unless the breaker refuses), and starts the call's
    /// clock. `None` when either is refused: the slot is given back.
    ///
    /// The breaker moves here as time says it must: an open breaker whose
    /// wait has elapsed turns half-open and this call becomes a probe; a
    /// half-open breaker whose probe is overdue opens again (and refuses),
    /// so a probe that never answers cannot hold the breaker half-open.
    #[inline]
    pub(crate) fn admit(
        &self,
        state: &EndpointState,
        lane: &Arc<Lane>,
        cap: Cap,
        now: Instant,
        now_ns: u64,
    ) -> Option<InFlight> {
        lane.start(state, cap.of(state), now_ns, |s| s.guards().admit(now))
    }

    /// Why no endpoint of `states` took the call, counted once per
    /// endpoint: `Overloaded` when every endpoint is at its cap (fixed or adaptive), else
    /// `AllUnavailable` with the reasons and the time until the first
    /// breaker admits a probe. O(n); only on a refusal.
    pub(crate) fn explain<E>(
        &self,
        states: &[Arc<EndpointState>],
        route: Route,
        cap: Cap,
        now: Instant,
    ) -> Error<E> {
        let mut u = Unavailable::default();
        let soft = route != Route::Panic;
        for s in states {
            let bits = s.health_bits();
            if cap.reached(s) {
                u.capped += 1;
            } else if soft && bits & EJECTED != 0 {
                u.ejected += 1;
            } else if soft && bits & CHECK != 0 {
                u.failing_checks += 1;
            } else if let Some(b) = s.breaker().filter(|b| !b.is_call_permitted(now)) {
                u.breaker_open += 1;
                if let Some(t) = b.time_until_permitted(now) {
                    u.retry_in = Some(u.retry_in.map_or(t, |r| r.min(t)));
                }
            } else {
                u.other += 1;
            }
        }
        if u.capped == states.len() {
            Error::Overloaded
        } else {
            Error::AllUnavailable(u)
        }
    }

    /// Counts a refusal the balancer returned, by reason.
    #[inline]
    pub(crate) fn count_refusal<E>(&self, err: &Error<E>) {
        if let Some(r) = err.refusal() {
            self.refusals[r.index()].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Refusals so far for `reason`.
    pub(crate) fn refusals(&self, reason: Refusal) -> u64 {
        self.refusals[reason.index()].load(Ordering::Relaxed)
    }
}
