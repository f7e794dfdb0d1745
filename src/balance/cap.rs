//! The fixed in-flight cap, changed at run time through [`Handle`].

use super::Handle;
use crate::error::ConfigError;
use crate::pick::Picker;

impl<K, S, P: Picker, C> Handle<K, S, P, C> {
    /// Sets the per-endpoint cap on calls in flight
    /// ([`Builder::max_in_flight`](super::Builder::max_in_flight)) at run
    /// time: `Some(n)` caps every endpoint at `n`, `None` lifts the cap
    /// (an [adaptive limit](crate::endpoint::AdaptiveConcurrency), if any,
    /// still applies, and the lower of the two wins).
    ///
    /// Calls dispatched after it returns see the new cap; calls already in
    /// flight finish, so after lowering it an endpoint may hold more than
    /// `n` until they do, and takes no new call until it is under `n`.
    /// Admission takes a slot with one compare-exchange against the cap,
    /// so no endpoint ever exceeds a cap that was in force when a call
    /// took its slot (`tests/conformance/cap.rs`). Cost: one atomic store;
    /// each call reads the cap once.
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use tower::service_fn;
    /// use tower_lb::Balance;
    ///
    /// let svc = service_fn(|x: u32| async move { Ok::<_, Infallible>(x) });
    /// let lb = Balance::builder().endpoint("a", svc).max_in_flight(8).build()?;
    /// let handle = lb.handle();
    /// handle.set_max_in_flight(Some(2))?;
    /// assert_eq!(handle.max_in_flight(), Some(2));
    /// handle.set_max_in_flight(None)?;
    /// assert_eq!(handle.max_in_flight(), None);
    /// # Ok::<_, tower_lb::ConfigError>(())
    /// ```
    ///
    /// # Errors
    /// A [`ConfigError`] on `max_in_flight` for `Some(0)`, or for any cap on
    /// a balancer built with
    /// [`per_thread_load`](super::Builder::per_thread_load) and no cap (its
    /// per-thread lanes count calls apart, so no exact cap can hold; give
    /// it a cap at build, which turns the lanes off).
    pub fn set_max_in_flight(&self, cap: Option<usize>) -> Result<(), ConfigError> {
        match cap {
            Some(0) => Err(ConfigError::new("max_in_flight", 0, "an integer >= 1")),
            Some(n) if self.shared.model.lane_mask != 0 => Err(ConfigError::new(
                "max_in_flight",
                n,
                "no cap on a balancer with per-thread load lanes (set one at build)",
            )),
            cap => {
                self.shared.cap.set_fixed(cap);
                Ok(())
            }
        }
    }

    /// The per-endpoint cap on calls in flight now (`None`: uncapped,
    /// adaptive limits aside).
    pub fn max_in_flight(&self) -> Option<usize> {
        self.shared.cap.fixed()
    }
}
