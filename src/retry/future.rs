//! The response future of [`Retry`](super::Retry): a state machine over at
//! most two attempts in flight (the current one and a hedge) and one timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use super::Error;
use super::attempt::{
    Last, Phase, Slot, SlotPoll, Stop, Timer, Tried, finish, min_at, next_request,
};
use super::layer::Shared;
use super::policy::Replay;
use super::stats::bump;
use crate::balance::MAX_AVOID;
use crate::classify::{Classify, Outcome};
use crate::scope::scoped;
use crate::time::after;

pin_project! {
    /// The response future of [`Retry`](super::Retry).
    ///
    /// Holds the running attempt (and the hedge, if one was sent), the copy
    /// of the request kept for later attempts, the ids of the endpoints
    /// tried so far (inline, up to [`MAX_AVOID`]), and one timer for
    /// whichever comes first: the per-try timeout, the hedge delay, the end
    /// of a backoff, or the overall deadline. A single attempt with no
    /// timeouts never allocates and never touches the timer. Dropping the
    /// future cancels every attempt in flight. Polled again after it
    /// completed, it stays pending.
    pub struct ResponseFuture<S, Req, R, C>
    where
        S: Service<Req>,
    {
        #[pin]
        primary: Slot<S::Future>,
        #[pin]
        hedge: Slot<S::Future>,
        #[pin]
        timer: Timer,
        service: S,
        shared: Arc<Shared<R, C>>,
        request: Option<Req>,
        tried: Tried,
        attempts: u32,
        retries: u32,
        hedged: bool,
        deadline: Option<Instant>,
        hedge_at: Option<Instant>,
        phase: Phase,
        last: Last<S::Response, S::Error>,
        retry_after: Option<Duration>,
    }
}

impl<S, Req, R, C> ResponseFuture<S, Req, R, C>
where
    S: Service<Req>,
{
    pub(crate) fn new(
        service: S,
        shared: Arc<Shared<R, C>>,
        request: Option<Req>,
        fut: S::Future,
        picked: Option<u64>,
        now: Instant,
    ) -> Self {
        let mut tried = Tried {
            ids: [0; MAX_AVOID],
            len: 0,
        };
        tried.push(picked);
        let hedge_at = match &shared.hedge {
            Some(h) if request.is_some() => Some(after(now, h.delay())),
            _ => None,
        };
        Self {
            primary: Slot::running(fut, now, shared.per_try_timeout),
            hedge: Slot::Idle,
            timer: Timer::Off,
            deadline: shared.deadline.map(|d| after(now, d)),
            service,
            shared,
            request,
            tried,
            attempts: 1,
            retries: 0,
            hedged: false,
            hedge_at,
            phase: Phase::Calling,
            last: Last::Nothing,
            retry_after: None,
        }
    }
}

