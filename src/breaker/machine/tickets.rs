//! The ticket API: admission and recording by ticket, for owners that
//! hold the breaker in their own `Arc` (the balancer's guard); the
//! permits go through it too.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::{CircuitBreaker, unpack};
use crate::breaker::error::CircuitOpen;
use crate::breaker::permit::Ticket;
use crate::breaker::state::State;
use crate::breaker::window::{FAILED, SLOW};
use crate::outcome::{FailureKind, Outcome};

impl CircuitBreaker {
    /// Asks to make one call; see [`try_acquire`](Self::try_acquire). The
    /// ticket must be passed back to [`record_ticket`](Self::record_ticket)
    /// or [`release_ticket`](Self::release_ticket).
    pub(crate) fn acquire_ticket(&self, now: Instant) -> Result<Ticket, CircuitOpen> {
        let (generation, state) = unpack(self.word.load(Ordering::Acquire));
        match state {
            State::Closed | State::Disabled => {
                return Ok(Ticket {
                    generation,
                    probe: None,
                });
            }
            State::ForcedOpen => return Err(self.refuse(State::ForcedOpen, None)),
            State::Open => {
                let now_ns = self.now_ns(now);
                let until = self.open_until.load(Ordering::Acquire);
                if now_ns < until {
                    let left = Duration::from_nanos(until - now_ns);
                    return Err(self.refuse(State::Open, Some(left)));
                }
            }
            State::HalfOpen => {
                let full =
                    self.probes_taken.load(Ordering::Acquire) >= self.config.half_open_probes;
                if full && self.now_ns(now) < self.probe_deadline.load(Ordering::Acquire) {
                    return Err(self.refuse(State::HalfOpen, None));
                }
            }
        }
        self.acquire_locked(now)
    }

    /// Records the outcome of the call `ticket` admitted.
    pub(crate) fn record_ticket(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        latency: Duration,
        now: Instant,
    ) {
        let mut flags = match outcome {
            Outcome::Ignore => return self.release_ticket(ticket),
            Outcome::Success => 0,
            // A slow success is not a failure: counting it as both would let
            // the failure-rate threshold (50 %) fire long before the slow-call
            // threshold (100 %) the user set for slowness.
            Outcome::Failure(FailureKind::Slow) => SLOW,
            Outcome::Failure(_) => FAILED,
        };
        if latency >= self.config.slow_call_duration {
            flags |= SLOW;
        }
        let (generation, state) = unpack(self.word.load(Ordering::Acquire));
        if generation != ticket.generation || !matches!(state, State::Closed | State::HalfOpen) {
            return;
        }
        if flags == 0 && state == State::Closed && self.quiet.load(Ordering::Relaxed) {
            return;
        }
        let mut inner = self.lock();
        let (generation, state) = unpack(self.word.load(Ordering::Relaxed));
        if generation != ticket.generation {
            return;
        }
        let event = match state {
            State::Closed => {
                let event = self.record_closed(&mut inner, flags, now);
                if event.is_none() {
                    self.quiet.store(inner.window.is_quiet(), Ordering::Relaxed);
                }
                event
            }
            State::HalfOpen => self.record_probe(&mut inner, ticket, flags, now),
            _ => None,
        };
        drop(inner);
        self.emit(event);
    }

    /// Gives back the slot of a call that will not be recorded.
    pub(crate) fn release_ticket(&self, ticket: Ticket) {
        let Some(id) = ticket.probe else { return };
        if unpack(self.word.load(Ordering::Acquire)).0 != ticket.generation {
            return;
        }
        let mut inner = self.lock();
        if unpack(self.word.load(Ordering::Relaxed)).0 != ticket.generation {
            return;
        }
        let probes = &mut inner.probes;
        if let Some(i) = probes.running.iter().position(|&(p, _)| p == id) {
            probes.running.swap_remove(i);
            self.publish_probes(probes);
        }
    }
}
