//! The response future of [`Retry`](super::Retry): a state machine over the
//! attempts in flight (the current one and its hedges) and one timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use super::Error;
use super::attempt::{Last, Phase, Slot, SlotPoll, Stop, Timer, Tried, Wait, finish, min_at};
use super::replay::Replay;
use super::service::Own;
use super::stats::bump;
use crate::balance::MAX_AVOID;
use crate::classify::{Advice, Classify, Outcome};
use crate::scope::{self, scoped};
use crate::time::after;

pin_project! {
    /// The response future of [`Retry`](super::Retry).
    ///
    /// Holds the running attempt (and its hedges, if any were sent), what
    /// later attempts are copied from, the ids of the endpoints tried so
    /// far (inline, up to [`MAX_AVOID`]), and one timer for whichever comes
    /// first: the per-try timeout, the next hedge, the end of a backoff, or
    /// the overall deadline. A call that answers at once never allocates;
    /// the timer is boxed and made the first time the call waits on it, and
    /// hedges are boxed. Dropping
    /// the future cancels every attempt in flight. Polled again after it
    /// completed, it stays pending.
    pub struct ResponseFuture<S, Req, R, C>
    where
        S: Service<Req>,
        R: Replay<Req>,
    {
        #[pin]
        primary: Slot<S::Future>,
        hedges: Vec<Pin<Box<Slot<S::Future>>>>,
        timer: Timer,
        // What later attempts and hedges run on, cloned from the wrapped
        // service when the first of them is due.
        service: Option<S>,
        own: Arc<Own<S, R>>,
        classify: C,
        kept: Option<R::Kept>,
        next: Option<Req>,
        tried: Tried,
        attempts: u32,
        retries: u32,
        hedges_sent: u32,
        deadline: Option<Instant>,
        hedge_at: Option<Instant>,
        phase: Phase,
        last: Last<S::Response, S::Error>,
        wait: Wait,
        refused: bool,
    }
}

impl<S, Req, R, C> ResponseFuture<S, Req, R, C>
where
    S: Service<Req>,
    R: Replay<Req>,
{
    /// The future of a call, with its first attempt sent: `ready` (the
    /// service the caller polled ready) takes `req` at `now`.
    ///
    /// The attempt's future is written straight into its slot, from inside
    /// the scopes that carry the time and report the pick, so that only
    /// `()` comes back out through them: returned through the scopes and
    /// then moved into the slot, the balancer's future was copied five times
    /// per request (about a tenth of the retry layer's cost in
    /// `benches/interleaved.rs`, `retry`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn send(
        ready: &mut S,
        req: Req,
        own: Arc<Own<S, R>>,
        classify: C,
        kept: Option<R::Kept>,
        now: Instant,
        deadline: Option<Duration>,
    ) -> Self {
        let shared = &*own.shared;
        let hedge_at = match &shared.hedge {
            Some(h) if kept.is_some() => Some(after(now, h.delay())),
            _ => None,
        };
        let timeout = shared.per_try_timeout;
        let mut this = Self {
            primary: Slot::Idle,
            hedges: Vec::new(),
            timer: Timer::default(),
            deadline: deadline.map(|d| after(now, d)),
            service: None,
            own,
            classify,
            kept,
            next: None,
            tried: Tried {
                ids: [0; MAX_AVOID],
                len: 0,
            },
            attempts: 1,
            retries: 0,
            hedges_sent: 0,
            hedge_at,
            phase: Phase::Calling,
            last: Last::Nothing,
            wait: Wait::Backoff(None),
            refused: false,
        };
        let ((), seen) = scope::at(now, || {
            scoped(&[], || {
                this.primary = Slot::running(ready.call(req), now, timeout);
            })
        });
        this.tried.push(seen.picked);
        this
    }
}

