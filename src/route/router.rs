//! [`Router`]: a balancer's validated routing settings and the callers'
//! distribution, shared by its snapshots.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use super::layout::{Layout, Split};
use super::plan::{Panic, RoutePlan, counts, decide};
use super::routed::Routed;
use super::{Callers, Routing};
use crate::error::ConfigError;
use crate::model::EndpointState;
use crate::pick::Picker;

/// One balancer's route step: its settings, and the callers' distribution
/// (which [`Handle::set_callers`](crate::Handle::set_callers) replaces).
#[derive(Debug)]
pub(crate) struct Router {
    pub(crate) cfg: Routing,
    /// The balancer's panic threshold and mode, which levels apply.
    pub(crate) panic: Panic,
    callers: ArcSwap<Callers>,
    /// Bumped on every change of `callers`: plans compare it.
    version: AtomicU64,
}

impl Router {
    /// The route step for validated settings.
    pub(crate) fn new(cfg: Routing, panic: Panic) -> Self {
        let callers = cfg
            .zone_aware
            .as_ref()
            .map_or_else(|| Callers::new([]), |z| z.callers.clone());
        Self {
            cfg,
            panic,
            callers: ArcSwap::from_pointee(callers),
            version: AtomicU64::new(0),
        }
    }

    /// How levels are split between localities.
    pub(crate) fn split(&self) -> Split {
        if self.cfg.zone_aware.is_some() {
            Split::Zone
        } else if self.cfg.locality_weighted {
            Split::Locality
        } else {
            Split::None
        }
    }

    /// The callers' distribution now.
    pub(crate) fn callers(&self) -> Arc<Callers> {
        self.callers.load_full()
    }

    /// The version of the callers' distribution.
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Replaces the callers' distribution (checked against the caller's
    /// zone); plans pick it up at their next pick.
    pub(crate) fn set_callers(&self, callers: Callers) -> Result<(), ConfigError> {
        let Some(z) = &self.cfg.zone_aware else {
            return Err(ConfigError::new(
                "routing.zone_aware",
                "not configured",
                "set with Routing::zone_aware when the balancer is built",
            ));
        };
        callers.check_local(&z.local)?;
        self.callers.store(Arc::new(callers));
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Which of `key_hashes` (every member's, in member order) are in this
    /// balancer's subset: all of them without subsetting. The ring is the
    /// members sorted by key hash (then member order), the same in every
    /// process that knows the same keys.
    pub(crate) fn subset(&self, key_hashes: &[u64]) -> Vec<bool> {
        let Some(s) = &self.cfg.subset else {
            return vec![true; key_hashes.len()];
        };
        let mut ring: Vec<usize> = (0..key_hashes.len()).collect();
        ring.sort_by_key(|&i| (key_hashes[i], i));
        let mut chosen = vec![false; key_hashes.len()];
        for p in s.window(ring.len()) {
            chosen[ring[p]] = true;
        }
        chosen
    }

    /// The plan over `states` computed afresh (for the handle, when the
    /// snapshot has no routed sets).
    pub(crate) fn view(&self, states: &[Arc<EndpointState>]) -> RoutePlan {
        let layout = Layout::new(states, self.split());
        decide(&layout, &counts(&layout, states), self, self.panic).view
    }

    /// The routed sets of a snapshot whose pickable endpoints are
    /// `states`, or `None` when there is nothing to route (one priority
    /// level and no locality mode): picks then skip the step.
    pub(crate) fn route<P: Picker>(
        self: &Arc<Self>,
        picker: &P,
        states: &[Arc<EndpointState>],
    ) -> Option<Routed<P::Table>> {
        let layout = Layout::new(states, self.split());
        (!layout.is_trivial()).then(|| Routed::new(Arc::clone(self), picker, layout, states))
    }
}
