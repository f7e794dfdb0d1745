//! What one pick asks, from the census to the in-flight slot: how health
//! restricts it ([`Census::route`]), which candidates it may choose
//! ([`Terms::admits`], what [`Pool::is_available`](crate::pick::Pool::is_available)
//! asks), and taking the chosen one's slot and its guards' pass
//! ([`admit`]), on the handle the call then holds ([`Lane`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::time::Instant;

use super::census::{Census, SOFT};
use super::{InFlight, Judge, Owner};
use crate::guard::GUARD_BITS;
use crate::model::EndpointState;
use crate::time::Epoch;

/// How one pick treats endpoint health, from the census.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Every endpoint is healthy: no per-candidate health check at all.
    Healthy,
    /// Some endpoints are unhealthy: candidates with health bits are
    /// checked (ejected and failing-check ones skipped, breakers asked).
    Degraded,
    /// Too few endpoints are healthy (panic, `RouteAll`): ejection and
    /// failing checks are ignored; breakers still refuse.
    Panic,
}

impl Census {
    /// How this pick treats health: O(1), plus the owner's sweep of ended
    /// ejections when one is due. The owner decides panic from the counts;
    /// `Err(())` is panic with `FailFast`.
    #[inline]
    pub(crate) fn route(&self, now_ns: u64, owner: &impl Owner) -> Result<Route, ()> {
        if !self.enabled.load(Ordering::Relaxed) {
            return Ok(Route::Healthy);
        }
        if now_ns >= self.next_return_ns.load(Ordering::Acquire) {
            owner.returns_due(now_ns);
        }
        let bad = self.unhealthy.load(Ordering::Relaxed);
        owner.route(bad, self.counted.load(Ordering::Relaxed))
    }

    /// For the route step: the owner's sweep of ended ejections when one is
    /// due, then the health epoch, which changes whenever an endpoint's
    /// health or the counted set does. O(1) while nothing is due.
    #[inline]
    pub(crate) fn epoch(&self, now_ns: u64, owner: &impl Owner) -> u64 {
        if self.enabled.load(Ordering::Relaxed)
            && now_ns >= self.next_return_ns.load(Ordering::Acquire)
        {
            owner.returns_due(now_ns);
        }
        self.epoch.load(Ordering::Acquire)
    }
}

/// What one pick may choose: how health restricts it (from the census),
/// the in-flight cap, and the endpoints the call asks to avoid (tried by a
/// retry).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Terms<'a> {
    pub(crate) route: Route,
    pub(crate) cap: Cap,
    /// Ids of endpoints this call should avoid.
    pub(crate) avoid: &'a [u64],
    /// The call's time, in nanoseconds since `epoch`.
    now_ns: u64,
    epoch: &'a Epoch,
    /// Nothing can make an endpoint unavailable: every candidate is.
    open: bool,
}

impl<'a> Terms<'a> {
    #[inline(always)]
    pub(crate) fn new(
        route: Route,
        cap: Cap,
        avoid: &'a [u64],
        now_ns: u64,
        epoch: &'a Epoch,
    ) -> Self {
        Self {
            route,
            cap,
            avoid,
            now_ns,
            epoch,
            open: cap.is_unlimited() && matches!(route, Route::Healthy) && avoid.is_empty(),
        }
    }

    /// The same terms with `route` (the route step's per-set treatment).
    #[inline(always)]
    pub(crate) fn with_route(self, route: Route) -> Self {
        Self::new(route, self.cap, self.avoid, self.now_ns, self.epoch)
    }

    /// The same terms avoiding nothing: every available endpoint was tried
    /// already, and a repeat beats failing the retry.
    #[inline]
    pub(crate) fn without_avoid(self) -> Self {
        Self::new(self.route, self.cap, &[], self.now_ns, self.epoch)
    }

    /// The same terms avoiding `avoid` instead.
    #[cfg(test)]
    pub(crate) fn avoiding<'b>(self, avoid: &'b [u64]) -> Terms<'b>
    where
        'a: 'b,
    {
        Terms::new(self.route, self.cap, avoid, self.now_ns, self.epoch)
    }

    /// The call's time as tokio's [`Instant`], for the guards (breakers
    /// keep their own clock): converted when a guard asks, not read.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        self.epoch.at(self.now_ns)
    }

    /// Whether `s` may take this call: not at its in-flight cap (fixed, or
    /// adaptive), healthy as far as the census goes (not ejected or failing
    /// its active check, unless the balancer is in panic), its guards
    /// admitting a call, and not one the call asked to avoid.
    ///
    /// Cost: nothing while every endpoint is healthy and no cap or retry
    /// applies; otherwise a load of the endpoint's health bits, and of its
    /// breaker's state when the breaker is not closed.
    #[inline(always)]
    pub(crate) fn admits(&self, s: &EndpointState) -> bool {
        self.open || self.admits_restricted(s)
    }

    #[inline]
    fn admits_restricted(&self, s: &EndpointState) -> bool {
        if self.cap.reached(s) {
            return false;
        }
        if self.route != Route::Healthy {
            let bits = s.health_bits();
            if bits != 0 {
                if self.route == Route::Degraded && bits & SOFT != 0 {
                    return false;
                }
                if bits & GUARD_BITS != 0 && !s.gate.guards.permit(bits, self.now()) {
                    return false;
                }
            }
        }
        self.avoid.is_empty() || !self.avoid.contains(&s.id)
    }
}

