//! The response future of [`Retry`](super::Retry): a state machine over at
//! most two attempts in flight (the current one and a hedge) and one timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use super::Error;
use super::layer::Shared;
use super::policy::Replay;
use super::stats::RetryStats;
use super::stats::bump;
use crate::balance::MAX_AVOID;
use crate::classify::{Classify, Outcome};
use crate::scope::{Seen, scoped};

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

pin_project! {
    #[project = SlotProj]
    enum Slot<F> {
        Idle,
        Running {
            #[pin]
            fut: F,
            start: Instant,
            until: Option<Instant>,
        },
    }
}

pin_project! {
    #[project = TimerProj]
    enum Timer {
        Off,
        On {
            #[pin]
            sleep: Sleep,
        },
    }
}

#[derive(Clone, Copy)]
enum Phase {
    /// At least one attempt in flight (or one just finished, to be judged).
    Calling,
    /// Waiting before the next attempt.
    Backoff(Instant),
    /// Waiting for the service to be ready for the next attempt.
    Ready,
    /// The output was returned.
    Done,
}

/// The last failed attempt, kept until it is known whether another follows.
enum Last<T, E> {
    Nothing,
    Response(T),
    Error(E),
    Timeout,
}

/// Why no further attempt is made.
#[derive(Clone, Copy)]
enum Stop {
    Attempts,
    NotReplayable,
    Budget,
    Deadline,
}

/// Ids of the endpoints tried so far, inline.
#[derive(Clone, Copy)]
struct Tried {
    ids: [u64; MAX_AVOID],
    len: usize,
}

impl Tried {
    /// Records what a retry or hedge's call saw: the endpoint picked, and
    /// whether the avoid hint reached a balancer at all.
    fn record(&mut self, seen: Seen, stats: &RetryStats) {
        if self.len > 0 && !seen.reached {
            bump(&stats.hints_lost);
            tracing::debug!(
                target: "tower_lb",
                "retry hint reached no balancer: a layer between the retry layer and the balancer defers calls"
            );
        }
        self.push(seen.picked);
    }

    fn push(&mut self, id: Option<u64>) {
        if let Some(id) = id
            && self.len < MAX_AVOID
            && !self.ids[..self.len].contains(&id)
        {
            self.ids[self.len] = id;
            self.len += 1;
        }
    }
}

enum SlotPoll<T, E> {
    Idle,
    Pending,
    Done(Result<T, E>, Duration),
    TimedOut,
}

impl<F, T, E> Slot<F>
where
    F: Future<Output = Result<T, E>>,
{
    fn running(fut: F, now: Instant, timeout: Option<Duration>) -> Self {
        Slot::Running {
            fut,
            start: now,
            until: timeout.map(|t| now + t),
        }
    }

    fn is_running(&self) -> bool {
        matches!(self, Slot::Running { .. })
    }

    fn until(&self) -> Option<Instant> {
        match self {
            Slot::Running { until, .. } => *until,
            Slot::Idle => None,
        }
    }

    /// Polls the attempt; a finished or timed-out attempt leaves the slot idle.
    fn poll_slot(mut self: Pin<&mut Self>, cx: &mut Context<'_>, now: Instant) -> SlotPoll<T, E> {
        let SlotProj::Running { fut, start, until } = self.as_mut().project() else {
            return SlotPoll::Idle;
        };
        let polled = match fut.poll(cx) {
            Poll::Ready(res) => SlotPoll::Done(res, now.saturating_duration_since(*start)),
            Poll::Pending if until.is_some_and(|u| now >= u) => {
                // The per-try timeout is ours: a balancer below records the
                // dropped call as a timeout failure of its endpoint.
                crate::scope::timed_out(|| self.set(Slot::Idle));
                return SlotPoll::TimedOut;
            }
            Poll::Pending => return SlotPoll::Pending,
        };
        self.set(Slot::Idle);
        polled
    }
}

impl Timer {
    /// Sets the timer to `at` and polls it.
    fn poll_at(mut self: Pin<&mut Self>, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
        if let TimerProj::On { sleep } = self.as_mut().project() {
            if sleep.deadline() != at {
                sleep.reset(at);
            }
        } else {
            self.set(Timer::On {
                sleep: tokio::time::sleep_until(at),
            });
        }
        match self.project() {
            TimerProj::On { sleep } => sleep.poll(cx),
            TimerProj::Off => Poll::Pending,
        }
    }
}

fn min_at(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
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
            Some(h) if request.is_some() => Some(now + h.delay()),
            _ => None,
        };
        Self {
            primary: Slot::Running {
                fut,
                start: now,
                until: shared.per_try_timeout.map(|t| now + t),
            },
            hedge: Slot::Idle,
            timer: Timer::Off,
            deadline: shared.deadline.map(|d| now + d),
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

/// The copy to send next: a fresh copy if more attempts may follow,
/// otherwise the kept one.
fn next_request<Req, R: Replay<Req>>(
    replay: &R,
    kept: &mut Option<Req>,
    attempts: u32,
    max: u32,
) -> Option<Req> {
    if attempts + 1 < max
        && let Some(req) = kept.as_ref().and_then(|r| replay.replay(r))
    {
        return Some(req);
    }
    kept.take()
}

fn finish<T, E>(last: Last<T, E>, stop: Stop, attempts: u32) -> Result<T, Error<E>> {
    match (last, stop) {
        (Last::Response(res), _) => Ok(res),
        (Last::Error(e), Stop::NotReplayable) => Err(Error::Inner(e)),
        (Last::Error(e), Stop::Attempts) => Err(Error::AttemptsExhausted { attempts, last: e }),
        (Last::Error(e), Stop::Budget) => Err(Error::BudgetExhausted {
            attempts,
            last: Some(e),
        }),
        (Last::Error(e), Stop::Deadline) => Err(Error::DeadlineElapsed {
            attempts,
            last: Some(e),
        }),
        (Last::Timeout, Stop::Budget) => Err(Error::BudgetExhausted {
            attempts,
            last: None,
        }),
        (Last::Timeout | Last::Nothing, Stop::Deadline) => Err(Error::DeadlineElapsed {
            attempts,
            last: None,
        }),
        // `Nothing` cannot reach here: an attempt ends either by returning
        // or by leaving a `Last`.
        (Last::Timeout | Last::Nothing, _) => Err(Error::TryTimeout { attempts }),
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
                crate::scope::timed_out(|| {
                    this.primary.set(Slot::Idle);
                    this.hedge.set(Slot::Idle);
                });
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
                        match slot.poll_slot(cx, now) {
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
                                        let mut other = other;
                                        other.set(Slot::Idle);
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
                                    if shared.budget.withdraw() {
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
                                    } else {
                                        bump(&shared.stats.budget_exhausted);
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
                    let until = now + wait;
                    let stop = stop.or_else(|| {
                        if this.deadline.is_some_and(|d| until >= d) {
                            bump(&shared.stats.deadlines);
                            Some(Stop::Deadline)
                        } else if !shared.budget.withdraw() {
                            bump(&shared.stats.budget_exhausted);
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
                            *this.hedge_at = Some(now + h.delay());
                        }
                        *this.phase = Phase::Calling;
                    }
                },
            }
        }
    }
}
