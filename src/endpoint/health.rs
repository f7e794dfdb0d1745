//! Health: per-endpoint circuit breakers, outlier ejection and the panic
//! threshold, all reading and writing the one [`EndpointState`].
//!
//! Nothing here runs in the background. A pick asks each candidate whether
//! it is ejected (one atomic load) and whether its breaker permits a call
//! (one atomic load while closed); a response feeds the breaker window and
//! the outlier counters, ejects on a tripped consecutive rule, and runs the
//! interval evaluation when it is due (one atomic load when it is not).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;

use super::EndpointState;
use crate::breaker::{CircuitBreakerConfig, State};
use crate::outlier::{Detector, HostStats, OutlierDetection};

/// Envoy's default healthy-panic threshold: below 50% healthy endpoints,
/// routing over the few left would crush them.
pub const DEFAULT_PANIC_THRESHOLD: f64 = 50.0;

/// What [`Balance`](crate::Balance) does when the share of healthy endpoints
/// falls under the panic threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PanicMode {
    /// Route over every endpoint, ejected ones included (Envoy's panic
    /// routing). An open circuit breaker still refuses: its contract is to
    /// not call a failing endpoint at all.
    #[default]
    RouteAll,
    /// Fail calls at once with [`Error::Panic`](crate::Error::Panic).
    FailFast,
}

/// Outlier detection settings and the pool-wide detector.
#[derive(Debug)]
pub(crate) struct Outlier {
    pub(crate) cfg: OutlierDetection,
    pub(crate) detector: Detector,
}

/// Health settings and counters of one balancer.
#[derive(Debug)]
pub(crate) struct Health {
    pub(crate) breaker: Option<CircuitBreakerConfig>,
    pub(crate) outlier: Option<Outlier>,
    /// Fraction in `0..=1`; 0 turns panic routing off.
    pub(crate) panic_threshold: f64,
    pub(crate) panic_mode: PanicMode,
    /// Live endpoints whose breaker is not closed: a hint that lets the
    /// healthy path skip the census. Recounted on every membership change.
    pub(crate) open_breakers: AtomicUsize,
    /// Picks made in panic.
    pub(crate) panics: AtomicU64,
    /// The current endpoints, weakly (they point back at the model), for the
    /// rare events that need the whole pool: an ejection, an evaluation.
    pool: ArcSwap<Vec<Weak<EndpointState>>>,
}

impl Health {
    pub(crate) fn new(
        breaker: Option<CircuitBreakerConfig>,
        outlier: Option<OutlierDetection>,
        panic_threshold: f64,
        panic_mode: PanicMode,
    ) -> Self {
        Self {
            breaker,
            outlier: outlier.map(|cfg| Outlier {
                cfg,
                detector: Detector::new(),
            }),
            panic_threshold: panic_threshold / 100.0,
            panic_mode,
            open_breakers: AtomicUsize::new(0),
            panics: AtomicU64::new(0),
            pool: ArcSwap::from_pointee(Vec::new()),
        }
    }

    /// True when endpoints can be unhealthy at all.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.breaker.is_some() || self.outlier.is_some()
    }

    /// Called by the writer with every new endpoint set.
    pub(crate) fn set_pool(&self, states: &[Arc<EndpointState>]) {
        if !self.enabled() {
            return;
        }
        let open = states
            .iter()
            .filter(|s| s.breaker().is_some_and(|b| !breaker_is_healthy(b.state())))
            .count();
        self.open_breakers.store(open, Ordering::Relaxed);
        self.pool
            .store(Arc::new(states.iter().map(Arc::downgrade).collect()));
    }

    /// The current endpoints (allocates: for rare events only).
    pub(crate) fn pool(&self) -> Vec<Arc<EndpointState>> {
        self.pool.load().iter().filter_map(Weak::upgrade).collect()
    }

    /// How many of `states` are unhealthy at `now_ns`: ejected, or with a
    /// breaker that is not closed. O(1) while everything is healthy.
    pub(crate) fn unhealthy(&self, states: &[Arc<EndpointState>], now_ns: u64) -> usize {
        let mut n = self.open_breakers.load(Ordering::Relaxed);
        if let Some(o) = &self.outlier
            && o.detector.ejected_count() > 0
        {
            n += o.detector.ejected_count_at(states, now_ns);
        }
        n.min(states.len())
    }
}

/// Whether a breaker in `state` counts as healthy for the panic census.
pub(crate) fn breaker_is_healthy(state: State) -> bool {
    matches!(state, State::Closed | State::Disabled)
}

/// Counts a breaker's moves between healthy and unhealthy states into
/// `Health::open_breakers`, while its endpoint is in the set.
pub(crate) fn count_transitions(
    model: &Arc<super::Model>,
    live: &Arc<AtomicBool>,
) -> impl Fn(crate::breaker::Transition) + Send + Sync + 'static {
    let model = Arc::downgrade(model);
    let live = Arc::clone(live);
    move |t| {
        let Some(model) = model.upgrade() else { return };
        if !live.load(Ordering::Relaxed) {
            return;
        }
        let counter = &model.health.open_breakers;
        match (breaker_is_healthy(t.from), breaker_is_healthy(t.to)) {
            (true, false) => {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            (false, true) => {
                let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    Some(n.saturating_sub(1))
                });
            }
            _ => {}
        }
    }
}

impl AsRef<HostStats> for Arc<EndpointState> {
    fn as_ref(&self) -> &HostStats {
        self.outlier()
    }
}
