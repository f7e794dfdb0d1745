//! The lanes off the success path: what a failed call writes into the
//! other lanes, what a dropped call writes, and how an endpoint whose last
//! call failed reads (every reader's way in while it waits for its probe).

use std::sync::atomic::Ordering;

use super::{Floor, Hot, Idle, Rates};
use crate::model::EndpointState;

impl EndpointState {
    /// Counts a call dropped before it ended and records how long it had
    /// waited as a lower bound on the latency: an endpoint that never
    /// answers has its calls cut and must not look idle and fast.
    pub(crate) fn record_abandoned(&self, waited_ns: u64, now_ns: u64, lane: usize) {
        self.abandoned.fetch_add(1, Ordering::Relaxed);
        let hot = self.lane(lane);
        hot.latency
            .observe_lower_bound(waited_ns as f64, now_ns, self.model.rates, hot.floor());
    }

    /// Writes a hard failure's penalty `sample` into the lanes other than
    /// `lane`: a failing replica is avoided by every thread after one
    /// failure. Out of line: failures are rare, and the request path's
    /// success stays small.
    #[inline(never)]
    pub(super) fn spread_failure(&self, sample: f64, now_ns: u64, lane: usize) {
        for (i, h) in self.lanes().enumerate() {
            if i != lane {
                h.latency
                    .observe(sample, true, now_ns, self.model.rates, h.floor());
            }
        }
    }
}

/// `read` of an endpoint whose last call failed. Out of line: the
/// request path never comes here while every endpoint answers.
#[cold]
#[inline(never)]
pub(super) fn read_failed(
    state: &EndpointState,
    hot: &Hot,
    now_ns: u64,
    rates: Rates,
    floor: Floor,
) -> Idle {
    let e = hot.latency.read_idle(now_ns, rates, floor);
    if e.waiting {
        hot.latency.miss();
    }
    if e.due && hot.in_flight.load(Ordering::Relaxed) == 0 {
        e.probe(if floor.ns.is_finite() {
            floor.ns
        } else {
            state.model.default_rtt_ns
        })
    } else {
        e
    }
}
