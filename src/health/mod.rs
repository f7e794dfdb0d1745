//! Health: the slow path of "may this endpoint take traffic now?".
//!
//! Whether an endpoint may take a call is decided in one place,
//! admission (`src/admission/`), from each endpoint's health bits, the
//! census of them and the endpoint's guards. This module is the balancer's
//! health owner: it judges, and writes what it judged there.
//!
//! * **Census, per pick** (O(1)): how many of the `n` endpoints the picks
//!   choose from are unhealthy — breaker not closed, ejected, or failing an
//!   active check — each counted **once** whatever its reasons. While none
//!   is, candidates are not checked at all. Draining endpoints are not in
//!   the census: they take no picks anyway, and a rolling restart that
//!   drains many must not push the balancer into panic.
//! * **Panic:** with `u` of `n` unhealthy, the balancer panics when `u > 0`
//!   and `n − u < threshold · n` ([`DEFAULT_PANIC_THRESHOLD`]: 50%, Envoy's).
//!   With [`PanicMode::RouteAll`] (the default) a pick in panic ignores
//!   ejection and failing checks — the balancer's own judgement, which it
//!   distrusts when it condemns most of the pool — and routes over every
//!   endpoint whose breaker admits the call. **An open breaker still
//!   refuses in panic**: it is the rule the user configured for "do not call
//!   this endpoint", and a half-open breaker still admits only its probes.
//!   So a panic over open breakers fails fast with `AllUnavailable` and the
//!   time until the next probe, rather than hammering failing endpoints.
//!   With [`PanicMode::FailFast`] a pick in panic fails with
//!   [`Error::Panic`](crate::Error::Panic). Entering and leaving panic are
//!   health events; `lb.panic` counts the picks made in panic.
//! * **Admit:** a pick takes the candidate's in-flight slot and a permit
//!   from its breaker. An open breaker whose wait is over turns half-open
//!   and admits exactly its probes; a half-open breaker whose probe is
//!   overdue (`half_open_timeout`) opens again at the next admit, so the
//!   state machine never hangs on a probe that never answers.
//! * **Completion:** every finished call feeds the breaker and the outlier
//!   rules. Timeouts owned by the stack — the balancer's own
//!   [`timeout`](crate::balance::Builder::timeout), a retry layer's per-try
//!   timeout — are failures of kind
//!   [`Timeout`](crate::classify::FailureKind::Timeout) there and in the
//!   latency model, so a black-holed replica is ejected and its breaker
//!   opens; a probe that times out is a failed probe. A call its caller
//!   drops (or a lost hedge) counts only as a latency lower bound, and
//!   gives back a half-open probe slot.
//! * **Events:** each change (breaker transitions, ejection and return,
//!   panic entered and left, active-check flips, discovery errors) is a
//!   `tracing` event on target `tower_lb` and a [`HealthEvent`] for the
//!   hook set with
//!   [`Builder::on_health_change`](crate::balance::Builder::on_health_change).
//!   Refusals (no endpoints, all capped, all unavailable, panic) are
//!   counted by reason ([`Refusal`](crate::Refusal)) for metrics.

mod events;
mod panic;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

pub use events::{HealthChange, HealthEvent};

pub(crate) use events::{Events, Hook};

use crate::admission::{CHECK, Census, EJECTED, Judge, Owner, Route};
use crate::guard::{GuardSettings, Listen, Said};
use crate::model::{EndpointState, Gate};
use crate::outcome::Outcome;
use crate::outlier::{Detector, EjectionReason, OutlierDetection};
use crate::rng::RngSource;

/// Envoy's default healthy-panic threshold: below 50% healthy endpoints,
/// routing over the few left would crush them.
pub const DEFAULT_PANIC_THRESHOLD: f64 = 50.0;

/// What [`Balance`](crate::Balance) does when the share of healthy endpoints
/// falls under the panic threshold; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PanicMode {
    /// Route over every endpoint whose breaker admits the call, ejected and
    /// failing-check ones included (Envoy's panic routing).
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

/// The health settings of a balancer, as the builder collects them.
pub(crate) struct Settings {
    pub(crate) guards: GuardSettings,
    pub(crate) outlier: Option<OutlierDetection>,
    /// Percent, `0..=100`.
    pub(crate) panic_threshold: f64,
    pub(crate) panic_mode: PanicMode,
    pub(crate) events: Events,
    pub(crate) seed: Option<u64>,
}

