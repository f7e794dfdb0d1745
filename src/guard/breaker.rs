//! The circuit breaker as a guard: an endpoint whose breaker is not
//! closed refuses calls, but for the half-open probes it lets through.

use std::time::Duration;

use tokio::time::Instant;

use super::{Guard, GuardConfig, GuardSettings, Said, Watch, sealed};
use crate::breaker::{CircuitBreaker, CircuitBreakerConfig, State, Ticket};
use crate::error::Unavailable;
use crate::outcome::Outcome;

impl Guard for CircuitBreaker {
    type Config = CircuitBreakerConfig;
    /// The state period that admitted the call, and its probe slot.
    type Pass = Ticket;

    /// The breaker's transitions set its health bit (while it is not
    /// closed) and are reported as health events.
    fn new(config: &CircuitBreakerConfig, watch: Watch) -> Self {
        CircuitBreaker::new(config.clone()).on_transition(move |t| {
            watch.refusing(!matches!(t.to, State::Closed | State::Disabled));
            watch.say(Said::Breaker(t));
        })
    }

    #[inline]
    fn admit(&self, now: Instant) -> Result<Ticket, ()> {
        self.acquire_ticket(now).map_err(drop)
    }

    /// An overdue probe is let through to the admission, which moves the
    /// breaker back to open (and refuses): a breaker never stays half-open
    /// on a probe that never answers.
    #[inline]
    fn permit(&self, now: Instant) -> bool {
        self.is_call_permitted(now) || self.is_probe_overdue(now)
    }

    fn record(&self, pass: Ticket, outcome: Outcome, latency: Duration, now: Instant) {
        self.record_ticket(pass, outcome, latency, now);
    }

    fn release(&self, pass: Ticket) {
        self.release_ticket(pass);
    }

    fn count_refusal(&self, now: Instant, u: &mut Unavailable) -> bool {
        if self.is_call_permitted(now) {
            return false;
        }
        u.breaker_open += 1;
        if let Some(t) = self.time_until_permitted(now) {
            u.retry_in = Some(u.retry_in.map_or(t, |r| r.min(t)));
        }
        true
    }
}

impl GuardConfig for CircuitBreakerConfig {}

impl sealed::Install for CircuitBreakerConfig {
    fn install(self, settings: &mut GuardSettings) {
        settings.breaker = Some(self);
    }
}
