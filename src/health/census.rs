//! The census: how many endpoints are unhealthy, each counted once whatever
//! its reasons, and the panic decision it drives.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::{Health, HealthChange, PanicMode};
use crate::endpoint::EndpointState;
pub(crate) use crate::endpoint::{BREAKER, CHECK, EJECTED, SOFT};

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

/// The census's state, under the health owner's lock.
#[derive(Debug, Default)]
pub(crate) struct Members {
    /// The endpoints counted (the snapshot's pickable ones), weakly: they
    /// point back at the owner.
    pub(crate) members: Vec<Weak<EndpointState>>,
}

impl Health {
    /// Takes `states` as the set the census counts (called with every new
    /// snapshot) and recounts. O(n), on membership changes only.
    pub(crate) fn set_pool(&self, states: &[Arc<EndpointState>]) {
        let mut pool = self.lock();
        for old in pool.members.iter().filter_map(Weak::upgrade) {
            old.set_counted(false);
        }
        let mut unhealthy = 0;
        for s in states {
            s.set_counted(true);
            unhealthy += usize::from(s.health_bits() != 0);
        }
        pool.members = states.iter().map(Arc::downgrade).collect();
        self.unhealthy.store(unhealthy, Ordering::Relaxed);
        self.counted.store(states.len(), Ordering::Relaxed);
        self.store_next_return(states);
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// The endpoints counted, upgraded (allocates; for rare events only:
    /// an ejection, an evaluation, the end of an ejection).
    pub(crate) fn members(&self) -> Vec<Arc<EndpointState>> {
        self.lock()
            .members
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Sets or clears health bit `bit` of `state`, keeping the count of
    /// unhealthy endpoints exact. Returns whether the bit changed.
    pub(crate) fn set_bit(&self, state: &EndpointState, bit: u8, on: bool) -> bool {
        let _pool = self.lock();
        let old = state.health_bits();
        let new = if on { old | bit } else { old & !bit };
        if new == old {
            return false;
        }
        state.set_health_bits(new);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        if state.is_counted() {
            if old == 0 {
                self.unhealthy.fetch_add(1, Ordering::Relaxed);
            } else if new == 0 {
                self.unhealthy.fetch_sub(1, Ordering::Relaxed);
            }
        }
        true
    }

    /// Decides how this pick treats health: O(1), plus a sweep of ended
    /// ejections when one is due. `Err(())` is panic with `FailFast`.
    ///
    /// The rule: with `n` endpoints counted and `u` of them unhealthy (each
    /// once, whatever its reasons), the balancer panics when `u > 0` and
    /// `n − u < threshold · n`.
    #[inline]
    pub(crate) fn census(&self, now_ns: u64) -> Result<Route, ()> {
        if !self.enabled.load(Ordering::Relaxed) {
            return Ok(Route::Healthy);
        }
        if now_ns >= self.next_return_ns.load(Ordering::Acquire) {
            self.sweep_returns(now_ns);
        }
        let bad = self.unhealthy.load(Ordering::Relaxed);
        let n = self.counted.load(Ordering::Relaxed);
        let panic = bad > 0 && ((n - bad.min(n)) as f64) < self.panic_threshold * n as f64;
        if panic != self.in_panic.load(Ordering::Relaxed) {
            self.panic_changed(panic, n - bad.min(n), n);
        }
        if !panic {
            return Ok(if bad == 0 {
                Route::Healthy
            } else {
                Route::Degraded
            });
        }
        self.panics.fetch_add(1, Ordering::Relaxed);
        match self.panic_mode {
            PanicMode::FailFast => Err(()),
            PanicMode::RouteAll => Ok(Route::Panic),
        }
    }

    /// For the route step: sweeps ended ejections when one is due and
    /// returns the health epoch, which changes whenever an endpoint's
    /// health or the counted set does. O(1) while nothing is due.
    #[inline]
    pub(crate) fn route_epoch(&self, now_ns: u64) -> u64 {
        if self.enabled.load(Ordering::Relaxed)
            && now_ns >= self.next_return_ns.load(Ordering::Acquire)
        {
            self.sweep_returns(now_ns);
        }
        self.epoch.load(Ordering::Acquire)
    }

    /// The route step's panic state (some priority level in panic), with
    /// the healthy and total counts over every level: an event when it
    /// changes.
    pub(crate) fn set_panic(&self, panic: bool, healthy: usize, total: usize) {
        if panic != self.in_panic.load(Ordering::Relaxed) {
            self.panic_changed(panic, healthy, total);
        }
    }

    /// Counts one pick made in panic (`lb.panic`).
    #[inline]
    pub(crate) fn count_panic(&self) {
        self.panics.fetch_add(1, Ordering::Relaxed);
    }

    fn panic_changed(&self, panic: bool, healthy: usize, total: usize) {
        if self.in_panic.swap(panic, Ordering::Relaxed) == panic {
            return; // another thread reported it
        }
        let change = if panic {
            HealthChange::PanicEntered { healthy, total }
        } else {
            HealthChange::PanicLeft { healthy, total }
        };
        self.events.emit(None, change);
    }

    /// Returns endpoints whose ejection has ended: clears their bit and
    /// reports each. Runs when the earliest ejection end has passed.
    fn sweep_returns(&self, now_ns: u64) {
        let members = self.members();
        let mut returned = Vec::new();
        {
            let _pool = self.lock();
            // Another thread may have swept meanwhile.
            if now_ns < self.next_return_ns.load(Ordering::Acquire) {
                return;
            }
            for s in &members {
                let bits = s.health_bits();
                if bits & EJECTED != 0 && !s.outlier().is_ejected(now_ns) {
                    s.set_health_bits(bits & !EJECTED);
                    self.epoch.fetch_add(1, Ordering::AcqRel);
                    if bits == EJECTED && s.is_counted() {
                        self.unhealthy.fetch_sub(1, Ordering::Relaxed);
                    }
                    returned.push(Arc::clone(s));
                }
            }
            self.store_next_return(&members);
        }
        for s in returned {
            self.events.emit(Some(&s), HealthChange::Returned);
        }
    }

    /// The earliest end of an ejection among `states`, for the next sweep.
    pub(super) fn store_next_return(&self, states: &[Arc<EndpointState>]) {
        let next = states
            .iter()
            .filter(|s| s.health_bits() & EJECTED != 0)
            // An ejection an evaluation already cleared is due at once.
            .map(|s| s.outlier().ejected_until_ns().unwrap_or(0))
            .min()
            .unwrap_or(u64::MAX);
        self.next_return_ns.store(next, Ordering::Release);
    }
}
