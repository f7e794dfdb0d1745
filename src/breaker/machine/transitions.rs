//! The breaker's transitions, all under its lock: admission in the
//! half-open state, recording outcomes, probe timeouts, entering a state.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::super::backoff;
use super::super::error::CircuitOpen;
use super::super::permit::Ticket;
use super::super::state::{Reason, State, Transition};
use super::super::window::{FAILED, SLOW};
use super::{CircuitBreaker, Inner, Probes, nanos, pack, reaches, unpack};

impl CircuitBreaker {
    pub(super) fn acquire_locked(&self, now: Instant) -> Result<Ticket, CircuitOpen> {
        let now_ns = self.now_ns(now);
        let mut inner = self.lock();
        let (generation, state) = unpack(self.word.load(Ordering::Relaxed));
        let mut event = None;
        let result = match state {
            State::Closed | State::Disabled => Ok(Ticket {
                generation,
                probe: None,
            }),
            State::ForcedOpen => Err((State::ForcedOpen, None)),
            State::Open => {
                let until = self.open_until.load(Ordering::Relaxed);
                if now_ns < until {
                    Err((State::Open, Some(Duration::from_nanos(until - now_ns))))
                } else {
                    event = Some(self.enter(&mut inner, State::HalfOpen, Reason::WaitElapsed, now));
                    self.admit(&mut inner, now_ns)
                }
            }
            State::HalfOpen => match self.expire_probes(&mut inner, now) {
                Some(t) => {
                    event = Some(t);
                    let left = self
                        .open_until
                        .load(Ordering::Relaxed)
                        .saturating_sub(now_ns);
                    Err((State::Open, Some(Duration::from_nanos(left))))
                }
                None => self.admit(&mut inner, now_ns),
            },
        };
        drop(inner);
        self.emit(event);
        result.map_err(|(state, left)| self.refuse(state, left))
    }

    /// Takes a probe slot, if one is free. Called in the half-open state.
    pub(super) fn admit(
        &self,
        inner: &mut Inner,
        now_ns: u64,
    ) -> Result<Ticket, (State, Option<Duration>)> {
        let probes = &mut inner.probes;
        if probes.taken() >= self.config.half_open_probes {
            return Err((State::HalfOpen, None));
        }
        let id = probes.next_id;
        probes.next_id += 1;
        probes.running.push((id, now_ns));
        self.publish_probes(probes);
        let generation = unpack(self.word.load(Ordering::Relaxed)).0;
        Ok(Ticket {
            generation,
            probe: Some(id),
        })
    }

    /// Mirrors the probe slots and the oldest probe's deadline into atomics.
    pub(super) fn publish_probes(&self, probes: &Probes) {
        let timeout = nanos(self.config.half_open_timeout);
        let deadline = probes
            .running
            .iter()
            .map(|&(_, at)| at.saturating_add(timeout))
            .min()
            .unwrap_or(u64::MAX);
        self.probe_deadline.store(deadline, Ordering::Release);
        self.probes_taken.store(probes.taken(), Ordering::Release);
    }

    /// Half-open → open if a running probe has outlived the timeout; the
    /// running probes then count as failed.
    pub(super) fn expire_probes(&self, inner: &mut Inner, now: Instant) -> Option<Transition> {
        if self.now_ns(now) < self.probe_deadline.load(Ordering::Relaxed) {
            return None;
        }
        let probes = &mut inner.probes;
        probes.failed += probes.running.len() as u32;
        probes.completed += probes.running.len() as u32;
        probes.running.clear();
        Some(self.enter(inner, State::Open, Reason::ProbeTimeout, now))
    }

