//! Health events: every change of an endpoint's or a balancer's health, as a
//! `tracing` event and as a value for the user's hook.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::breaker::{Reason as BreakerReason, State as BreakerState};
use crate::model::EndpointState;
use crate::outlier::EjectionReason;

/// One health change, given to the hook set with
/// [`Builder::on_health_change`](crate::balance::Builder::on_health_change)
/// and logged as a `tracing` event on target `tower_lb` with the fields
/// `balancer`, `endpoint`, `from`, `to` and `reason`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HealthEvent {
    /// The balancer's name ([`Builder::name`](crate::balance::Builder::name)).
    pub balancer: Arc<str>,
    /// The endpoint it concerns (its label), if it concerns one.
    pub endpoint: Option<Arc<str>>,
    /// The endpoint's id ([`EndpointState::id`]), if it concerns one.
    pub endpoint_id: Option<u64>,
    /// What changed.
    pub change: HealthChange,
    /// When (tokio's clock).
    pub at: Instant,
}

/// What changed, in a [`HealthEvent`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HealthChange {
    /// The endpoint's circuit breaker moved.
    Breaker {
        /// The state left.
        from: BreakerState,
        /// The state entered.
        to: BreakerState,
        /// Why.
        reason: BreakerReason,
    },
    /// Outlier detection ejected the endpoint.
    Ejected {
        /// The rule that fired.
        reason: EjectionReason,
        /// How long the ejection lasts.
        duration: Duration,
    },
    /// The endpoint's ejection ended.
    Returned,
    /// Too few endpoints are healthy: the balancer routes in panic.
    PanicEntered {
        /// Healthy endpoints.
        healthy: usize,
        /// Endpoints counted.
        total: usize,
    },
    /// Enough endpoints are healthy again.
    PanicLeft {
        /// Healthy endpoints.
        healthy: usize,
        /// Endpoints counted.
        total: usize,
    },
    /// The endpoint's active health check started failing (it takes no picks).
    CheckFailing {
        /// What the last probe saw.
        detail: String,
    },
    /// The endpoint's active health check passes again.
    CheckPassing,
    /// A discovery source failed; the last good endpoint set stays.
    DiscoveryError {
        /// The source (`"dns"`, `"kube"`, `"xds"`, ...).
        source: String,
        /// The error's text.
        error: String,
    },
    /// A retry layer's budget refused a retry or hedge (reported by the
    /// layer's own hook, see
    /// [`retry::Builder::on_health_change`](crate::retry::Builder::on_health_change)).
    BudgetExhausted,
}

impl HealthChange {
    /// The state left, in words (`"closed"`, `"healthy"`, `"normal"`, ...).
    pub fn from(&self) -> &'static str {
        match self {
            HealthChange::Breaker { from, .. } => from.as_str(),
            HealthChange::Ejected { .. } => "healthy",
            HealthChange::Returned => "ejected",
            HealthChange::PanicEntered { .. } => "normal",
            HealthChange::PanicLeft { .. } => "panic",
            HealthChange::CheckFailing { .. } => "passing",
            HealthChange::CheckPassing => "failing",
            HealthChange::DiscoveryError { .. } | HealthChange::BudgetExhausted => "",
        }
    }

    /// The state entered, in words.
    pub fn to(&self) -> &'static str {
        match self {
            HealthChange::Breaker { to, .. } => to.as_str(),
            HealthChange::Ejected { .. } => "ejected",
            HealthChange::Returned => "healthy",
            HealthChange::PanicEntered { .. } => "panic",
            HealthChange::PanicLeft { .. } => "normal",
            HealthChange::CheckFailing { .. } => "failing",
            HealthChange::CheckPassing => "passing",
            HealthChange::DiscoveryError { .. } | HealthChange::BudgetExhausted => "",
        }
    }

    /// Why, in words.
    pub fn reason(&self) -> String {
        match self {
            HealthChange::Breaker { reason, .. } => reason.as_str().to_string(),
            HealthChange::Ejected { reason, .. } => reason.as_str().to_string(),
            HealthChange::Returned => "ejection_ended".to_string(),
            HealthChange::PanicEntered { healthy, total }
            | HealthChange::PanicLeft { healthy, total } => {
                format!("{healthy} of {total} healthy")
            }
            HealthChange::CheckFailing { detail } => detail.clone(),
            HealthChange::CheckPassing => "check_passed".to_string(),
            HealthChange::DiscoveryError { source, error } => format!("{source}: {error}"),
            HealthChange::BudgetExhausted => "retry_budget_exhausted".to_string(),
        }
    }

    /// True for changes for the worse (logged at `WARN`, the others at `INFO`).
    pub fn is_worse(&self) -> bool {
        match self {
            HealthChange::Breaker { to, .. } => {
                !matches!(to, BreakerState::Closed | BreakerState::Disabled)
            }
            HealthChange::Ejected { .. }
            | HealthChange::PanicEntered { .. }
            | HealthChange::CheckFailing { .. }
            | HealthChange::DiscoveryError { .. }
            | HealthChange::BudgetExhausted => true,
            HealthChange::Returned
            | HealthChange::PanicLeft { .. }
            | HealthChange::CheckPassing => false,
        }
    }
}

impl fmt::Display for HealthEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.balancer)?;
        if let Some(e) = &self.endpoint {
            write!(f, " {e}")?;
        }
        let (from, to) = (self.change.from(), self.change.to());
        if !from.is_empty() {
            write!(f, ": {from} -> {to}")?;
        }
        write!(f, " ({})", self.change.reason())
    }
}

/// The user's hook.
pub(crate) type Hook = Arc<dyn Fn(&HealthEvent) + Send + Sync>;

/// Where a balancer's health events go: `tracing`, and the hook if any.
#[derive(Clone)]
pub(crate) struct Events {
    pub(crate) balancer: Arc<str>,
    pub(crate) hook: Option<Hook>,
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events")
            .field("balancer", &self.balancer)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl Events {
    /// Emits one change, about `endpoint` if given.
    pub(crate) fn emit(&self, endpoint: Option<&EndpointState>, change: HealthChange) {
        let event = HealthEvent {
            balancer: Arc::clone(&self.balancer),
            endpoint: endpoint.map(|e| Arc::from(e.label())),
            endpoint_id: endpoint.map(EndpointState::id),
            change,
            at: Instant::now(),
        };
        log(&event);
        if let Some(hook) = &self.hook {
            hook(&event);
        }
    }
}

/// The `tracing` side of an event.
pub(crate) fn log(event: &HealthEvent) {
    let endpoint = event.endpoint.as_deref().unwrap_or("");
    let (from, to, reason) = (
        event.change.from(),
        event.change.to(),
        event.change.reason(),
    );
    if let HealthChange::DiscoveryError { source, error } = &event.change {
        // A discovery error also carries its source and error text as
        // fields of their own.
        tracing::warn!(
            target: "tower_lb",
            balancer = %event.balancer,
            endpoint,
            from,
            to,
            reason = %reason,
            source = source.as_str(),
            error = %error,
            "discovery failed; keeping the last good endpoint set"
        );
    } else if event.change.is_worse() {
        tracing::warn!(
            target: "tower_lb",
            balancer = %event.balancer,
            endpoint,
            from,
            to,
            reason = %reason,
            "health changed"
        );
    } else {
        tracing::info!(
            target: "tower_lb",
            balancer = %event.balancer,
            endpoint,
            from,
            to,
            reason = %reason,
            "health changed"
        );
    }
}
