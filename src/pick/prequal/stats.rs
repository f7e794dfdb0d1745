//! [`ProbeStats`]: what a probing balancer did, counted.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of one balancer's probes and of the picks they served.
#[derive(Debug, Default)]
pub struct ProbeStats {
    pub(crate) sent: AtomicU64,
    pub(crate) answered: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) pooled: AtomicU64,
    pub(crate) fallback: AtomicU64,
}

/// A reading of [`ProbeStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeCounts {
    /// Probes sent.
    pub sent: u64,
    /// Probes answered with a usable report.
    pub answered: u64,
    /// Probes that failed, timed out or came back without a report.
    pub failed: u64,
    /// Probes owed but not sent: over the in-flight or per-second bound,
    /// or with no endpoint to probe.
    pub dropped: u64,
    /// Picks made from the pool of answers.
    pub pooled: u64,
    /// Picks made by the fallback picker (no usable answer).
    pub fallback: u64,
}

impl ProbeStats {
    /// The counts now.
    pub fn counts(&self) -> ProbeCounts {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ProbeCounts {
            sent: r(&self.sent),
            answered: r(&self.answered),
            failed: r(&self.failed),
            dropped: r(&self.dropped),
            pooled: r(&self.pooled),
            fallback: r(&self.fallback),
        }
    }

    pub(crate) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