/// One balancer's health owner; see the [module docs](self).
pub(crate) struct Health {
    pub(crate) guards: GuardSettings,
    pub(crate) outlier: Option<Outlier>,
    /// The census it writes into (shared with the balancer, which reads it
    /// per pick).
    pub(crate) census: Arc<Census>,
    /// An active-check driver runs for this balancer.
    checks: AtomicBool,
    /// Fraction in `0..=1`; 0 turns panic routing off.
    panic_threshold: f64,
    panic_mode: PanicMode,
    in_panic: AtomicBool,
    /// Picks made in panic.
    pub(crate) panics: AtomicU64,
    pub(crate) events: Events,
    rng: RngSource,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("census", &self.census)
            .field("in_panic", &self.in_panic.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Health {
    pub(crate) fn new(s: Settings) -> Self {
        Self {
            census: Arc::new(Census::new(s.guards.any() || s.outlier.is_some())),
            checks: AtomicBool::new(false),
            guards: s.guards,
            outlier: s.outlier.map(|cfg| Outlier {
                cfg,
                detector: Detector::new(),
            }),
            panic_threshold: s.panic_threshold / 100.0,
            panic_mode: s.panic_mode,
            in_panic: AtomicBool::new(false),
            panics: AtomicU64::new(0),
            events: s.events,
            rng: RngSource::new(s.seed.map(|seed| seed ^ 0x5EED_4EA1_7000_0001)),
        }
    }

    /// The gate of a new endpoint: its guards as the balancer's settings
    /// make them, reporting to this owner (`state` is the endpoint being
    /// built).
    pub(crate) fn gate_for(self: &Arc<Self>, state: Weak<EndpointState>) -> Gate {
        let ear: Arc<dyn Listen> = Arc::new(Ear {
            health: Arc::downgrade(self),
            state,
        });
        let guards = self.guards.guards(&ear);
        Gate {
            guarded: guards.any(),
            guards,
            ..Gate::default()
        }
    }

    /// This owner as the judge of every finished call, when it judges
    /// them (outlier detection); `None` when calls without a guard's pass
    /// tell it nothing.
    pub(crate) fn judge(self: &Arc<Self>) -> Option<Arc<dyn Judge>> {
        self.outlier
            .as_ref()
            .map(|_| Arc::clone(self) as Arc<dyn Judge>)
    }

    /// Claims the balancer's one active-check driver; false if one runs.
    pub(crate) fn attach_checks(&self) -> bool {
        let first = !self.checks.swap(true, Ordering::AcqRel);
        if first {
            self.census.enable();
        }
        first
    }

    /// The active-check driver stopped.
    pub(crate) fn detach_checks(&self, states: &[Arc<EndpointState>]) {
        for s in states {
            self.set_check(s, false, String::new());
        }
        self.checks.store(false, Ordering::Release);
    }

    /// Marks `state` as failing (`true`) or passing its active check.
    pub(crate) fn set_check(&self, state: &EndpointState, failing: bool, detail: String) {
        if self.census.set_bit(state, CHECK, failing) {
            let change = if failing {
                HealthChange::CheckFailing { detail }
            } else {
                HealthChange::CheckPassing
            };
            self.events.emit(Some(state), change);
        }
    }

    /// Applies a consecutive rule that `state`'s last call tripped.
    fn eject(&self, state: &EndpointState, reason: EjectionReason, now_ns: u64) {
        let Some(o) = &self.outlier else { return };
        let pool = self.census.members();
        let r = self.rng.next_u64();
        // The detector finds the host in the pool by identity; an endpoint
        // that has left the pool is not ejected.
        if o.detector
            .eject(&o.cfg, &pool, state.outlier(), reason, now_ns, r)
        {
            self.mark_ejected(state, reason, now_ns);
        }
    }

    /// Records an ejection the detector made: the bit, the next sweep, the
    /// event.
    fn mark_ejected(&self, state: &EndpointState, reason: EjectionReason, now_ns: u64) {
        self.census.set_bit(state, EJECTED, true);
        let until = state.outlier().ejected_until_ns().unwrap_or(now_ns);
        self.census.ejected_until(until);
        self.events.emit(
            Some(state),
            HealthChange::Ejected {
                reason,
                duration: Duration::from_nanos(until.saturating_sub(now_ns)),
            },
        );
    }

    /// Runs a due interval evaluation and reconciles the ejected bits with
    /// what it decided.
    fn evaluate(&self, now_ns: u64) {
        let Some(o) = &self.outlier else { return };
        let pool = self.census.members();
        let r = self.rng.next_u64();
        if o.detector
            .maybe_evaluate(&o.cfg, &pool, now_ns, r)
            .is_none()
        {
            return;
        }
        for s in &pool {
            let ejected = s.outlier().is_ejected(now_ns);
            if ejected && s.health_bits() & EJECTED == 0 {
                let reason = s
                    .outlier()
                    .last_reason()
                    .unwrap_or(EjectionReason::SuccessRate);
                self.mark_ejected(s, reason, now_ns);
            }
        }
        // Ejections the evaluation ended are swept at the next census.
        self.census.store_next_return(&pool);
    }

    /// Returns endpoints whose ejection has ended: clears their bit and
    /// reports each. Runs when the earliest ejection end has passed.
    fn sweep_returns(&self, now_ns: u64) {
        let members = self.census.members();
        for s in self.census.clear_returned(&members, now_ns) {
            self.events.emit(Some(&s), HealthChange::Returned);
        }
    }
}

impl Judge for Health {
    fn finished(&self, state: &EndpointState, outcome: &Outcome, latency: Duration, now_ns: u64) {
        let Some(o) = &self.outlier else { return };
        if let Some(reason) = state.outlier().record(&o.cfg, *outcome, latency, now_ns) {
            self.eject(state, reason, now_ns);
        }
        if o.detector.is_due(now_ns) {
            self.evaluate(now_ns);
        }
    }
}

impl Owner for Health {
    #[cold]
    fn returns_due(&self, now_ns: u64) {
        self.sweep_returns(now_ns);
    }

    #[inline]
    fn route(&self, unhealthy: usize, counted: usize) -> Result<Route, ()> {
        self.decide(unhealthy, counted)
    }
}

/// What one endpoint's guards report to, for its health owner.
struct Ear {
    health: Weak<Health>,
    state: Weak<EndpointState>,
}

impl Listen for Ear {
    fn refusing(&self, bit: u8, on: bool) {
        if let (Some(h), Some(s)) = (self.health.upgrade(), self.state.upgrade()) {
            h.census.set_bit(&s, bit, on);
        }
    }

    fn said(&self, said: Said) {
        if let (Some(h), Some(s)) = (self.health.upgrade(), self.state.upgrade()) {
            let change = match said {
                Said::Breaker(t) => HealthChange::Breaker {
                    from: t.from,
                    to: t.to,
                    reason: t.reason,
                },
            };
            h.events.emit(Some(&s), change);
        }
    }
}
