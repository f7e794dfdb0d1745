//! Waiting for a balancer's first endpoints: [`Handle::wait_for_endpoints`].
//!
//! A pool fed by discovery starts empty, and `Balance` never waits: until
//! the first answer arrives every call fails with
//! [`Error::NoEndpoints`](crate::Error::NoEndpoints). A service that must
//! not answer before its upstream is known (a gateway, a readiness probe)
//! waits here instead, for a bounded time.

use std::fmt;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::Handle;
use crate::pick::Picker;

/// The size of a balancer's endpoint set, as its last published snapshot
/// holds it, and a wake-up for those waiting for it to stop being empty.
/// Not generic, so that a waiter (the HTTP gateway) need not name the
/// balancer's types.
#[derive(Debug, Default)]
pub(crate) struct Membership {
    len: AtomicUsize,
    filled: Notify,
}

impl Membership {
    /// Records the size of a newly published set, waking every waiter
    /// when it holds an endpoint.
    pub(crate) fn set(&self, len: usize) {
        self.len.store(len, Ordering::Release);
        if len > 0 {
            self.filled.notify_waiters();
        }
    }

    /// The size of the set as last published.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Waits until the set holds an endpoint, at most `timeout`; returns
    /// the set's size then.
    pub(crate) async fn wait(&self, timeout: Duration) -> Result<usize, WaitTimeout> {
        let deadline = crate::time::after(tokio::time::Instant::now(), timeout);
        loop {
            // Registered before the check, so a publish between the check
            // and the await still wakes this waiter.
            let mut filled = pin!(self.filled.notified());
            filled.as_mut().enable();
            let len = self.len();
            if len > 0 {
                return Ok(len);
            }
            if tokio::time::timeout_at(deadline, filled).await.is_err() {
                return Err(WaitTimeout { waited: timeout });
            }
        }
    }
}

/// The endpoint set stayed empty for the whole of a bounded wait
/// ([`Handle::wait_for_endpoints`], or the HTTP gateway's
/// `wait_for_endpoints`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeout {
    /// How long the wait lasted.
    pub waited: Duration,
}

impl fmt::Display for WaitTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no endpoint arrived within {:?}", self.waited)
    }
}

impl std::error::Error for WaitTimeout {}

impl<K, S, P: Picker, C> Handle<K, S, P, C> {
    /// Waits until the endpoint set holds at least one endpoint (draining
    /// ones count), at most `timeout`, and returns its size then. Returns
    /// at once when the set is not empty.
    ///
    /// For a pool that discovery fills: call it before serving, so the
    /// first requests do not fail with
    /// [`Error::NoEndpoints`](crate::Error::NoEndpoints) while the first
    /// answer is on its way. The balancer itself never waits.
    ///
    /// # Errors
    ///
    /// [`WaitTimeout`] when `timeout` passes with the set still empty
    /// (`Duration::ZERO` checks once and does not wait; `Duration::MAX`
    /// waits until the clock's end).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower::service_fn;
    /// use tower_lb::Balance;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let svc = service_fn(|x: u32| async move { Ok::<_, std::io::Error>(x) });
    /// let lb = Balance::builder().build()?;
    /// let handle = lb.handle();
    /// let waited = handle.wait_for_endpoints(Duration::from_secs(1)).await;
    /// assert_eq!(waited.unwrap_err().waited, Duration::from_secs(1));
    ///
    /// // Discovery's first answer arrives while a caller waits.
    /// let discovery = handle.clone();
    /// tokio::spawn(async move { discovery.insert("10.0.0.1:80", svc) });
    /// assert_eq!(handle.wait_for_endpoints(Duration::from_secs(5)).await?, 1);
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_endpoints(&self, timeout: Duration) -> Result<usize, WaitTimeout> {
        self.shared.membership.wait(timeout).await
    }
}