/// Takes an in-flight slot on `state` in the lane `lane` holds (unless it
/// is at its cap) and a pass from its guards (unless one refuses), and
/// starts the call's clock at `now_ns`. `None` when either is refused: the
/// slot is given back.
///
/// The breaker moves here as time says it must: an open breaker whose wait
/// has elapsed turns half-open and this call becomes a probe; a half-open
/// breaker whose probe is overdue opens again (and refuses), so a probe
/// that never answers cannot hold the breaker half-open.
///
/// The guard is built once, complete, rather than taken and then filled in
/// by value: each step moved it, and the moves' partial writes and wide
/// reads stalled store forwarding on the request path.
#[inline]
pub(crate) fn admit(
    terms: &Terms<'_>,
    state: &EndpointState,
    lane: &Arc<Lane>,
    now_ns: u64,
) -> Option<InFlight> {
    debug_assert!(std::ptr::eq(state, &*lane.state));
    let concurrency = state.take_slot(terms.cap.of(state), lane.index)?;
    let pass = if state.gate.guarded {
        match state.gate.guards.admit(terms.now()) {
            Ok(pass) => Some(pass),
            Err(()) => {
                state.release(lane.index);
                return None;
            }
        }
    } else {
        None
    };
    Some(InFlight::started(
        Arc::clone(lane),
        concurrency,
        pass,
        now_ns,
    ))
}

/// One lane of an endpoint: what a guard holds, so that its reference
/// count is this lane's (a snapshot keeps one per endpoint and lane; see
/// the model's `lanes`), with the health owner when it judges every
/// finished call. Aligned to a cache line, so that the counts of two lanes
/// never share one.
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Lane {
    pub(crate) state: Arc<EndpointState>,
    pub(crate) index: usize,
    /// The judge of every finished call, if the balancer has one.
    pub(super) judge: Option<Arc<dyn Judge>>,
}

impl Lane {
    /// Lane `index` of `state`, taken modulo the lanes it uses.
    pub(crate) fn new(
        state: Arc<EndpointState>,
        index: usize,
        judge: Option<Arc<dyn Judge>>,
    ) -> Arc<Self> {
        let index = index & state.mask();
        Arc::new(Self {
            state,
            index,
            judge,
        })
    }
}

/// Every endpoint's handle in every lane, lane by lane (`lane · n + i`
/// for `n` endpoints): what the calls a snapshot admits hold, so that
/// threads in different lanes count references on different lines.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    handles: Box<[Arc<Lane>]>,
    n: usize,
}

impl Lanes {
    /// The handles of `states` in `lanes` lanes.
    pub(crate) fn new(
        states: &[Arc<EndpointState>],
        lanes: usize,
        judge: &Option<Arc<dyn Judge>>,
    ) -> Self {
        Self {
            handles: (0..lanes)
                .flat_map(|lane| {
                    states
                        .iter()
                        .map(move |s| Lane::new(Arc::clone(s), lane, judge.clone()))
                })
                .collect(),
            n: states.len(),
        }
    }

    /// Endpoint `i`'s handle in lane `lane`.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize, lane: usize) -> Option<&Arc<Lane>> {
        self.handles.get(lane * self.n + i)
    }
}

/// What bounds the calls in flight on each endpoint of a balancer: the
/// builder's fixed [`max_in_flight`](crate::balance::Builder::max_in_flight),
/// the adaptive limit, both (the lower wins) or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Cap {
    fixed: Option<usize>,
    adaptive: bool,
}

impl Cap {
    pub(crate) fn new(fixed: Option<usize>, adaptive: bool) -> Self {
        Self { fixed, adaptive }
    }

    /// True when nothing bounds the calls in flight.
    #[inline(always)]
    pub(crate) fn is_unlimited(self) -> bool {
        self.fixed.is_none() && !self.adaptive
    }

    /// The in-flight count at which `s` takes no more calls, now.
    #[inline(always)]
    pub(crate) fn of(self, s: &EndpointState) -> Option<usize> {
        match (self.fixed, self.adaptive) {
            (f, false) => f,
            (None, true) => Some(s.adaptive_cap()),
            (Some(f), true) => Some(f.min(s.adaptive_cap())),
        }
    }

    /// Whether `s` is at its cap.
    #[inline(always)]
    pub(crate) fn reached(self, s: &EndpointState) -> bool {
        self.of(s).is_some_and(|c| s.in_flight() >= c)
    }
}

/// A balancer's [`Cap`], whose fixed part can change at run time
/// ([`Handle::set_max_in_flight`](crate::Handle::set_max_in_flight)): one
/// relaxed load per call reads it.
#[derive(Debug)]
pub(crate) struct CapCell {
    /// The fixed cap, 0 for none (a cap is at least 1).
    fixed: AtomicUsize,
    adaptive: bool,
}

impl CapCell {
    pub(crate) fn new(fixed: Option<usize>, adaptive: bool) -> Self {
        Self {
            fixed: AtomicUsize::new(fixed.unwrap_or(0)),
            adaptive,
        }
    }

    /// The cap now.
    #[inline(always)]
    pub(crate) fn get(&self) -> Cap {
        Cap::new(self.fixed(), self.adaptive)
    }

    /// The fixed cap now.
    #[inline(always)]
    pub(crate) fn fixed(&self) -> Option<usize> {
        match self.fixed.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    /// Replaces the fixed cap (`Some(0)` is refused by the caller).
    pub(crate) fn set_fixed(&self, fixed: Option<usize>) {
        self.fixed.store(fixed.unwrap_or(0), Ordering::Relaxed);
    }
}