impl<S, Req, R, C> Future for ResponseFuture<S, Req, R, C>
where
    S: Service<Req> + Clone,
    R: Replay<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Output = Result<S::Response, Error<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let own = &**this.own;
        let shared = &*own.shared;
        let hedger = shared.hedge.as_ref();
        loop {
            let now = Instant::now();
            if let Phase::Done = this.phase {
                // Polled after completion.
                return Poll::Pending;
            }
            if this.deadline.is_some_and(|d| now >= d) {
                // The deadline is ours too: attempts cut by it are timeouts.
                this.primary.as_mut().time_out(now, hedger);
                for h in this.hedges.iter_mut() {
                    h.as_mut().time_out(now, hedger);
                }
                bump(&shared.stats.deadlines);
                *this.phase = Phase::Done;
                let last = std::mem::replace(this.last, Last::Nothing);
                return Poll::Ready(finish(last, Stop::Deadline, *this.attempts));
            }
            match *this.phase {
                Phase::Done => return Poll::Pending,
                Phase::Calling => {
                    // Judge whatever finished, the primary first.
                    let mut won = None;
                    for i in 0..=this.hedges.len() {
                        let slot = match i {
                            0 => this.primary.as_mut(),
                            i => this.hedges[i - 1].as_mut(),
                        };
                        match slot.poll_slot(cx, now, hedger) {
                            SlotPoll::Idle | SlotPoll::Pending => {}
                            SlotPoll::TimedOut => {
                                bump(&shared.stats.try_timeouts);
                                *this.last = Last::Timeout;
                                *this.wait = Wait::Backoff(None);
                            }
                            SlotPoll::Done(res, latency) => {
                                let outcome = this.classify.classify(res.as_ref(), latency);
                                let advice = this.classify.advise(res.as_ref(), outcome);
                                let wait = match advice {
                                    Advice::Backoff { at_least } => Wait::Backoff(at_least),
                                    Advice::After(d) => Wait::Exactly(d),
                                    Advice::Refused => {
                                        *this.refused = true;
                                        Wait::Backoff(None)
                                    }
                                    _ => {
                                        if outcome == Outcome::Success
                                            && let Some(h) = hedger
                                        {
                                            h.record(latency);
                                        }
                                        won = Some(res);
                                        break;
                                    }
                                };
                                *this.wait = wait;
                                *this.last = match res {
                                    Ok(r) => Last::Response(r),
                                    Err(e) => Last::Error(e),
                                };
                                // A6: after a non-fatal answer the next hedge
                                // goes at once (or after the pushback).
                                if hedger.is_some() {
                                    *this.hedge_at = Some(match wait {
                                        Wait::Exactly(d) => after(now, d),
                                        Wait::Backoff(_) => now,
                                    });
                                }
                            }
                        }
                    }
                    if let Some(res) = won {
                        // A result that stands wins; cancel the others.
                        this.primary.as_mut().cancel(now, hedger);
                        for h in this.hedges.iter_mut() {
                            h.as_mut().cancel(now, hedger);
                        }
                        *this.phase = Phase::Done;
                        return Poll::Ready(res.map_err(Error::Inner));
                    }
                    this.hedges.retain(|h| h.is_running());
                    let running = this.primary.is_running() || !this.hedges.is_empty();
                    if running {
                        let may_hedge = hedger.is_some_and(|h| *this.hedges_sent < h.max_hedges())
                            && !*this.refused
                            && *this.attempts < shared.max_attempts;
                        if may_hedge && this.hedge_at.is_some_and(|t| now >= t) {
                            let service = this.service.get_or_insert_with(|| own.spare());
                            match service.poll_ready(cx) {
                                // The service wakes us when ready.
                                Poll::Pending => {}
                                Poll::Ready(Err(_)) => *this.hedge_at = None,
                                Poll::Ready(Ok(())) => {
                                    *this.hedge_at = None;
                                    let copy =
                                        this.kept.as_ref().and_then(|k| shared.replay.replay(k));
                                    if let Some(mut req) = copy
                                        && shared.withdraw()
                                    {
                                        prepare(&shared.replay, &mut req, *this.deadline, now);
                                        let service =
                                            this.service.get_or_insert_with(|| own.spare());
                                        let tried = &this.tried.ids[..this.tried.len];
                                        let (fut, seen) =
                                            scope::at(now, || scoped(tried, || service.call(req)));
                                        this.tried.record(seen, &shared.stats);
                                        *this.attempts += 1;
                                        *this.hedges_sent += 1;
                                        bump(&shared.stats.hedges);
                                        this.hedges.push(Box::pin(Slot::running(
                                            fut,
                                            now,
                                            shared.per_try_timeout,
                                        )));
                                        if let Some(h) = hedger
                                            && *this.hedges_sent < h.max_hedges()
                                        {
                                            *this.hedge_at = Some(after(now, h.delay()));
                                        }
                                        continue;
                                    }
                                }
                            }
                        }
                        let hedge_at = this.hedge_at.filter(|t| may_hedge && *t > now);
                        let next = this
                            .hedges
                            .iter()
                            .map(|h| h.until())
                            .chain([this.primary.until(), hedge_at])
                            .fold(*this.deadline, min_at);
                        match next {
                            Some(at) if this.timer.poll_at(at, cx).is_ready() => {
                                continue;
                            }
                            _ => return Poll::Pending,
                        }
                    }
                    // Nothing in flight: the last attempt failed. Again?
                    let stop = if *this.attempts >= shared.max_attempts {
                        Some(Stop::Attempts)
                    } else if *this.refused {
                        Some(Stop::Refused)
                    } else {
                        *this.next = this.kept.as_ref().and_then(|k| shared.replay.replay(k));
                        if this.next.is_none() {
                            bump(&shared.stats.not_replayable);
                            Some(Stop::NotReplayable)
                        } else {
                            None
                        }
                    };
                    let wait = match *this.wait {
                        Wait::Exactly(d) => d.min(shared.max_retry_after),
                        Wait::Backoff(at_least) => {
                            let backoff = shared.backoff.delay(*this.retries);
                            at_least
                                .map_or(backoff, |ra| backoff.max(ra.min(shared.max_retry_after)))
                        }
                    };
                    let until = after(now, wait);
                    let stop = stop.or_else(|| {
                        if this.deadline.is_some_and(|d| until >= d) {
                            bump(&shared.stats.deadlines);
                            Some(Stop::Deadline)
                        } else if !shared.withdraw() {
                            Some(Stop::Budget)
                        } else {
                            None
                        }
                    });
                    if let Some(stop) = stop {
                        *this.phase = Phase::Done;
                        *this.next = None;
                        let last = std::mem::replace(this.last, Last::Nothing);
                        return Poll::Ready(finish(last, stop, *this.attempts));
                    }
                    *this.last = Last::Nothing;
                    *this.phase = Phase::Backoff(until);
                }
                Phase::Backoff(until) => {
                    if now >= until {
                        *this.phase = Phase::Ready;
                    } else if this.timer.poll_at(until, cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                Phase::Ready => match this
                    .service
                    .get_or_insert_with(|| own.spare())
                    .poll_ready(cx)
                {
                    Poll::Pending => match *this.deadline {
                        Some(d) if this.timer.poll_at(d, cx).is_ready() => {}
                        _ => return Poll::Pending,
                    },
                    Poll::Ready(Err(e)) => {
                        *this.phase = Phase::Done;
                        return Poll::Ready(Err(Error::Inner(e)));
                    }
                    Poll::Ready(Ok(())) => {
                        let Some(mut req) = this.next.take() else {
                            // Unreachable: a retry is only planned with a copy in hand.
                            *this.phase = Phase::Done;
                            return Poll::Ready(Err(Error::TryTimeout {
                                attempts: *this.attempts,
                            }));
                        };
                        prepare(&shared.replay, &mut req, *this.deadline, now);
                        let service = this.service.get_or_insert_with(|| own.spare());
                        let tried = &this.tried.ids[..this.tried.len];
                        let (fut, seen) = scope::at(now, || scoped(tried, || service.call(req)));
                        this.tried.record(seen, &shared.stats);
                        *this.attempts += 1;
                        *this.retries += 1;
                        bump(&shared.stats.retries);
                        this.primary
                            .set(Slot::running(fut, now, shared.per_try_timeout));
                        if let Some(h) = hedger
                            && *this.hedges_sent < h.max_hedges()
                        {
                            *this.hedge_at = Some(after(now, h.delay()));
                        }
                        *this.phase = Phase::Calling;
                    }
                },
            }
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
