//! The plan: what share of picks each routed set takes and how health
//! restricts picks in it, recomputed when health or the callers change.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};

use super::layout::{Layout, Split};
use super::priority::{self, Count};
use super::zone::{self, Caller};
use super::{Callers, Router};
use std::sync::Arc;

use crate::admission::Route;
use crate::health::PanicMode;
use crate::model::{EndpointState, Locality};

/// The route step's decision at one moment, as
/// [`Handle::route_plan`](crate::Handle::route_plan) reports it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RoutePlan {
    /// The priority levels, highest first.
    pub levels: Vec<LevelPlan>,
}

/// One priority level in a [`RoutePlan`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LevelPlan {
    /// The endpoints' priority (0 is the highest).
    pub priority: u32,
    /// Healthy endpoints in the level.
    pub healthy: usize,
    /// Endpoints in the level.
    pub total: usize,
    /// Its priority load: the whole percent of picks it takes.
    pub load: u32,
    /// Whether picks in it ignore ejection and failing checks.
    pub panic: bool,
    /// How its load is split between localities; empty when it is not
    /// (no locality mode, or the mode is off for this level).
    pub localities: Vec<LocalityShare>,
}

/// One locality's part of a level.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LocalityShare {
    /// The locality (only the zone with zone-aware routing).
    pub locality: Locality,
    /// Healthy endpoints in it.
    pub healthy: usize,
    /// Endpoints in it.
    pub total: usize,
    /// The fraction of all picks it takes (the level's load included).
    pub share: f64,
}

/// How picks in one set treat health, or that they fail (panic with
/// `FailFast`).
const HEALTHY: u8 = 0;
const DEGRADED: u8 = 1;
const PANIC: u8 = 2;
const REFUSE: u8 = 3;

/// What the picks read: per set, its cumulative share (of `u64::MAX`) and
/// its health treatment. Written by whoever finds it stale; a pick that
/// races a rewrite may use a mix of the old and new shares, once.
#[derive(Debug)]
pub(crate) struct Plan {
    epoch: AtomicU64,
    version: AtomicU64,
    cum: Box<[AtomicU64]>,
    state: Box<[AtomicU8]>,
    /// The last set with a share (for `r == u64::MAX`).
    last: AtomicUsize,
    overall: AtomicU8,
    rewrite: Mutex<()>,
}

/// Health settings the plan applies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Panic {
    /// Percent, `0..=100`.
    pub(crate) threshold: f64,
    pub(crate) mode: PanicMode,
}

impl Plan {
    pub(crate) fn new(sets: usize) -> Self {
        Self {
            epoch: AtomicU64::new(u64::MAX),
            version: AtomicU64::new(u64::MAX),
            cum: (0..sets).map(|_| AtomicU64::new(0)).collect(),
            state: (0..sets).map(|_| AtomicU8::new(HEALTHY)).collect(),
            last: AtomicUsize::new(0),
            overall: AtomicU8::new(HEALTHY),
            rewrite: Mutex::new(()),
        }
    }

    /// Whether the plan was computed for this health epoch and callers
    /// version.
    #[inline]
    pub(crate) fn is_current(&self, epoch: u64, version: u64) -> bool {
        self.epoch.load(Ordering::Acquire) == epoch
            && self.version.load(Ordering::Acquire) == version
    }

    /// The right to rewrite the plan, unless another thread has it.
    pub(crate) fn try_rewrite(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        self.rewrite.try_lock().ok()
    }

    /// Stores decision `d`, made for this health epoch and callers version.
    pub(crate) fn store(&self, d: &Decision, epoch: u64, version: u64) {
        let last = d.share.iter().rposition(|&s| s > 0.0).unwrap_or(0);
        let mut sum = 0.0;
        for (i, (cum, share)) in self.cum.iter().zip(&d.share).enumerate() {
            sum += share;
            let v = if i >= last {
                u64::MAX
            } else {
                (sum.min(1.0) * u64::MAX as f64) as u64
            };
            cum.store(v, Ordering::Relaxed);
        }
        self.last.store(last, Ordering::Relaxed);
        for (slot, s) in self.state.iter().zip(&d.state) {
            slot.store(*s, Ordering::Relaxed);
        }
        let overall = d.state.iter().copied().filter(|&s| s != REFUSE).max();
        self.overall
            .store(overall.unwrap_or(DEGRADED), Ordering::Relaxed);
        self.version.store(version, Ordering::Release);
        self.epoch.store(epoch, Ordering::Release);
    }

    /// The set a pick whose route number is `r` goes to.
    #[inline]
    pub(crate) fn choose(&self, r: u64) -> usize {
        let n = self.cum.len();
        self.cum
            .iter()
            .position(|c| r < c.load(Ordering::Relaxed))
            .unwrap_or_else(|| self.last.load(Ordering::Relaxed).min(n.saturating_sub(1)))
    }

