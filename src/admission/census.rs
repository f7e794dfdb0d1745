//! The census: the health bits of each endpoint, and how many endpoints are
//! unhealthy, each counted once whatever its reasons. The health owner
//! writes them here (through [`Census::set_bit`]); a pick reads them once
//! (`Census::route`, in `admit.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::error::{Error, Refusal};
use crate::guard::GUARD_BITS;
use crate::model::EndpointState;

// The bits of an endpoint's health word: why it may not take calls. The
// endpoint stores them (`model::Gate`); only admission reads them. The
// bits above these two are the guards' (`crate::guard`), one each.

/// Outlier detection ejected it.
pub(crate) const EJECTED: u8 = 1;
/// Its active health check fails.
pub(crate) const CHECK: u8 = 2;
/// The reasons panic routing sets aside: ejection and failing checks are
/// the balancer's own judgement, which it distrusts when too few endpoints
/// pass it. A guard (an open breaker) is the user's hard rule and still
/// refuses.
pub(crate) const SOFT: u8 = EJECTED | CHECK;

const _: () = assert!(SOFT & GUARD_BITS == 0, "the guards' bits are their own");

/// One balancer's census: the counts behind every pick's [`Route`], and
/// the refusals it returned.
#[derive(Debug, Default)]
pub(crate) struct Census {
    /// Whether endpoints can be unhealthy at all (guards or checks exist).
    pub(super) enabled: AtomicBool,
    /// Counted endpoints with any health bit set.
    pub(super) unhealthy: AtomicUsize,
    /// Endpoints counted (the snapshot's pickable ones).
    pub(super) counted: AtomicUsize,
    /// The earliest end of a counted ejection, ns since the epoch.
    pub(super) next_return_ns: AtomicU64,
    /// Bumped whenever an endpoint's health bits or the counted set change:
    /// the route step's plans compare it.
    pub(super) epoch: AtomicU64,
    refusals: [AtomicU64; Refusal::ALL.len()],
    /// The endpoints counted, weakly (they point back at the owner);
    /// serialises changes of health bits and of the counted set.
    members: Mutex<Vec<Weak<EndpointState>>>,
}

impl Census {
    /// A census for a balancer whose endpoints can be unhealthy from the
    /// start (`enabled`: it has guards) or only once checks start.
    pub(crate) fn new(enabled: bool) -> Self {
        Self {
            enabled: AtomicBool::new(enabled),
            next_return_ns: AtomicU64::new(u64::MAX),
            ..Self::default()
        }
    }

    /// From now on endpoints can be unhealthy (active checks started).
    pub(crate) fn enable(&self) {
        self.enabled.store(true, Ordering::Release);
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Weak<EndpointState>>> {
        // The lock guards counts that are rebuilt from the endpoints on every
        // membership change; a panic elsewhere cannot leave them worse.
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `states` as the set the census counts (called with every new
    /// snapshot) and recounts. O(n), on membership changes only.
    pub(crate) fn set_pool(&self, states: &[Arc<EndpointState>]) {
        let mut members = self.lock();
        for old in members.iter().filter_map(Weak::upgrade) {
            old.gate.counted.store(false, Ordering::Relaxed);
        }
        let mut unhealthy = 0;
        for s in states {
            s.gate.counted.store(true, Ordering::Relaxed);
            unhealthy += usize::from(s.is_unhealthy());
        }
        *members = states.iter().map(Arc::downgrade).collect();
        self.unhealthy.store(unhealthy, Ordering::Relaxed);
        self.counted.store(states.len(), Ordering::Relaxed);
        self.store_next_return(states);
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// The endpoints counted, upgraded (allocates; for rare events only:
    /// an ejection, an evaluation, the end of an ejection).
    pub(crate) fn members(&self) -> Vec<Arc<EndpointState>> {
        self.lock().iter().filter_map(Weak::upgrade).collect()
    }

    /// Sets or clears health bit `bit` of `state`, keeping the count of
    /// unhealthy endpoints exact. Returns whether the bit changed.
    pub(crate) fn set_bit(&self, state: &EndpointState, bit: u8, on: bool) -> bool {
        let _members = self.lock();
        let word = &state.gate.bits;
        let old = word.load(Ordering::Relaxed);
        let new = if on { old | bit } else { old & !bit };
        if new == old {
            return false;
        }
        word.store(new, Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        if state.gate.counted.load(Ordering::Relaxed) {
            if old == 0 {
                self.unhealthy.fetch_add(1, Ordering::Relaxed);
            } else if new == 0 {
                self.unhealthy.fetch_sub(1, Ordering::Relaxed);
            }
        }
        true
    }

    /// Clears the ejected bit of the endpoints whose ejection has ended at
    /// `now_ns` and returns them (for the owner's events); `members` is what
    /// [`members`](Self::members) gave just before.
    pub(crate) fn clear_returned(
        &self,
        members: &[Arc<EndpointState>],
        now_ns: u64,
    ) -> Vec<Arc<EndpointState>> {
        let mut returned = Vec::new();
        let _members = self.lock();
        // Another thread may have swept meanwhile.
        if now_ns < self.next_return_ns.load(Ordering::Acquire) {
            return returned;
        }
        for s in members {
            let word = &s.gate.bits;
            let bits = word.load(Ordering::Relaxed);
            if bits & EJECTED != 0 && !s.outlier().is_ejected(now_ns) {
                word.store(bits & !EJECTED, Ordering::Relaxed);
                self.epoch.fetch_add(1, Ordering::AcqRel);
                if bits == EJECTED && s.gate.counted.load(Ordering::Relaxed) {
                    self.unhealthy.fetch_sub(1, Ordering::Relaxed);
                }
                returned.push(Arc::clone(s));
            }
        }
        self.store_next_return(members);
        returned
    }

    /// Notes that an ejection lasts until `until_ns`, for the next sweep.
    pub(crate) fn ejected_until(&self, until_ns: u64) {
        self.next_return_ns.fetch_min(until_ns, Ordering::AcqRel);
    }

    /// The earliest end of an ejection among `states`, for the next sweep.
    pub(crate) fn store_next_return(&self, states: &[Arc<EndpointState>]) {
        let next = states
            .iter()
            .filter(|s| s.health_bits() & EJECTED != 0)
            // An ejection an evaluation already cleared is due at once.
            .map(|s| s.outlier().ejected_until_ns().unwrap_or(0))
            .min()
            .unwrap_or(u64::MAX);
        self.next_return_ns.store(next, Ordering::Release);
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

/// What the census shows of each endpoint.
impl EndpointState {
    /// Whether the endpoint fails its active health check
    /// ([`crate::check`]): it then takes no picks outside panic routing.
    pub fn is_failing_check(&self) -> bool {
        self.health_bits() & CHECK != 0
    }

    /// Whether the health owner counts this endpoint unhealthy: its breaker
    /// is not closed, it is ejected, or it fails its active check (each
    /// endpoint counts once toward the panic threshold, whatever the reasons).
    pub fn is_unhealthy(&self) -> bool {
        self.health_bits() != 0
    }

    /// The reasons admission refuses this endpoint, as bits.
    #[inline(always)]
    pub(crate) fn health_bits(&self) -> u8 {
        self.gate.bits.load(Ordering::Relaxed)
    }
}
