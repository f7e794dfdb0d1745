//! [`DnsStats`]: what a running [`Dns`](super::Dns) driver has done.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Counters of a [`Dns`](super::Dns) driver, readable while it runs. Cheap to clone;
/// clones share the counters.
#[derive(Debug, Clone, Default)]
pub struct DnsStats(pub(super) Arc<Counters>);

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) resolutions: AtomicU64,
    pub(super) failures: AtomicU64,
    pub(super) endpoints: AtomicUsize,
}

impl DnsStats {
    /// Resolutions that returned at least one address and were applied.
    pub fn resolutions(&self) -> u64 {
        self.0.resolutions.load(Ordering::Relaxed)
    }

    /// Resolutions that failed (error, timeout or empty answer) and left
    /// the endpoint set as it was.
    pub fn failures(&self) -> u64 {
        self.0.failures.load(Ordering::Relaxed)
    }

    /// Endpoints the driver currently keeps in the balancer.
    pub fn endpoints(&self) -> usize {
        self.0.endpoints.load(Ordering::Relaxed)
    }
}
