//! [`InFlight`]: one request's slot on an endpoint, from dispatch to the end
//! of the call.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Completion, EndpointState, Lane};
use crate::guards::Pass;
use crate::outcome::{FailureKind, Outcome};

/// One in-flight request on an endpoint. Dropping it releases the slot, exactly
/// once, whether the call succeeded, failed, timed out or was abandoned.
///
/// How the call is recorded depends on how it ends:
///
/// * **finished** (an answer or an error): latency and outcome go to the
///   latency model, then to the health owner (breaker, outlier rules,
///   events, metrics);
/// * **timed out by the stack** (the balancer's own timeout, or dropped
///   inside [`balance::timed_out`](crate::balance::timed_out), as the retry
///   layer does at a per-try timeout): a failure of kind
///   [`FailureKind::Timeout`], recorded everywhere a failure is;
/// * **abandoned** (dropped by its caller, a lost hedge): only a lower bound
///   on the endpoint's latency (how long it waited); its breaker permit is
///   given back.
#[derive(Debug)]
pub struct InFlight {
    /// The endpoint and the lane the call counts in (see
    /// [`lanes`](super::lanes)).
    lane: Arc<Lane>,
    concurrency: usize,
    /// What the endpoint's guards admitted this call with (its breaker's
    /// permit), when they gave anything.
    pass: Option<Pass>,
    /// When the call was dispatched, in ns since the balancer's epoch,
    /// while it is pending (dispatched and not yet recorded). One word with
    /// its tag, rather than a `bool` beside the time: moving the guard read
    /// the byte-wide flag back as part of a word and stalled store
    /// forwarding on every request.
    started: Option<u64>,
}

impl InFlight {
    #[cfg(test)]
    pub(super) fn new(lane: Arc<Lane>, concurrency: usize) -> Self {
        Self {
            lane,
            concurrency,
            pass: None,
            started: None,
        }
    }

    /// The endpoint this request is on.
    pub fn endpoint(&self) -> &Arc<EndpointState> {
        &self.lane.state
    }

    /// Requests in flight on the endpoint when this one was dispatched,
    /// itself included, as its thread's picks counted them (see
    /// [`EndpointState::in_flight`]).
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// A call started at `now_ns` (since the balancer's epoch) on a slot
    /// already taken, with the guards' `pass` if they gave one.
    #[inline]
    pub(super) fn started(
        lane: Arc<Lane>,
        concurrency: usize,
        pass: Option<Pass>,
        start_ns: u64,
    ) -> Self {
        Self {
            lane,
            concurrency,
            pass,
            started: Some(start_ns),
        }
    }

    /// Ends the call: measures its latency, asks `classify` for its outcome
    /// and records both, then releases the slot.
    #[inline]
    pub(crate) fn finish(mut self, classify: impl FnOnce(Duration) -> Outcome) {
        let (now_ns, latency) = self.elapsed();
        self.settle(&classify(latency), latency, now_ns);
    }

    /// The call has answered with `outcome` after `latency`, `now_ns`
    /// since the epoch; what is left of it (a response body, say)
    /// is tracked by the [`Completion`], which records it and releases the
    /// slot when it ends or is dropped.
    #[inline]
    pub(crate) fn answered(self, outcome: Outcome, latency: Duration, now_ns: u64) -> Completion {
        Completion {
            guard: Some(self),
            outcome,
            latency,
            answered_ns: now_ns,
        }
    }

    /// Ends the call as timed out by the stack (a failure of kind
    /// `Timeout`), then releases the slot.
    pub(crate) fn time_out(mut self) {
        self.settle_timeout();
    }

    /// Records the call with `outcome` and `latency` at `now_ns`, if it is
    /// still pending; the slot is released when the guard drops.
    ///
    /// In place: a [`Completion`] records through its guard without moving
    /// it out first (the move, right after the guard was moved in, stalled
    /// store forwarding at every answer).
    #[inline]
    pub(super) fn settle_at(&mut self, outcome: &Outcome, latency: Duration, now_ns: u64) {
        if self.is_pending() {
            self.settle(outcome, latency, now_ns);
        }
    }

    /// Dispatched and not yet recorded.
    #[inline]
    pub(super) fn is_pending(&self) -> bool {
        self.started.is_some()
    }

    /// The time now, in ns since the epoch, and the call's latency so far.
    #[inline]
    pub(crate) fn elapsed(&self) -> (u64, Duration) {
        let now_ns = self.lane.state.model.nanos(crate::scope::now());
        (
            now_ns,
            Duration::from_nanos(now_ns.saturating_sub(self.started.unwrap_or(now_ns))),
        )
    }

    fn settle_timeout(&mut self) {
        let (now_ns, latency) = self.elapsed();
        self.settle(&Outcome::Failure(FailureKind::Timeout), latency, now_ns);
    }

    /// Records a call that ended: the latency model, the endpoint's
    /// observer, then the health owner. The slot is released by `drop`,
    /// after everything is recorded.
    ///
    /// The health owner is called only when it has something to do with the
    /// call (a guards' pass, or a judge of every call such as outlier
    /// detection), out of line, and the call's instant is rebuilt from
    /// `now_ns` there: threaded through the answer and called every time,
    /// the judge cost the default `Balance` about 10 ns per request with
    /// nothing to do (`benches/interleaved.rs`, `default`, `random`).
    #[inline]
    fn settle(&mut self, outcome: &Outcome, latency: Duration, now_ns: u64) {
        self.started = None;
        let state = &*self.lane.state;
        state.record(
            outcome,
            crate::time::nanos(latency),
            now_ns,
            self.concurrency,
            self.lane.index,
        );
        if let Some(o) = &state.observer {
            o.finished(*outcome, latency);
        }
        // Taken only when there is one: writing `None` over `None` here, read
        // back whole by the guard's drop right after, stalled store
        // forwarding on every request.
        let pass = if self.pass.is_some() {
            self.pass.take()
        } else {
            None
        };
        if pass.is_some() || state.model.judge_untracked {
            judge_finished(state, pass, outcome, latency, now_ns);
        }
    }
}

/// Hands a finished call to the health owner (see [`InFlight::settle`]).
#[inline(never)]
fn judge_finished(
    state: &EndpointState,
    pass: Option<Pass>,
    outcome: &Outcome,
    latency: Duration,
    now_ns: u64,
) {
    state
        .model
        .judge
        .finished(state, pass, outcome, latency, now_ns);
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(start_ns) = self.started {
            if crate::scope::dropping_timed_out() {
                self.settle_timeout();
            } else {
                self.started = None;
                let state = &*self.lane.state;
                let now_ns = state.model.nanos(Instant::now());
                state.record_abandoned(now_ns.saturating_sub(start_ns), now_ns, self.lane.index);
                state.model.judge.abandoned(state, self.pass.take());
            }
        } else if let Some(p) = self.pass.take() {
            // A pass on a call never started: `start` starts every call it
            // admits, so only a guard built otherwise gets here; its probe is
            // given back all the same.
            let state = &*self.lane.state;
            state.model.judge.abandoned(state, Some(p));
        }
        self.lane.state.release(self.lane.index);
    }
}
