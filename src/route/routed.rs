//! [`Routed`]: one snapshot's routed sets, each with its own picker table,
//! and the per-pick step that chooses a set and picks in it.

use std::sync::Arc;

use super::layout::Layout;
use super::plan::{Decision, Plan, RoutePlan, decide};
use super::priority::Count;
use super::router::Router;
use crate::admission::{Census, Route};
use crate::health::Health;
use crate::model::EndpointState;
use crate::pick::Sampler;
use crate::pick::{Pick, Picker, Pool};

/// The XXH64 seed that turns an affinity key into its route number. Not the
/// hash pickers' seed (0): the route number and the key's point on a ring
/// are independent, so the keys routed to one set spread over all of it.
pub const ROUTE_SEED: u64 = 0x7475_7465_2d6c_6221;

/// The route number of an affinity key: the same in every process.
#[inline]
pub(crate) fn route_number(key: u64) -> u64 {
    xxhash_rust::xxh64::xxh64(&key.to_le_bytes(), ROUTE_SEED)
}

/// One routed set, ready for picks.
struct Set<T> {
    states: Vec<Arc<EndpointState>>,
    sampler: Sampler,
    table: T,
}

/// The routed sets of one snapshot and the plan over them.
pub(crate) struct Routed<T> {
    router: Arc<Router>,
    layout: Layout,
    sets: Box<[Set<T>]>,
    plan: Plan,
}

impl<T> Routed<T> {
    /// Builds every set's sampler and picker table (O(n) plus the tables:
    /// on membership changes only) and a first plan.
    pub(crate) fn new<P: Picker<Table = T>>(
        router: Arc<Router>,
        picker: &P,
        layout: Layout,
        states: &[Arc<EndpointState>],
    ) -> Self {
        let sets = layout
            .sets
            .iter()
            .map(|m| {
                let states: Vec<_> = m
                    .index
                    .iter()
                    .filter_map(|&i| states.get(i as usize).cloned())
                    .collect();
                let weights: Vec<f64> = states.iter().map(|s| s.weight()).collect();
                Set {
                    sampler: Sampler::new(&weights),
                    table: picker.table(&states),
                    states,
                }
            })
            .collect();
        let this = Self {
            plan: Plan::new(layout.sets.len()),
            router,
            layout,
            sets,
        };
        // Sane shares from the start; the first pick recomputes them for the
        // health epoch it sees (this plan is stamped as never current).
        this.plan
            .store(&this.decide(), u64::MAX, this.router.version());
        this
    }

    fn decide(&self) -> Decision {
        let counts: Vec<Count> = self
            .sets
            .iter()
            .map(|s| Count {
                healthy: s.states.iter().filter(|s| !s.is_unhealthy()).count(),
                total: s.states.len(),
            })
            .collect();
        decide(&self.layout, &counts, &self.router, self.router.panic)
    }

    /// The plan now (for the handle).
    pub(crate) fn view(&self) -> RoutePlan {
        self.decide().view
    }

    /// Brings the plan up to date with health and the callers (O(1) while
    /// nothing changed) and returns the most restrictive health treatment
    /// of any set, for error reports.
    #[inline]
    pub(crate) fn census(&self, census: &Census, health: &Health, now_ns: u64) -> Route {
        let epoch = census.epoch(now_ns, health);
        let version = self.router.version();
        if !self.plan.is_current(epoch, version) {
            self.replan(health, epoch, version);
        }
        self.plan.overall()
    }

    #[cold]
    fn replan(&self, health: &Health, epoch: u64, version: u64) {
        let Some(_rewriting) = self.plan.try_rewrite() else {
            return; // another pick is at it; this one uses the last plan
        };
        let d = self.decide();
        self.plan.store(&d, epoch, version);
        let (panic, healthy, total) = d.panic();
        health.set_panic(panic, healthy, total);
    }

    /// Picks for `req`: chooses a set by the plan (by the request's
    /// affinity key when the picker has one, else at random), picks in it,
    /// and returns the endpoint's position in the snapshot. When the set
    /// has no available endpoint, tries its level's whole set, then each
    /// other level's in priority order. `Err(())` when the chosen set's
    /// level is in panic with `PanicMode::FailFast`.
    #[inline]
    pub(crate) fn pick<Req, P>(
        &self,
        picker: &P,
        req: &Req,
        base: &Pool<'_, T>,
        health: &Health,
    ) -> Result<Option<usize>, ()>
    where
        P: Pick<Req, Table = T>,
    {
        let r = picker
            .affinity(req)
            .map_or_else(|| base.random(), route_number);
        let first = self.plan.choose(r);
        let route = self.plan.route(first).ok_or(())?;
        if route == Route::Panic {
            health.count_panic();
        }
        if let Some(i) = self.pick_in(first, route, picker, req, base) {
            return Ok(Some(i));
        }
        let level = self.layout.sets[first].level;
        let fallbacks = std::iter::once(self.layout.levels[level].whole)
            .filter(|&w| w != first)
            .chain(
                self.layout
                    .levels
                    .iter()
                    .enumerate()
                    .filter(|&(l, _)| l != level)
                    .map(|(_, l)| l.whole),
            );
        for set in fallbacks {
            if let Some(route) = self.plan.route(set)
                && let Some(i) = self.pick_in(set, route, picker, req, base)
            {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    #[inline]
    fn pick_in<Req, P>(
        &self,
        set: usize,
        route: Route,
        picker: &P,
        req: &Req,
        base: &Pool<'_, T>,
    ) -> Option<usize>
    where
        P: Pick<Req, Table = T>,
    {
        let s = &self.sets[set];
        let pool = Pool {
            states: &s.states,
            sampler: &s.sampler,
            table: &s.table,
            now_ns: base.now_ns,
            rates: base.rates,
            rng: base.rng,
            lane: base.lane,
            terms: base.terms.with_route(route),
        };
        let i = picker.pick(req, &pool)?;
        self.layout.sets[set].index.get(i).map(|&i| i as usize)
    }
}
