//! [`Completion`]: the rest of a call after its answer, until the exchange
//! ends.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{EndpointState, InFlight};
use crate::orca::{LoadReport, ParseError};
use crate::outcome::Outcome;

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
    pub(super) latency: Duration,
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
        self.latency
    }

    /// Time from dispatch until now.
    pub fn elapsed(&self) -> Duration {
        self.guard.as_ref().map_or(self.latency, |g| g.elapsed().1)
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
                state.model.nanos(Instant::now())
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
            guard.settle_at(&self.outcome, self.latency, now_ns);
        }
    }

    /// Ends the call now, recording the time from dispatch until now as its
    /// latency (for exchanges whose whole length is the latency).
    pub fn finish_whole(mut self) {
        self.latency = self.elapsed();
        drop(self);
    }

    /// A completion tied to no endpoint, for testing classifiers: dropping
    /// it records nothing.
    pub fn detached(outcome: Outcome, latency: Duration) -> Self {
        Self {
            guard: None,
            outcome,
            latency,
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
            let (now_ns, _) = guard.elapsed();
            guard.settle_at(&self.outcome, self.latency, now_ns);
        }
    }
}
