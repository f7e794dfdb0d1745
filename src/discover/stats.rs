//! [`Stats`]: what a running discovery source has done.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::Applied;
use crate::balance::Handle;
use crate::pick::Picker;

/// Counters of one discovery source, readable while its driver runs. Cheap
/// to clone; clones share the counters.
#[derive(Debug, Clone, Default)]
pub struct Stats(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    updates: AtomicU64,
    errors: AtomicU64,
    endpoints: AtomicUsize,
    draining: AtomicUsize,
    last_error: Mutex<Option<String>>,
}

impl Stats {
    /// Sets applied to the balancer (a DNS answer, a watch event, an xDS
    /// response that was ACKed).
    pub fn updates(&self) -> u64 {
        self.0.updates.load(Ordering::Relaxed)
    }

    /// Source errors (failed resolution, watch error, disconnect, rejected
    /// resource). Each left the endpoint set as it was and was reported with
    /// [`Handle::report_discovery_error`].
    pub fn errors(&self) -> u64 {
        self.0.errors.load(Ordering::Relaxed)
    }

    /// Endpoints the source keeps in the balancer, draining ones included.
    pub fn endpoints(&self) -> usize {
        self.0.endpoints.load(Ordering::Relaxed)
    }

    /// Of those, the ones draining.
    pub fn draining(&self) -> usize {
        self.0.draining.load(Ordering::Relaxed)
    }

    /// The text of the latest error, if any.
    pub fn last_error(&self) -> Option<String> {
        self.0
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// DNS's name for [`updates`](Self::updates): answers applied.
    pub fn resolutions(&self) -> u64 {
        self.updates()
    }

    /// DNS's name for [`errors`](Self::errors): failed resolutions (error,
    /// timeout or empty answer).
    pub fn failures(&self) -> u64 {
        self.errors()
    }

    /// Counts an update that `done` applied (a source's own update, as a
    /// [`Reconciler::apply`](super::Reconciler::apply) returns it): the
    /// endpoints and draining counts it left, and one more update.
    pub fn applied(&self, done: &Applied) {
        let c = &self.0;
        c.endpoints.store(done.endpoints(), Ordering::Relaxed);
        c.draining.store(done.draining, Ordering::Relaxed);
        c.updates.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an error of `source` (its name in events, such as `"dns"`),
    /// keeps its text, and reports it on the balancer (one `tracing` event,
    /// the health-event path); the source keeps its last good endpoints.
    pub fn error<K, S, P: Picker, C>(
        &self,
        handle: &Handle<K, S, P, C>,
        source: &str,
        error: &dyn fmt::Display,
    ) {
        self.0.errors.fetch_add(1, Ordering::Relaxed);
        *self.0.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(error.to_string());
        handle.report_discovery_error(source, error);
    }
}
