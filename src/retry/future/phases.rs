//! The phases of [`ResponseFuture`](super::ResponseFuture)'s poll, one
//! method each: the deadline, an attempt in flight (and its hedges), the
//! judgement of an answer, the backoff, and readying the next attempt.
//! Apart from the future's shape and its poll loop (`future.rs`), so that
//! each file holds one idea.

use std::task::{Context, Poll};

use tokio::time::Instant;
use tower_service::Service;

use super::{Fields, Output, Step};
use crate::classify::{Advice, Classify, Outcome};
use crate::retry::Error;
use crate::retry::attempt::{Last, Phase, Slot, SlotPoll, Stop, Wait, finish, min_at};
use crate::retry::replay::Replay;
use crate::retry::stats::bump;
use crate::scope::scoped;
use crate::time::after;

impl<S, Req, R, C> Fields<'_, S, Req, R, C>
where
    S: Service<Req> + Clone,
    R: Replay<Req>,
    C: Classify<S::Response, S::Error>,
{
    /// The deadline passed: every attempt in flight is cut as a timeout and
    /// the last failure (or the deadline) is the answer.
    pub(super) fn expire(&mut self, now: Instant) -> Step<Output<S, Req>> {
        let shared = &*self.own.shared;
        let hedger = shared.hedge.as_ref();
        self.primary.as_mut().time_out(now, hedger);
        for h in self.hedges.iter_mut() {
            h.as_mut().time_out(now, hedger);
        }
        bump(&shared.stats.deadlines);
        let last = std::mem::replace(self.last, Last::Nothing);
        Step::Done(finish(last, Stop::Deadline, *self.attempts))
    }

    /// Attempts in flight: judge what finished, then hedge, wait, or plan
    /// the next attempt once none is left.
    #[inline]
    pub(super) fn calling(&mut self, cx: &mut Context<'_>, now: Instant) -> Step<Output<S, Req>> {
        if let Some(res) = self.judge(cx, now) {
            // A result that stands wins; cancel the others.
            let hedger = self.own.shared.hedge.as_ref();
            self.primary.as_mut().cancel(now, hedger);
            for h in self.hedges.iter_mut() {
                h.as_mut().cancel(now, hedger);
            }
            return Step::Done(res.map_err(Error::Inner));
        }
        self.hedges.retain(|h| h.is_running());
        if self.primary.is_running() || !self.hedges.is_empty() {
            self.in_flight(cx, now)
        } else {
            self.after_failure(now)
        }
    }

    /// Polls every attempt, the primary first, and classifies those that
    /// finished: returns the result that stands, if one does; a failure is
    /// kept as the last one, with the wait it asks for.
    fn judge(
        &mut self,
        cx: &mut Context<'_>,
        now: Instant,
    ) -> Option<Result<S::Response, S::Error>> {
        let shared = &*self.own.shared;
        let hedger = shared.hedge.as_ref();
        for i in 0..=self.hedges.len() {
            let slot = match i {
                0 => self.primary.as_mut(),
                i => self.hedges[i - 1].as_mut(),
            };
            match slot.poll_slot(cx, now, hedger) {
                SlotPoll::Idle | SlotPoll::Pending => {}
                SlotPoll::TimedOut => {
                    bump(&shared.stats.try_timeouts);
                    *self.last = Last::Timeout;
                    *self.wait = Wait::Backoff(None);
                }
                SlotPoll::Done(res, latency) => {
                    let outcome = self.classify.classify(res.as_ref(), latency);
                    let wait = match self.classify.advise(res.as_ref(), outcome) {
                        Advice::Backoff { at_least } => Wait::Backoff(at_least),
                        Advice::After(d) => Wait::Exactly(d),
                        Advice::Refused => {
                            *self.refused = true;
                            Wait::Backoff(None)
                        }
                        _ => {
                            if outcome == Outcome::Success
                                && let Some(h) = hedger
                            {
                                h.record(latency);
                            }
                            return Some(res);
                        }
                    };
                    *self.wait = wait;
                    *self.last = match res {
                        Ok(r) => Last::Response(r),
                        Err(e) => Last::Error(e),
                    };
                    // A6: after a non-fatal answer the next hedge goes at
                    // once (or after the pushback).
                    if hedger.is_some() {
                        *self.hedge_at = Some(match wait {
                            Wait::Exactly(d) => after(now, d),
                            Wait::Backoff(_) => now,
                        });
                    }
                }
            }
        }
        None
    }

    /// Attempts still running: send a hedge if one is due, else sleep until
    /// the first of the attempts' timeouts, the next hedge and the deadline.
    fn in_flight(&mut self, cx: &mut Context<'_>, now: Instant) -> Step<Output<S, Req>> {
        let shared = &*self.own.shared;
        let may_hedge = shared
            .hedge
            .as_ref()
            .is_some_and(|h| *self.hedges_sent < h.max_hedges())
            && !*self.refused
            && *self.attempts < shared.max_attempts;
        if may_hedge && self.hedge_at.is_some_and(|t| now >= t) && self.hedge(cx, now) {
            return Step::Again;
        }
        let hedge_at = self.hedge_at.filter(|t| may_hedge && *t > now);
        let next = self
            .hedges
            .iter()
            .map(|h| h.until())
            .chain([self.primary.until(), hedge_at])
            .fold(*self.deadline, min_at);
        match next {
            Some(at) if self.timer.poll_at(at, cx).is_ready() => Step::Again,
            _ => Step::Wait,
        }
    }

    /// Sends a hedge when the service is ready, the request can be copied
    /// and the budget allows; whether one was sent.
    fn hedge(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let own = &**self.own;
        let shared = &*own.shared;
        let service = self.service.get_or_insert_with(|| own.spare());
        match service.poll_ready(cx) {
            // The service wakes us when ready.
            Poll::Pending => return false,
            Poll::Ready(Err(_)) => {
                *self.hedge_at = None;
                return false;
            }
            Poll::Ready(Ok(())) => *self.hedge_at = None,
        }
        let copy = self.kept.as_ref().and_then(|k| shared.replay.replay(k));
        let Some(mut req) = copy.filter(|_| shared.withdraw()) else {
            return false;
        };
        prepare(&shared.replay, &mut req, *self.deadline, now);
        let tried = &self.tried.ids[..self.tried.len];
        let (fut, seen) = scoped(tried, || service.call(req));
        self.tried.record(seen, &shared.stats, own);
        *self.attempts += 1;
        *self.hedges_sent += 1;
        bump(&shared.stats.hedges);
        self.hedges
            .push(Box::pin(Slot::running(fut, now, shared.per_try_timeout)));
        self.schedule_hedge(now);
        true
    }

    /// Nothing in flight: the last attempt failed. Stop (attempts, refusal,
    /// no copy, deadline or budget) or back off before the next attempt.
    fn after_failure(&mut self, now: Instant) -> Step<Output<S, Req>> {
        let shared = &*self.own.shared;
        let stop = if *self.attempts >= shared.max_attempts {
            Some(Stop::Attempts)
        } else if *self.refused {
            Some(Stop::Refused)
        } else {
            *self.next = self.kept.as_ref().and_then(|k| shared.replay.replay(k));
            if self.next.is_none() {
                bump(&shared.stats.not_replayable);
                Some(Stop::NotReplayable)
            } else {
                None
            }
        };
        let wait = match *self.wait {
            Wait::Exactly(d) => d.min(shared.max_retry_after),
            Wait::Backoff(at_least) => {
                let backoff = shared.backoff.delay(*self.retries);
                at_least.map_or(backoff, |ra| backoff.max(ra.min(shared.max_retry_after)))
            }
        };
        let until = after(now, wait);
        let stop = stop.or_else(|| {
            if self.deadline.is_some_and(|d| until >= d) {
                bump(&shared.stats.deadlines);
                Some(Stop::Deadline)
            } else if !shared.withdraw() {
                Some(Stop::Budget)
            } else {
                None
            }
        });
        if let Some(stop) = stop {
            *self.next = None;
            let last = std::mem::replace(self.last, Last::Nothing);
            return Step::Done(finish(last, stop, *self.attempts));
        }
        *self.last = Last::Nothing;
        *self.phase = Phase::Backoff(until);
        Step::Again
    }

    /// Backing off until `until`.
    pub(super) fn backing_off(
        &mut self,
        cx: &mut Context<'_>,
        now: Instant,
        until: Instant,
    ) -> Step<Output<S, Req>> {
        if now >= until {
            *self.phase = Phase::Ready;
            Step::Again
        } else if self.timer.poll_at(until, cx).is_pending() {
            Step::Wait
        } else {
            Step::Again
        }
    }

    /// The backoff is over: send the next attempt once the service is ready
    /// (the deadline still applies while it is not).
    pub(super) fn ready(&mut self, cx: &mut Context<'_>, now: Instant) -> Step<Output<S, Req>> {
        let own = &**self.own;
        let shared = &*own.shared;
        let service = self.service.get_or_insert_with(|| own.spare());
        match service.poll_ready(cx) {
            Poll::Pending => {
                return match *self.deadline {
                    Some(d) if self.timer.poll_at(d, cx).is_ready() => Step::Again,
                    _ => Step::Wait,
                };
            }
            Poll::Ready(Err(e)) => return Step::Done(Err(Error::Inner(e))),
            Poll::Ready(Ok(())) => {}
        }
        let Some(mut req) = self.next.take() else {
            // Unreachable: a retry is only planned with a copy in hand.
            return Step::Done(Err(Error::TryTimeout {
                attempts: *self.attempts,
            }));
        };
        prepare(&shared.replay, &mut req, *self.deadline, now);
        let tried = &self.tried.ids[..self.tried.len];
        let (fut, seen) = scoped(tried, || service.call(req));
        self.tried.record(seen, &shared.stats, own);
        *self.attempts += 1;
        *self.retries += 1;
        bump(&shared.stats.retries);
        self.primary
            .set(Slot::running(fut, now, shared.per_try_timeout));
        self.schedule_hedge(now);
        *self.phase = Phase::Calling;
        Step::Again
    }

    /// Times the next hedge after one more attempt went out, if any is left.
    fn schedule_hedge(&mut self, now: Instant) {
        if let Some(h) = self.own.shared.hedge.as_ref()
            && *self.hedges_sent < h.max_hedges()
        {
            *self.hedge_at = Some(after(now, h.delay()));
        }
    }
}

/// Readies a later attempt's copy with the time the call has left, when it
/// has a deadline.
fn prepare<Req, R: Replay<Req>>(
    replay: &R,
    req: &mut Req,
    deadline: Option<Instant>,
    now: Instant,
) {
    if let Some(d) = deadline {
        replay.prepare(req, d.saturating_duration_since(now));
    }
}
