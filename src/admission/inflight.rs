//! A call's slot on an endpoint, from admission to the end of the call:
//! [`InFlight`] until the answer, [`Completion`] from the answer until the
//! exchange ends (a response body, say).

use std::sync::Arc;
use std::time::Duration;

use super::Judge;
use super::admit::Lane;
use crate::guard::Pass;
use crate::model::EndpointState;
use crate::orca::{LoadReport, ParseError};
use crate::outcome::{FailureKind, Outcome};

/// One in-flight request on an endpoint. Dropping it releases the slot, exactly
/// once, whether the call succeeded, failed, timed out or was abandoned.
///
/// How the call is recorded depends on how it ends:
///
/// * **finished** (an answer or an error): latency and outcome go to the
///   latency model, then to the endpoint's guards (its breaker) and, when
///   the balancer judges every call (outlier detection), to the
///   [health owner](crate::health);
/// * **timed out by the stack** (the balancer's own timeout, or dropped
///   inside [`balance::timed_out`](crate::balance::timed_out), as the retry
///   layer does at a per-try timeout): a failure of kind
///   [`FailureKind::Timeout`], recorded everywhere a failure is;
/// * **abandoned** (dropped by its caller, a lost hedge): only a lower bound
///   on the endpoint's latency (how long it waited); its breaker permit is
///   given back.
#[derive(Debug)]
pub struct InFlight {
    /// The endpoint and the lane the call counts in.
    lane: Arc<Lane>,
    concurrency: usize,
    /// What the endpoint's guards admitted this call with (its breaker's
    /// permit), when the endpoint has guards.
    pass: Option<Pass>,
    /// When the call was dispatched, in ns since the balancer's epoch,
    /// while it is pending (dispatched and not yet recorded). One word with
    /// its tag, rather than a `bool` beside the time: moving the guard read
    /// the byte-wide flag back as part of a word and stalled store
    /// forwarding on every request.
    started: Option<u64>,
}

/// Loading endpoints without a balancer, for pickers' tests.
#[cfg(test)]
impl EndpointState {
    /// Takes one in-flight slot in lane 0, unless the endpoint already has
    /// `cap`: a guard with no call started.
    pub(crate) fn try_acquire(self: &Arc<Self>, cap: Option<usize>) -> Option<InFlight> {
        let concurrency = self.take_slot(cap, 0)?;
        Some(InFlight {
            lane: Lane::new(Arc::clone(self), 0, None),
            concurrency,
            pass: None,
            started: None,
        })
    }
}

