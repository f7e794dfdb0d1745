//! The panic decision: when too few endpoints are healthy, route over all
//! of them (or fail fast) rather than pile onto the few left.

use std::sync::atomic::Ordering;

use super::{Health, HealthChange, PanicMode};
use crate::admission::Route;

impl Health {
    /// How a pick treats health with `bad` of the `n` counted endpoints
    /// unhealthy (each once, whatever its reasons): the balancer panics
    /// when `bad > 0` and `n − bad < threshold · n`. `Err(())` is panic
    /// with `FailFast`.
    #[inline]
    pub(super) fn decide(&self, bad: usize, n: usize) -> Result<Route, ()> {
        let healthy = n - bad.min(n);
        let panic = bad > 0 && (healthy as f64) < self.panic_threshold * n as f64;
        if panic != self.in_panic.load(Ordering::Relaxed) {
            self.panic_changed(panic, healthy, n);
        }
        if !panic {
            return Ok(if bad == 0 {
                Route::Healthy
            } else {
                Route::Degraded
            });
        }
        self.panics.fetch_add(1, Ordering::Relaxed);
        match self.panic_mode {
            PanicMode::FailFast => Err(()),
            PanicMode::RouteAll => Ok(Route::Panic),
        }
    }

    /// The route step's panic state (some priority level in panic), with
    /// the healthy and total counts over every level: an event when it
    /// changes.
    pub(crate) fn set_panic(&self, panic: bool, healthy: usize, total: usize) {
        if panic != self.in_panic.load(Ordering::Relaxed) {
            self.panic_changed(panic, healthy, total);
        }
    }

    /// Counts one pick made in panic (`lb.panic`).
    #[inline]
    pub(crate) fn count_panic(&self) {
        self.panics.fetch_add(1, Ordering::Relaxed);
    }

    fn panic_changed(&self, panic: bool, healthy: usize, total: usize) {
        if self.in_panic.swap(panic, Ordering::Relaxed) == panic {
            return; // another thread reported it
        }
        let change = if panic {
            HealthChange::PanicEntered { healthy, total }
        } else {
            HealthChange::PanicLeft { healthy, total }
        };
        self.events.emit(None, change);
    }
}
