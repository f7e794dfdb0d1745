//! Counters a retry layer keeps, for metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a [`RetryLayer`](super::RetryLayer) did, shared by every service it
/// made. Plain relaxed atomics: one increment per event, no hot-path cost to
/// speak of; read them from an observable metrics instrument.
#[derive(Debug, Default)]
pub struct RetryStats {
    pub(crate) requests: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) hedges: AtomicU64,
    pub(crate) budget_exhausted: AtomicU64,
    pub(crate) try_timeouts: AtomicU64,
    pub(crate) deadlines: AtomicU64,
}

impl RetryStats {
    /// Requests that entered the layer.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
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

    /// Requests that ran out of their overall deadline.
    pub fn deadlines(&self) -> u64 {
        self.deadlines.load(Ordering::Relaxed)
    }
}

#[inline]
pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}