impl InFlight {
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
    /// already taken, with the guards' `pass` if the endpoint has any.
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
        let (now_ns, latency_ns) = self.elapsed_ns();
        self.settle(
            &classify(Duration::from_nanos(latency_ns)),
            latency_ns,
            now_ns,
        );
    }

    /// The call has answered with `outcome` after `latency_ns`, `now_ns`
    /// since the epoch; what is left of it (a response body, say)
    /// is tracked by the [`Completion`], which records it and releases the
    /// slot when it ends or is dropped.
    #[inline]
    pub(crate) fn answered(self, outcome: Outcome, latency_ns: u64, now_ns: u64) -> Completion {
        Completion {
            guard: Some(self),
            outcome,
            latency_ns,
            answered_ns: now_ns,
        }
    }

    /// Ends the call as timed out by the stack (a failure of kind
    /// `Timeout`), then releases the slot.
    pub(crate) fn time_out(mut self) {
        self.settle_timeout();
    }

    /// Records the call with `outcome` and `latency_ns` at `now_ns`, if it is
    /// still pending; the slot is released when the guard drops.
    ///
    /// In place: a [`Completion`] records through its guard without moving
    /// it out first (the move, right after the guard was moved in, stalled
    /// store forwarding at every answer).
    #[inline]
    pub(super) fn settle_at(&mut self, outcome: &Outcome, latency_ns: u64, now_ns: u64) {
        if self.is_pending() {
            self.settle(outcome, latency_ns, now_ns);
        }
    }

    /// Dispatched and not yet recorded.
    #[inline]
    pub(super) fn is_pending(&self) -> bool {
        self.started.is_some()
    }

    /// The time now (ns since the balancer's epoch) and the call's latency
    /// so far (ns). In nanoseconds, as the model records it: a `Duration`
    /// is made only for what asks for one.
    #[inline]
    pub(crate) fn elapsed_ns(&self) -> (u64, u64) {
        // A retry layer polling this call has read the clock already.
        let now_ns = self.lane.state.model.clock.now_ns_or(crate::scope::raw());
        (
            now_ns,
            now_ns.saturating_sub(self.started.unwrap_or(now_ns)),
        )
    }

    fn settle_timeout(&mut self) {
        let (now_ns, latency_ns) = self.elapsed_ns();
        self.settle(&Outcome::Failure(FailureKind::Timeout), latency_ns, now_ns);
    }

    /// Records a call that ended: the latency model, the endpoint's
    /// observer, its guards, then the health owner if it judges every call.
    /// The slot is released by `drop`, after everything is recorded.
    ///
    /// The guards and the judge are called only when they have something to
    /// do with the call (a pass, or a judge of every call such as outlier
    /// detection), out of line, and the call's instant is rebuilt from
    /// `now_ns` there: threaded through the answer and called every time,
    /// they cost the default `Balance` a share of its time with nothing to
    /// do (see docs/performance.md).
    #[inline]
    fn settle(&mut self, outcome: &Outcome, latency_ns: u64, now_ns: u64) {
        self.started = None;
        let state = &*self.lane.state;
        state.record(
            outcome,
            latency_ns,
            now_ns,
            self.concurrency,
            self.lane.index,
        );
        let latency = Duration::from_nanos(latency_ns);
        if let Some(o) = &state.observer {
            o.finished(*outcome, latency);
        }
        // Taken only when there is one: writing `None` over `None` here, read
        // back whole by the guard's drop right after, stalled store
        // forwarding on every request.
        if self.pass.is_some()
            && let Some(pass) = self.pass.take()
        {
            guards_finished(state, pass, outcome, latency, now_ns);
        }
        if let Some(judge) = &self.lane.judge {
            judge_finished(&**judge, state, outcome, latency, now_ns);
        }
    }
}

/// Tells the guards how the call `pass` admitted ended (see
/// [`InFlight::settle`]).
#[inline(never)]
fn guards_finished(
    state: &EndpointState,
    pass: Pass,
    outcome: &Outcome,
    latency: Duration,
    now_ns: u64,
) {
    state
        .gate
        .guards
        .record(pass, *outcome, latency, state.instant_at(now_ns));
}

/// Hands a finished call to the judge of every call (see
/// [`InFlight::settle`]).
#[inline(never)]
fn judge_finished(
    judge: &dyn Judge,
    state: &EndpointState,
    outcome: &Outcome,
    latency: Duration,
    now_ns: u64,
) {
    judge.finished(state, outcome, latency, now_ns);
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(start_ns) = self.started {
            if crate::scope::dropping_timed_out() {
                self.settle_timeout();
            } else {
                self.started = None;
                let state = &*self.lane.state;
                let now_ns = state.model.clock.now_ns();
                state.record_abandoned(now_ns.saturating_sub(start_ns), now_ns, self.lane.index);
                if let Some(p) = self.pass.take() {
                    state.gate.guards.release(p);
                }
            }
        } else if let Some(p) = self.pass.take() {
            // A pass on a call never started: `admit` starts every call it
            // admits, so only a guard built otherwise gets here; its probe
            // is given back all the same.
            self.lane.state.gate.guards.release(p);
        }
        self.lane.state.release(self.lane.index);
    }
}

