//! [`Guards`]: what the health owner keeps on each endpoint (its circuit
//! breaker, when the balancer has breakers, and its outlier-detection
//! counters), and the [`Pass`] an admitted call carries back to them.
//!
//! The endpoint model stores one `Guards` per endpoint and carries a call's
//! `Pass` from admission to its end, but never reads either: admission,
//! judgement and every read of breaker or ejection state go through the
//! health owner ([`crate::health`]), which calls the methods here. So the
//! model names neither the breaker's nor the detector's types, and adding a
//! guard (a per-endpoint rate limit, say) changes this file and the owner,
//! not the model.
//!
//! A leaf, like [`crate::outcome`]: it uses `breaker` and `outlier`, and
//! nothing here knows the endpoint. It could not live in `health`, which
//! sits above the endpoint model (the model would then import from the
//! folder that imports it).

use std::time::Duration;

use tokio::time::Instant;

use crate::breaker::{CircuitBreaker, CircuitOpen, Ticket};
use crate::outcome::Outcome;
use crate::outlier::HostStats;

/// One endpoint's guards: its circuit breaker and outlier counters.
#[derive(Debug, Default)]
pub(crate) struct Guards {
    breaker: Option<CircuitBreaker>,
    outlier: HostStats,
}

/// What a call admitted by the guards must give back when it ends: today
/// the breaker's ticket (the state period that admitted it and its probe
/// slot). Opaque to the endpoint, which only carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass(Ticket);

impl Guards {
    /// Guards with `breaker` (if the balancer has breakers) and fresh
    /// outlier counters.
    pub(crate) fn new(breaker: Option<CircuitBreaker>) -> Self {
        Self {
            breaker,
            outlier: HostStats::default(),
        }
    }

    /// The circuit breaker, when the balancer has breakers.
    #[inline(always)]
    pub(crate) fn breaker(&self) -> Option<&CircuitBreaker> {
        self.breaker.as_ref()
    }

    /// The outlier-detection counters and ejection state.
    #[inline(always)]
    pub(crate) fn outlier(&self) -> &HostStats {
        &self.outlier
    }

    /// Asks the guards to admit one call at `now`: `Ok(None)` without a
    /// breaker (nothing to give back), the call's pass when the breaker
    /// admits it, its refusal otherwise.
    #[inline]
    pub(crate) fn admit(&self, now: Instant) -> Result<Option<Pass>, CircuitOpen> {
        match &self.breaker {
            Some(b) => b.acquire_ticket(now).map(|t| Some(Pass(t))),
            None => Ok(None),
        }
    }

    /// Reports how the call `pass` admitted ended.
    pub(crate) fn record(&self, pass: Pass, outcome: Outcome, latency: Duration, now: Instant) {
        if let Some(b) = &self.breaker {
            b.record_ticket(pass.0, outcome, latency, now);
        }
    }

    /// Gives back what the call `pass` admitted holds (a half-open probe's
    /// slot), for a call that will not be reported.
    pub(crate) fn release(&self, pass: Pass) {
        if let Some(b) = &self.breaker {
            b.release_ticket(pass.0);
        }
    }
}
