//! Why no endpoint could take a call: each endpoint counted once, under
//! its first reason (at its cap, ejected, failing its check, refused by a
//! guard).

use std::sync::Arc;

use super::admit::{Route, Terms};
use super::census::{CHECK, EJECTED};
use crate::error::{Error, Unavailable};
use crate::model::EndpointState;

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
        } else if !s.gate.guards.count_refusal(terms.now(), &mut u) {
            u.other += 1;
        }
    }
    if u.capped == states.len() {
        Error::Overloaded
    } else {
        Error::AllUnavailable(u)
    }
}