/// The rest of a call that has answered: its outcome and latency so far,
/// and the endpoint's in-flight slot, held until the exchange ends.
///
/// A [classifier](crate::classify::Classify) gets one with every answer and
/// decides how long the call lasts: classifiers that judge a call when it
/// answers drop it at once (the call is recorded with the answer's outcome
/// and latency), while the HTTP and gRPC classifiers move it into the
/// response body so the slot is held until the body ends, errs or is
/// dropped, and the trailers can change the outcome.
///
/// Dropping a `Completion` records the call with [`outcome`](Self::outcome)
/// and [`latency`](Self::latency) and releases the slot (once; a dropped
/// body whose caller stopped reading counts as the answer said).
#[derive(Debug)]
pub struct Completion {
    pub(super) guard: Option<InFlight>,
    pub(super) outcome: Outcome,
    /// Time from dispatch to the answer, in ns.
    pub(super) latency_ns: u64,
    /// When the answer arrived, in ns since the epoch.
    pub(super) answered_ns: u64,
}

impl Completion {
    /// What the answer said, as classified when it arrived.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// Time from dispatch to the answer (the response head).
    pub fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_ns)
    }

    /// Time from dispatch until now.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(
            self.guard
                .as_ref()
                .map_or(self.latency_ns, |g| g.elapsed_ns().1),
        )
    }

    /// The endpoint the call is on (`None` only for a completion made
    /// without a balancer, in tests).
    pub fn endpoint(&self) -> Option<&Arc<EndpointState>> {
        self.guard.as_ref().map(InFlight::endpoint)
    }

    /// Feeds a [load report](crate::orca) the endpoint sent with this call
    /// into its model, stamped with the answer's time (no clock read).
    #[inline]
    pub fn report_load(&self, report: &LoadReport) {
        if let Some(state) = self.endpoint() {
            state.record_load(report, self.answered_ns);
        }
    }

    /// What the call's report header held (`None`: there was none): a
    /// report fed into the endpoint's model, or a value that is no report,
    /// counted ([`EndpointState::load_reports_malformed`]). Stamped with
    /// the answer's time, or (`at_end`, for trailers) now. The HTTP and
    /// gRPC classifiers call it with every answer; without a header it is
    /// one branch.
    #[inline]
    pub fn read_load(&self, found: Option<Result<LoadReport, ParseError>>, at_end: bool) {
        if let (Some(found), Some(state)) = (found, self.endpoint()) {
            let now_ns = if at_end {
                state.model.clock.now_ns()
            } else {
                self.answered_ns
            };
            state.take_report(found, now_ns);
        }
    }

    /// Changes the outcome recorded at the end (a failure found in the
    /// trailers or the body).
    pub fn set_outcome(&mut self, outcome: Outcome) {
        self.outcome = outcome;
    }

    /// Ends the call now: records it with its outcome and the latency to
    /// the answer, and releases the slot (the same as dropping it).
    pub fn finish(self) {
        drop(self);
    }

    /// Ends the call as of its answer, for classifiers that judge a call
    /// when it answers: the same record as [`finish`](Self::finish) without
    /// reading the clock again.
    #[inline]
    pub fn finish_at_answer(mut self) {
        let now_ns = self.answered_ns;
        if let Some(guard) = &mut self.guard {
            guard.settle_at(&self.outcome, self.latency_ns, now_ns);
        }
    }

    /// Ends the call now, recording the time from dispatch until now as its
    /// latency (for exchanges whose whole length is the latency).
    pub fn finish_whole(mut self) {
        if let Some(guard) = &self.guard {
            self.latency_ns = guard.elapsed_ns().1;
        }
        drop(self);
    }

    /// A completion tied to no endpoint, for testing classifiers: dropping
    /// it records nothing. Its [`latency`](Self::latency) is `latency`, kept
    /// in nanoseconds as a balancer's calls keep theirs: a longer one than
    /// `u64::MAX` ns (about 584 years) reads as that.
    pub fn detached(outcome: Outcome, latency: Duration) -> Self {
        Self {
            guard: None,
            outcome,
            latency_ns: crate::time::nanos(latency),
            answered_ns: 0,
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        // A guard already recorded (`finish_at_answer`) is only released,
        // by its own drop after this one.
        if let Some(guard) = &mut self.guard
            && guard.is_pending()
        {
            let (now_ns, _) = guard.elapsed_ns();
            guard.settle_at(&self.outcome, self.latency_ns, now_ns);
        }
    }
}