    /// How picks in set `i` treat health; `None` when they must fail
    /// (a level in panic with `PanicMode::FailFast`).
    #[inline]
    pub(crate) fn route(&self, i: usize) -> Option<Route> {
        to_route(self.state[i].load(Ordering::Relaxed))
    }

    /// The most restrictive treatment over all sets (for error reports).
    pub(crate) fn overall(&self) -> Route {
        to_route(self.overall.load(Ordering::Relaxed)).unwrap_or(Route::Degraded)
    }
}

fn to_route(s: u8) -> Option<Route> {
    match s {
        HEALTHY => Some(Route::Healthy),
        DEGRADED => Some(Route::Degraded),
        PANIC => Some(Route::Panic),
        _ => None,
    }
}

/// The decision: the view, each set's share of all picks, each set's state.
pub(crate) struct Decision {
    pub(crate) view: RoutePlan,
    share: Vec<f64>,
    state: Vec<u8>,
}

impl Decision {
    /// Whether any level is in panic, with the healthy and total counts
    /// over all levels (for the panic events).
    pub(crate) fn panic(&self) -> (bool, usize, usize) {
        let l = &self.view.levels;
        (
            l.iter().any(|l| l.panic),
            l.iter().map(|l| l.healthy).sum(),
            l.iter().map(|l| l.total).sum(),
        )
    }
}

/// Counts the healthy endpoints of every set of `layout`, `states` being
/// the endpoints its indices point into. O(n) per set.
pub(crate) fn counts(layout: &Layout, states: &[Arc<EndpointState>]) -> Vec<Count> {
    layout
        .sets
        .iter()
        .map(|set| Count {
            healthy: set
                .index
                .iter()
                .filter(|&&i| states.get(i as usize).is_some_and(|s| !s.is_unhealthy()))
                .count(),
            total: set.index.len(),
        })
        .collect()
}

/// Applies the rules of the [module docs](super) to `counts` (per set of
/// `layout`).
pub(crate) fn decide(layout: &Layout, counts: &[Count], router: &Router, panic: Panic) -> Decision {
    let factor = router.cfg.factor_percent();
    let levels: Vec<Count> = layout.levels.iter().map(|l| counts[l.whole]).collect();
    let loads = priority::loads(&levels, factor, panic.threshold);
    let callers = router.callers();
    let mut d = Decision {
        view: RoutePlan { levels: Vec::new() },
        share: vec![0.0; layout.sets.len()],
        state: vec![HEALTHY; layout.sets.len()],
    };
    for (l, level) in layout.levels.iter().enumerate() {
        let (load, in_panic) = (loads.load[l], loads.panic[l]);
        let split = if in_panic {
            None
        } else {
            split(layout, l, counts, router, &callers)
        };
        let mut view = LevelPlan {
            priority: level.priority,
            healthy: levels[l].healthy,
            total: levels[l].total,
            load,
            panic: in_panic,
            localities: Vec::new(),
        };
        let fraction = f64::from(load) / 100.0;
        match split {
            Some(shares) => {
                for (set, s) in level.localities.clone().zip(shares) {
                    d.share[set] = fraction * s;
                    view.localities.push(LocalityShare {
                        locality: layout.sets[set].locality.clone(),
                        healthy: counts[set].healthy,
                        total: counts[set].total,
                        share: fraction * s,
                    });
                }
            }
            None => d.share[level.whole] = fraction,
        }
        for set in std::iter::once(level.whole).chain(level.localities.clone()) {
            let c = counts[set];
            d.state[set] = match (in_panic, panic.mode) {
                (true, PanicMode::FailFast) => REFUSE,
                (true, PanicMode::RouteAll) => PANIC,
                _ if c.healthy == c.total => HEALTHY,
                _ => DEGRADED,
            };
        }
        d.view.levels.push(view);
    }
    d
}

/// The locality shares of level `l` (summing to 1), or `None` when the
/// level is not split.
fn split(
    layout: &Layout,
    l: usize,
    counts: &[Count],
    router: &Router,
    callers: &Callers,
) -> Option<Vec<f64>> {
    let sets = layout.levels[l].localities.clone();
    match router.split() {
        Split::None => None,
        Split::Locality => {
            let w: Vec<(f64, Count)> = sets.map(|s| (layout.sets[s].weight, counts[s])).collect();
            zone::weighted(&w, router.cfg.factor_percent())
        }
        Split::Zone => {
            let z = router.cfg.zone_aware.as_ref()?;
            let zones: Vec<&str> = sets
                .clone()
                .map(|s| layout.sets[s].locality.zone())
                .collect();
            let share: Vec<f64> = zones
                .iter()
                .map(|zone| callers.share(zone).unwrap_or(0.0))
                .collect();
            let healthy: Vec<usize> = sets.map(|s| counts[s].healthy).collect();
            let caller = Caller {
                zone: zones.iter().position(|zone| *zone == &*z.local),
                share: callers.share(&z.local).unwrap_or(0.0),
                zones: callers.populated(),
            };
            zone::zone_aware(caller, &share, &healthy, z.min_cluster_size)
        }
    }
}
