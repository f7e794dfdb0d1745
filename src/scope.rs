//! Per-call hints between a layer above [`Balance`](crate::Balance) and the
//! balancer: which endpoints to avoid, which one was picked, whether a
//! call being dropped was timed out, and what time it is.
//!
//! A retry must not return to an endpoint it already tried while another is
//! available. Carrying the tried set in the request's extensions would work
//! for HTTP requests only, while `Balance` serves any request type. Instead
//! the retry layer wraps its synchronous `call` into the balancer in
//! [`call_avoiding`]: the pick happens inside `call`, on the same thread, so
//! a thread-local scope reaches it through any number of synchronous layers
//! in between, for every request type, with no allocation.
//!
//! **The limit:** a layer between the two that defers `call` to another task
//! (`tower::buffer::Buffer`, a spawned worker) breaks the chain: the
//! balancer then never sees the hint and picks as if no endpoint had been
//! tried. [`call_avoiding`] reports that case (no pick seen), and the retry
//! layer counts it in
//! [`RetryStats::hints_lost`](crate::retry::RetryStats::hints_lost), so it
//! shows instead of silently weakening retries. Put such layers below
//! `Balance` (around each endpoint) or above the retry layer.
//!
//! Dropping works the same way: the retry layer drops an attempt that passed
//! its per-try timeout inside [`timed_out`], and the balancer's in-flight
//! guard, dropped on the same thread, records the call as a timeout failure
//! rather than an abandoned one.

use std::cell::Cell;

use tokio::time::Instant;

/// Most endpoints one call can ask to avoid.
pub const MAX_AVOID: usize = 8;

thread_local! {
    /// True while [`timed_out`] runs on this thread.
    static TIMING_OUT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, which should drop calls into a `Balance` (their futures), so
/// that each call dropped inside it is recorded as a failure of kind
/// [`Timeout`](crate::classify::FailureKind::Timeout) of its endpoint — for
/// its breaker, outlier detection and latency model — instead of as a call
/// its caller abandoned. For layers that own a timeout: the retry layer uses
/// it at a per-try timeout; the balancer's own
/// [`timeout`](crate::balance::Builder::timeout) needs no help.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// # let attempt = Box::pin(std::future::pending::<()>());
/// // An attempt that ran past its deadline:
/// tower_lb::balance::timed_out(|| drop(attempt));
/// # }
/// ```
pub fn timed_out<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            TIMING_OUT.with(|t| t.set(self.0));
        }
    }
    let _reset = Reset(TIMING_OUT.with(|t| t.replace(true)));
    f()
}

/// Whether the current thread is inside [`timed_out`].
#[inline]
pub(crate) fn dropping_timed_out() -> bool {
    TIMING_OUT.with(Cell::get)
}

thread_local! {
    /// The time a layer above read for the call or poll it is making into
    /// the balancer on this thread (see [`at`]).
    static NOW: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `f` (a call or poll into a `Balance`, directly or through
/// synchronous layers) with `now` as the time the balancer reads.
///
/// The retry layer reads the clock for its own deadlines and latencies at
/// each call and poll; without the hint the balancer would read it again
/// for the same instant. On a VM a clock read costs 25-40 ns, and the
/// whole stack read it five times per request (`benches/balance.rs`,
/// `stack`). The reading precedes the inner call or poll by the time the
/// layers in between take, which both latencies then share.
#[inline]
pub(crate) fn at<R>(now: Instant, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Instant>);
    impl Drop for Reset {
        fn drop(&mut self) {
            NOW.with(|n| n.set(self.0));
        }
    }
    let _reset = Reset(NOW.with(|n| n.replace(Some(now))));
    f()
}

/// The time: the enclosing layer's reading (see [`at`]), else the clock's.
#[inline]
pub(crate) fn now() -> Instant {
    NOW.with(Cell::get).unwrap_or_else(Instant::now)
}

#[derive(Clone, Copy)]
struct Scope {
    avoid: [u64; MAX_AVOID],
    len: usize,
    picked: Option<u64>,
    /// A balancer read the scope (whether or not it then picked).
    seen: bool,
}

/// What [`scoped`] saw of the call it wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The id of the endpoint a balancer picked, if one did.
    pub(crate) picked: Option<u64>,
    /// Whether a balancer read the hint at all.
    pub(crate) reached: bool,
}

thread_local! {
    static SCOPE: Cell<Option<Scope>> = const { Cell::new(None) };
    /// True while any scope is open on this thread: the common case (no
    /// retry layer above) then costs one flag read per call.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (which should call a `Balance`, directly or through synchronous
/// layers) so that the pick avoids the endpoints whose ids are in `avoid`
/// while any other endpoint is available. Returns `f`'s result and the id of
/// the endpoint the balancer picked, if a balancer picked one.
///
/// Only the first [`MAX_AVOID`] ids are used.
pub fn call_avoiding<R>(avoid: &[u64], f: impl FnOnce() -> R) -> (R, Option<u64>) {
    let (r, seen) = scoped(avoid, f);
    (r, seen.picked)
}

/// [`call_avoiding`], also saying whether the hint reached a balancer.
pub(crate) fn scoped<R>(avoid: &[u64], f: impl FnOnce() -> R) -> (R, Seen) {
    let mut scope = Scope {
        avoid: [0; MAX_AVOID],
        len: avoid.len().min(MAX_AVOID),
        picked: None,
        seen: false,
    };
    scope.avoid[..scope.len].copy_from_slice(&avoid[..scope.len]);
    let restore = Restore {
        outer: SCOPE.with(|s| s.replace(Some(scope))),
        was_active: ACTIVE.with(|a| a.replace(true)),
    };
    let r = f();
    let inner = SCOPE.with(Cell::get);
    drop(restore);
    let seen = Seen {
        picked: inner.and_then(|s| s.picked),
        reached: inner.is_some_and(|s| s.seen),
    };
    (r, seen)
}

/// Puts the enclosing scope back, also when `f` unwinds.
struct Restore {
    outer: Option<Scope>,
    was_active: bool,
}

impl Drop for Restore {
    fn drop(&mut self) {
        SCOPE.with(|s| s.set(self.outer));
        ACTIVE.with(|a| a.set(self.was_active));
    }
}

/// The avoid list of the enclosing scope, if any (copied out: no borrow
/// held), marking the scope as read.
#[inline]
pub(crate) fn current_avoid() -> Option<([u64; MAX_AVOID], usize)> {
    if !ACTIVE.with(Cell::get) {
        return None;
    }
    SCOPE.with(|s| {
        let mut scope = s.get()?;
        scope.seen = true;
        s.set(Some(scope));
        Some((scope.avoid, scope.len))
    })
}

/// Reports the picked endpoint to the enclosing scope, if any.
#[inline]
pub(crate) fn report_pick(id: u64) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    SCOPE.with(|s| {
        if let Some(mut scope) = s.get() {
            scope.picked = Some(id);
            s.set(Some(scope));
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_reading_holds_inside_its_scope_only() {
        let t = Instant::now();
        tokio::time::advance(Duration::from_secs(5)).await;
        let (inner, nested) = at(t, || {
            let nested = at(t + Duration::from_secs(1), now);
            (now(), nested)
        });
        assert_eq!(inner, t, "the outer reading, restored after the nested one");
        assert_eq!(nested, t + Duration::from_secs(1));
        assert_eq!(now(), t + Duration::from_secs(5), "the clock outside");
        // Restored on unwind as well.
        let caught = std::panic::catch_unwind(|| at(t, || panic!("inner call panics")));
        assert!(caught.is_err());
        assert_eq!(now(), t + Duration::from_secs(5));
    }
}