    pub(super) fn record_closed(
        &self,
        inner: &mut Inner,
        flags: u8,
        now: Instant,
    ) -> Option<Transition> {
        inner.window.record(flags, || self.now_ns(now));
        if flags & FAILED != 0 {
            inner.consecutive = inner.consecutive.saturating_add(1);
        } else {
            inner.consecutive = 0;
        }
        let cfg = &self.config;
        let reason = if cfg
            .consecutive_failures
            .is_some_and(|n| inner.consecutive >= n)
        {
            Reason::ConsecutiveFailures
        } else {
            let t = inner.window.totals();
            if t.calls < u64::from(cfg.minimum_calls) {
                return None;
            } else if reaches(t.failed, t.calls, cfg.failure_rate_threshold) {
                Reason::FailureRate
            } else if reaches(t.slow, t.calls, cfg.slow_call_rate_threshold) {
                Reason::SlowCallRate
            } else {
                return None;
            }
        };
        Some(self.enter(inner, State::Open, reason, now))
    }

    pub(super) fn record_probe(
        &self,
        inner: &mut Inner,
        ticket: Ticket,
        flags: u8,
        now: Instant,
    ) -> Option<Transition> {
        // A probe completing after its deadline has timed out.
        if let Some(t) = self.expire_probes(inner, now) {
            return Some(t);
        }
        let id = ticket.probe?;
        let probes = &mut inner.probes;
        let i = probes.running.iter().position(|&(p, _)| p == id)?;
        probes.running.swap_remove(i);
        probes.completed += 1;
        probes.failed += u32::from(flags & FAILED != 0);
        probes.slow += u32::from(flags & SLOW != 0);
        self.publish_probes(probes);
        if probes.completed < self.config.half_open_probes {
            return None;
        }
        let (done, failed, slow) = (
            u64::from(probes.completed),
            u64::from(probes.failed),
            u64::from(probes.slow),
        );
        let cfg = &self.config;
        let bad = reaches(failed, done, cfg.failure_rate_threshold)
            || reaches(slow, done, cfg.slow_call_rate_threshold);
        Some(if bad {
            self.enter(inner, State::Open, Reason::ProbesFailed, now)
        } else {
            self.enter(inner, State::Closed, Reason::ProbesSucceeded, now)
        })
    }

    pub(super) fn manual(&self, to: State, reason: Reason) {
        let now = Instant::now();
        let mut inner = self.lock();
        let event = (to == State::Closed || self.state() != to)
            .then(|| self.enter(&mut inner, to, reason, now));
        drop(inner);
        self.emit(event);
    }

    /// Moves to `to`, preparing that state's data before publishing it.
    /// Called under the lock.
    pub(super) fn enter(
        &self,
        inner: &mut Inner,
        to: State,
        reason: Reason,
        now: Instant,
    ) -> Transition {
        let (generation, from) = unpack(self.word.load(Ordering::Relaxed));
        match to {
            State::Closed => {
                inner.window.reset();
                inner.consecutive = 0;
                inner.opens_in_row = 0;
            }
            State::Open => {
                let cfg = &self.config;
                let wait = backoff::open_wait(
                    cfg.open_wait,
                    cfg.open_wait_cap,
                    cfg.jitter,
                    inner.opens_in_row,
                    self.rng.next_u64(),
                );
                inner.opens_in_row = inner.opens_in_row.saturating_add(1);
                let until = self.now_ns(now).saturating_add(nanos(wait));
                self.open_until.store(until, Ordering::Release);
            }
            State::HalfOpen => {
                let next_id = inner.probes.next_id;
                inner.probes = Probes {
                    next_id,
                    ..Probes::default()
                };
                self.publish_probes(&inner.probes);
            }
            State::Disabled => {
                inner.window.reset();
                inner.consecutive = 0;
            }
            State::ForcedOpen => {}
        }
        if from == State::HalfOpen && to != State::HalfOpen {
            inner.probes.running.clear();
        }
        // Before the state: a reader that sees the new state sees this too.
        self.quiet.store(false, Ordering::Relaxed);
        self.word
            .store(pack(generation.wrapping_add(1), to), Ordering::Release);
        self.entered[to.index()].fetch_add(1, Ordering::Relaxed);
        Transition {
            from,
            to,
            reason,
            at: now,
        }
    }
}
