//! Counters a retry layer keeps, for metrics.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::{current_lane, mask_for_cores};

/// What a [`RetryLayer`](super::RetryLayer) did, shared by every service it
/// made. Relaxed atomics, one increment per event; the request count,
/// which every call increments, on a line per lane so that threads do not
/// take it from each other. Read them from an observable metrics
/// instrument.
#[derive(Debug, Default)]
pub struct RetryStats {
    /// Counted on every request by every thread: striped, see [`Striped`].
    pub(crate) requests: Striped,
    pub(crate) retries: AtomicU64,
    pub(crate) hedges: AtomicU64,
    pub(crate) budget_exhausted: AtomicU64,
    pub(crate) try_timeouts: AtomicU64,
    pub(crate) deadlines: AtomicU64,
    pub(crate) hints_lost: AtomicU64,
    pub(crate) not_replayable: AtomicU64,
}

impl RetryStats {
    /// Requests that entered the layer.
    pub fn requests(&self) -> u64 {
        self.requests.sum()
    }

    /// Attempts sent: first attempts, retries and hedges.
    pub fn attempts(&self) -> u64 {
        self.requests() + self.retries() + self.hedges()
    }

    /// Retries and hedges whose "avoid the endpoints already tried" hint
    /// reached no balancer: a layer between the retry layer and the
    /// `Balance` deferred the call to another task (`tower::buffer`, for
    /// one), so the balancer could pick a tried endpoint again. Nonzero
    /// means: move that layer below the balancer or above the retry layer
    /// (see [`call_avoiding`](crate::balance::call_avoiding)). The first
    /// lost hint of each retried service also raises a `tracing` warning
    /// (target `tower_lb`). A retry layer over a service that is no
    /// tower-lb `Balance` counts every retry here: there is nothing to
    /// reach.
    pub fn hints_lost(&self) -> u64 {
        self.hints_lost.load(Ordering::Relaxed)
    }

    /// Retries sent (attempts after the first, hedges not included).
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Hedged attempts sent.
    pub fn hedges(&self) -> u64 {
        self.hedges.load(Ordering::Relaxed)
    }

    /// Retries or hedges that were due but refused by the budget.
    pub fn budget_exhausted(&self) -> u64 {
        self.budget_exhausted.load(Ordering::Relaxed)
    }

    /// Attempts cancelled by the per-try timeout.
    pub fn try_timeouts(&self) -> u64 {
        self.try_timeouts.load(Ordering::Relaxed)
    }

    /// Requests whose failure would have been retried but that could not be
    /// sent again: not idempotent, a body that cannot be copied, or one
    /// past the replay buffer's limit
    /// ([`Replayable::limit`](super::Replayable::limit)).
    pub fn not_replayable(&self) -> u64 {
        self.not_replayable.load(Ordering::Relaxed)
    }

    /// Requests that ran out of their overall deadline.
    pub fn deadlines(&self) -> u64 {
        self.deadlines.load(Ordering::Relaxed)
    }
}

/// A count that every thread adds to on every request, one cache line per
/// lane (threads numbered as the balancer's lanes number them): on one
/// line, two threads calling through one retry layer took it from each
/// other on every request.
#[derive(Debug)]
pub(crate) struct Striped(Box<[Stripe]>);

#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(AtomicU64);

impl Default for Striped {
    fn default() -> Self {
        Self((0..=mask_for_cores()).map(|_| Stripe::default()).collect())
    }
}

impl Striped {
    /// Adds one, on the calling thread's line.
    #[inline]
    pub(crate) fn add(&self) {
        bump(&self.0[current_lane(self.0.len() - 1)].0);
    }

    /// The count over every line.
    pub(crate) fn sum(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

#[inline]
pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}