impl<S, Req, R, C> Future for ResponseFuture<S, Req, R, C>
where
    S: Service<Req>,
    R: Replay<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Output = Result<S::Response, Error<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let shared = &**this.shared;
        loop {
            let now = Instant::now();
            if let Phase::Done = this.phase {
                // Polled after completion.
                return Poll::Pending;
            }
            if this.deadline.is_some_and(|d| now >= d) {
                // The deadline is ours too: attempts cut by it are timeouts.
                let hedger = shared.hedge.as_ref();
                this.primary.as_mut().time_out(now, hedger);
                this.hedge.as_mut().time_out(now, hedger);
                bump(&shared.stats.deadlines);
                *this.phase = Phase::Done;
                let last = std::mem::replace(this.last, Last::Nothing);
                return Poll::Ready(finish(last, Stop::Deadline, *this.attempts));
            }
            match *this.phase {
                Phase::Done => return Poll::Pending,
                Phase::Calling => {
                    // Judge whatever finished, primary first.
                    for hedge_slot in [false, true] {
                        let (slot, other) = if hedge_slot {
                            (this.hedge.as_mut(), this.primary.as_mut())
                        } else {
                            (this.primary.as_mut(), this.hedge.as_mut())
                        };
                        match slot.poll_slot(cx, now, shared.hedge.as_ref()) {
                            SlotPoll::Idle | SlotPoll::Pending => {}
                            SlotPoll::TimedOut => {
                                bump(&shared.stats.try_timeouts);
                                *this.last = Last::Timeout;
                                *this.retry_after = None;
                            }
                            SlotPoll::Done(res, latency) => {
                                match shared.classify.classify(res.as_ref(), latency) {
                                    Outcome::Failure(kind) if kind.is_hard() => {
                                        *this.retry_after = kind.retry_after();
                                        *this.last = match res {
                                            Ok(r) => Last::Response(r),
                                            Err(e) => Last::Error(e),
                                        };
                                    }
                                    outcome => {
                                        if outcome == Outcome::Success
                                            && let Some(h) = &shared.hedge
                                        {
                                            h.record(latency);
                                        }
                                        // First good answer wins; cancel the other.
                                        other.cancel(now, shared.hedge.as_ref());
                                        *this.phase = Phase::Done;
                                        return Poll::Ready(res.map_err(Error::Inner));
                                    }
                                }
                            }
                        }
                    }
                    if this.primary.is_running() || this.hedge.is_running() {
                        // Time to hedge?
                        if !*this.hedged
                            && !this.hedge.is_running()
                            && this.hedge_at.is_some_and(|t| now >= t)
                            && *this.attempts < shared.max_attempts
                            && this.request.is_some()
                        {
                            match this.service.poll_ready(cx) {
                                // The service wakes us when ready.
                                Poll::Pending => {}
                                Poll::Ready(Err(_)) => *this.hedged = true,
                                Poll::Ready(Ok(())) => {
                                    *this.hedged = true;
                                    if shared.withdraw() {
                                        let req = next_request(
                                            &shared.replay,
                                            this.request,
                                            *this.attempts,
                                            shared.max_attempts,
                                        );
                                        if let Some(req) = req {
                                            let service = &mut *this.service;
                                            let (fut, seen) =
                                                scoped(&this.tried.ids[..this.tried.len], || {
                                                    service.call(req)
                                                });
                                            this.tried.record(seen, &shared.stats);
                                            *this.attempts += 1;
                                            bump(&shared.stats.hedges);
                                            this.hedge.set(Slot::running(
                                                fut,
                                                now,
                                                shared.per_try_timeout,
                                            ));
                                            continue;
                                        }
                                    }
                                }
                            }
                        }
                        let hedge_at = this
                            .hedge_at
                            .filter(|t| !*this.hedged && *t > now && !this.hedge.is_running());
                        let next = [this.primary.until(), this.hedge.until(), hedge_at]
                            .into_iter()
                            .fold(*this.deadline, min_at);
                        match next {
                            Some(at) if this.timer.as_mut().poll_at(at, cx).is_ready() => {
                                continue;
                            }
                            _ => return Poll::Pending,
                        }
                    }
                    // Nothing in flight: the last attempt failed. Again?
                    let stop = if *this.attempts >= shared.max_attempts {
                        Some(Stop::Attempts)
                    } else if this.request.is_none() {
                        Some(Stop::NotReplayable)
                    } else {
                        None
                    };
                    let wait = this.retry_after.take().map_or_else(
                        || shared.backoff.delay(*this.retries),
                        |ra| {
                            shared
                                .backoff
                                .delay(*this.retries)
                                .max(ra.min(shared.max_retry_after))
                        },
                    );
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
                        let last = std::mem::replace(this.last, Last::Nothing);
                        return Poll::Ready(finish(last, stop, *this.attempts));
                    }
                    *this.last = Last::Nothing;
                    *this.phase = Phase::Backoff(until);
                }
                Phase::Backoff(until) => {
                    if now >= until {
                        *this.phase = Phase::Ready;
                    } else if this.timer.as_mut().poll_at(until, cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                Phase::Ready => match this.service.poll_ready(cx) {
                    Poll::Pending => match *this.deadline {
                        Some(d) if this.timer.as_mut().poll_at(d, cx).is_ready() => {}
                        _ => return Poll::Pending,
                    },
                    Poll::Ready(Err(e)) => {
                        *this.phase = Phase::Done;
                        return Poll::Ready(Err(Error::Inner(e)));
                    }
                    Poll::Ready(Ok(())) => {
                        let req = next_request(
                            &shared.replay,
                            this.request,
                            *this.attempts,
                            shared.max_attempts,
                        );
                        let Some(req) = req else {
                            // Unreachable: a retry is only planned with a copy in hand.
                            *this.phase = Phase::Done;
                            return Poll::Ready(Err(Error::TryTimeout {
                                attempts: *this.attempts,
                            }));
                        };
                        let service = &mut *this.service;
                        let (fut, seen) =
                            scoped(&this.tried.ids[..this.tried.len], || service.call(req));
                        this.tried.record(seen, &shared.stats);
                        *this.attempts += 1;
                        *this.retries += 1;
                        bump(&shared.stats.retries);
                        this.primary
                            .set(Slot::running(fut, now, shared.per_try_timeout));
                        if !*this.hedged
                            && let Some(h) = &shared.hedge
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
