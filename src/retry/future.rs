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
use super::attempt::{Last, Phase, Slot, Timer, Tried, Wait};
use super::replay::Replay;
use super::service::Own;
use crate::balance::MAX_AVOID;
use crate::classify::Classify;
use crate::scope::{self, scoped};
use crate::time::{Reading, after};

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
    #[project = Fields]
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
    /// per request (measured: see docs/performance.md).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn send(
        ready: &mut S,
        req: Req,
        own: Arc<Own<S, R>>,
        classify: C,
        kept: Option<R::Kept>,
        reading: Reading,
        deadline: Option<Duration>,
    ) -> Self {
        let now = reading.at;
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
        let ((), seen) = scope::at(reading, || {
            scoped(&[], || {
                this.primary = Slot::running(ready.call(req), now, timeout);
            })
        });
        this.tried.push(seen.picked);
        this
    }
}

/// What a phase's step leaves the poll loop to do.
enum Step<T> {
    /// Look again: the phase changed, an attempt was sent or a timer fired.
    Again,
    /// Wait for a wake-up (an attempt, the timer or the service).
    Wait,
    /// Return this output.
    Done(T),
}

/// The future's output.
type Output<S, Req> = Result<<S as Service<Req>>::Response, Error<<S as Service<Req>>::Error>>;

impl<S, Req, R, C> Future for ResponseFuture<S, Req, R, C>
where
    S: Service<Req> + Clone,
    R: Replay<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Output = Output<S, Req>;

    /// One method per phase of the call; the deadline is checked first on
    /// every turn, and it is ours too: attempts it cuts are timeouts.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            // Every call and poll into the service below, in any phase,
            // runs in this reading's scope.
            let reading = this.own.shared.clock.read();
            let now = reading.at;
            let step = scope::at(reading, || match *this.phase {
                // Polled after completion.
                Phase::Done => Step::Wait,
                _ if this.deadline.is_some_and(|d| now >= d) => this.expire(now),
                Phase::Calling => this.calling(cx, now),
                Phase::Backoff(until) => this.backing_off(cx, now, until),
                Phase::Ready => this.ready(cx, now),
            });
            match step {
                Step::Again => {}
                Step::Wait => return Poll::Pending,
                Step::Done(out) => {
                    *this.phase = Phase::Done;
                    return Poll::Ready(out);
                }
            }
        }
    }
}

mod phases;

#[cfg(test)]
mod tests;
