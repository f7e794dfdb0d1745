//! The parts of one retried request: its attempt slots, the timer, the
//! endpoints tried, and how it ends.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use super::Error;
use super::hedge::Hedger;
use super::service::Own;
use super::stats::{RetryStats, bump};
use crate::balance::MAX_AVOID;
use crate::scope::Seen;

pin_project! {
    #[project = SlotProj]
    pub(super) enum Slot<F> {
        Idle,
        Running {
            #[pin]
            fut: F,
            start: Instant,
            until: Option<Instant>,
        },
    }
}

/// The one timer of a retried call, made the first time the call waits on
/// it (a per-try timeout, the next hedge, a backoff or the deadline) and
/// reset after that.
///
/// Boxed: a tokio `Sleep` is large, and the future that holds it is moved
/// into place by every caller, so a boxed timer makes every request
/// cheaper (measured: see docs/performance.md). A call that answers at
/// once never allocates; one that waits allocates the timer once.
#[derive(Default)]
pub(super) struct Timer(Option<Pin<Box<Sleep>>>);

#[derive(Clone, Copy)]
pub(super) enum Phase {
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
pub(super) enum Last<T, E> {
    Nothing,
    Response(T),
    Error(E),
    Timeout,
}

/// How long to wait before the next attempt.
#[derive(Clone, Copy)]
pub(super) enum Wait {
    /// The backoff, or `at_least` this if longer (`Retry-After`).
    Backoff(Option<Duration>),
    /// Exactly this (gRPC pushback).
    Exactly(Duration),
}

/// Why no further attempt is made.
#[derive(Clone, Copy)]
pub(super) enum Stop {
    Attempts,
    NotReplayable,
    /// The server asked not to be retried.
    Refused,
    Budget,
    Deadline,
}

/// Ids of the endpoints tried so far, inline.
#[derive(Clone, Copy)]
pub(super) struct Tried {
    pub(super) ids: [u64; MAX_AVOID],
    pub(super) len: usize,
}

impl Tried {
    /// Records what a retry or hedge's call saw: the endpoint picked, and
    /// whether the avoid hint reached a balancer at all.
    ///
    /// A lost hint is counted
    /// ([`RetryStats::hints_lost`](super::RetryStats::hints_lost)) and
    /// raises a `tracing` warning the first time for each wrapped service
    /// (each balancer, in the usual stack), a debug event after that: the
    /// stack is miswired, and a warning per retry would flood the log.
    /// Whatever the avoid list held: behind a layer that defers calls, the
    /// first attempt's pick never comes back either, so the list is empty.
    pub(super) fn record<S, R>(&mut self, seen: Seen, stats: &RetryStats, own: &Own<S, R>) {
        if !seen.reached {
            bump(&stats.hints_lost);
            if own.first_lost_hint() {
                tracing::warn!(
                    target: "tower_lb",
                    "a retry's hint to avoid the endpoints it tried reached no balancer: \
                     a layer between the retry layer and the balancer defers calls to \
                     another task (tower's Buffer, for one), or the retried service is \
                     no tower-lb Balance; put such a layer below the balancer or above \
                     the retry layer (counted in RetryStats::hints_lost; warned once \
                     per retried service)"
                );
            } else {
                tracing::debug!(
                    target: "tower_lb",
                    "retry hint reached no balancer: a layer between the retry layer and the balancer defers calls"
                );
            }
        }
        self.push(seen.picked);
    }

    pub(super) fn push(&mut self, id: Option<u64>) {
        if let Some(id) = id
            && self.len < MAX_AVOID
            && !self.ids[..self.len].contains(&id)
        {
            self.ids[self.len] = id;
            self.len += 1;
        }
    }
}

pub(super) enum SlotPoll<T, E> {
    Idle,
    Pending,
    Done(Result<T, E>, Duration),
    TimedOut,
}

impl<F, T, E> Slot<F>
where
    F: Future<Output = Result<T, E>>,
{
    #[inline(always)]
    pub(super) fn running(fut: F, now: Instant, timeout: Option<Duration>) -> Self {
        Slot::Running {
            fut,
            start: now,
            until: timeout.map(|t| crate::time::after(now, t)),
        }
    }

    pub(super) fn is_running(&self) -> bool {
        matches!(self, Slot::Running { .. })
    }

    /// Cancels a running attempt that lost to the other one (a caller's
    /// drop, not a timeout): its run time is a lower bound for the hedge
    /// percentile.
    ///
    /// An idle slot (the winner's, already emptied by its poll) is left
    /// as it is. Inlined: every request comes here, mostly to do nothing.
    #[inline(always)]
    pub(super) fn cancel(mut self: Pin<&mut Self>, now: Instant, hedger: Option<&Hedger>) {
        let Slot::Running { start, .. } = &*self else {
            return;
        };
        if let Some(h) = hedger {
            h.record_lower_bound(crate::time::elapsed(*start, now));
        }
        self.set(Slot::Idle);
    }

    /// Cancels a running attempt at a timeout the layer owns (per-try or
    /// deadline): a balancer below records it as a timeout failure of its
    /// endpoint, and its run time is a lower bound for the hedge percentile.
    pub(super) fn time_out(mut self: Pin<&mut Self>, now: Instant, hedger: Option<&Hedger>) {
        if let (Slot::Running { start, .. }, Some(h)) = (&*self, hedger) {
            h.record_lower_bound(crate::time::elapsed(*start, now));
        }
        crate::scope::timed_out(|| self.set(Slot::Idle));
    }

    pub(super) fn until(&self) -> Option<Instant> {
        match self {
            Slot::Running { until, .. } => *until,
            Slot::Idle => None,
        }
    }

    /// Polls the attempt; a finished or timed-out attempt leaves the slot idle.
    /// Called inside the future's poll, in the scope of its reading `now`
    /// (see [`scope::at`](crate::scope::at)), which the balancer below takes.
    ///
    /// Inlined into the one loop that polls slots: out of line, its answer
    /// is moved out through the return on every request.
    #[inline(always)]
    pub(super) fn poll_slot(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        now: Instant,
        hedger: Option<&Hedger>,
    ) -> SlotPoll<T, E> {
        let SlotProj::Running { fut, start, until } = self.as_mut().project() else {
            return SlotPoll::Idle;
        };
        let polled = match fut.poll(cx) {
            Poll::Ready(res) => SlotPoll::Done(res, crate::time::elapsed(*start, now)),
            Poll::Pending if until.is_some_and(|u| now >= u) => {
                self.time_out(now, hedger);
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
    pub(super) fn poll_at(&mut self, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let sleep = self
            .0
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if sleep.deadline() != at {
            sleep.as_mut().reset(at);
        }
        sleep.as_mut().poll(cx)
    }
}

pub(super) fn min_at(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

pub(super) fn finish<T, E>(last: Last<T, E>, stop: Stop, attempts: u32) -> Result<T, Error<E>> {
    match (last, stop) {
        (Last::Response(res), _) => Ok(res),
        (Last::Error(e), Stop::NotReplayable | Stop::Refused) => Err(Error::Inner(e)),
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
