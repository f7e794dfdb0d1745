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
//! [`RetryStats::hints_lost`](crate::retry::RetryStats::hints_lost) and
//! raises a `tracing` warning (target `tower_lb`) the first time for each
//! service it wraps, so it shows instead of silently weakening retries.
//! Put such layers below `Balance` (around each endpoint) or above the
//! retry layer.
//!
//! **Why not explicit hints.** The alternatives were weighed against this
//! one. In the request's extensions, a hint exists for HTTP requests only,
//! and inserting one allocates on every call. In a wrapper request type
//! (`Balance: Service<Hinted<Req>>`), every layer between the retry layer
//! and the balancer would have to take the wrapper, which HTTP middleware
//! written for `http::Request` cannot. And what explicit hints could save
//! is small: with the thread-locals taken out of the balancer and the
//! retry layer altogether (a scratch build, run in turn with this one),
//! the balancer alone and the whole stack cost at most a few per cent less
//! (docs/performance.md has the figures and the command). So the hints
//! stay in thread-locals, every lost one is counted, and the first one
//! warns.
//!
//! Dropping works the same way: the retry layer drops an attempt that passed
//! its per-try timeout inside [`timed_out`], and the balancer's in-flight
//! guard, dropped on the same thread, records the call as a timeout failure
//! rather than an abandoned one.

use std::cell::Cell;

use tokio::time::Instant;

use crate::time::Reading;

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
    static NOW: Cell<Option<Reading>> = const { Cell::new(None) };
}

/// Runs `f` (a call or poll into a `Balance`, directly or through
/// synchronous layers) with `now` as the time the layers below read: the
/// balancer's model (the call's start and answer, from the counter's raw
/// value), its timeout deadline and the breaker layer's permit and
/// latency (as an `Instant`).
///
/// The retry layer reads the clock for its own deadlines and latencies at
/// each call and poll; the layers below take that reading instead of
/// reading the clock again, so that a stack reads it as often as a
/// balancer alone (see [`Reading`]).
#[inline(always)]
pub(crate) fn at<R>(now: Reading, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Reading>);
    impl Drop for Reset {
        fn drop(&mut self) {
            NOW.with(|n| n.set(self.0));
        }
    }
    let _reset = Reset(NOW.with(|n| n.replace(Some(now))));
    f()
}

/// The enclosing layer's reading (see [`at`]), if any.
#[inline(always)]
pub(crate) fn reading() -> Option<Reading> {
    NOW.with(Cell::get)
}

/// The time: the enclosing layer's reading (see [`at`]), else tokio's
/// clock.
#[inline]
pub(crate) fn now() -> Instant {
    reading().map_or_else(Instant::now, |r| r.at)
}

/// The counter's raw value the enclosing layer read (see [`at`]), if it
/// read the counter.
#[inline(always)]
pub(crate) fn raw() -> Option<u64> {
    reading().and_then(|r| r.raw)
}

/// The open scope's marks, apart from its avoid list: what a pick reads
/// and writes on every call. Kept apart from the list so that a scope with
/// nothing to avoid (every first attempt) copies 24 bytes in and out of the
/// thread-local instead of the whole list.
#[derive(Clone, Copy)]
struct Marks {
    /// A scope is open on this thread: the common case (no retry layer
    /// above) then costs one read per call.
    open: bool,
    /// A balancer read the scope (whether or not it then picked).
    seen: bool,
    /// How many ids of [`AVOID`] are this scope's.
    len: u8,
    picked: Option<u64>,
}

impl Marks {
    const CLOSED: Self = Self {
        open: false,
        seen: false,
        len: 0,
        picked: None,
    };
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
    static MARKS: Cell<Marks> = const { Cell::new(Marks::CLOSED) };
    /// The open scope's avoid list, its first `MARKS.len` ids. Written only
    /// by a scope that has ids to avoid, and restored when it closes.
    static AVOID: Cell<[u64; MAX_AVOID]> = const { Cell::new([0; MAX_AVOID]) };
}

/// Runs `f` (which should call a `Balance`, directly or through synchronous
/// layers) so that the pick avoids the endpoints whose ids are in `avoid`
/// while any other endpoint is available. Returns `f`'s result and the id of
/// the endpoint the balancer picked, if a balancer picked one.
///
/// Only the first [`MAX_AVOID`] ids are used.
#[inline(always)]
pub fn call_avoiding<R>(avoid: &[u64], f: impl FnOnce() -> R) -> (R, Option<u64>) {
    let (r, seen) = scoped(avoid, f);
    (r, seen.picked)
}

/// [`call_avoiding`], also saying whether the hint reached a balancer.
#[inline(always)]
pub(crate) fn scoped<R>(avoid: &[u64], f: impl FnOnce() -> R) -> (R, Seen) {
    let len = avoid.len().min(MAX_AVOID);
    let outer_avoid = (len > 0).then(|| {
        let mut ids = [0; MAX_AVOID];
        ids[..len].copy_from_slice(&avoid[..len]);
        AVOID.with(|a| a.replace(ids))
    });
    let marks = Marks {
        open: true,
        seen: false,
        len: len as u8,
        picked: None,
    };
    let restore = Restore {
        outer: MARKS.with(|m| m.replace(marks)),
        outer_avoid,
    };
    let r = f();
    let inner = MARKS.with(Cell::get);
    drop(restore);
    let seen = Seen {
        picked: inner.picked,
        reached: inner.seen,
    };
    (r, seen)
}

/// Puts the enclosing scope back, also when `f` unwinds.
struct Restore {
    outer: Marks,
    /// The enclosing scope's list, if this scope replaced it.
    outer_avoid: Option<[u64; MAX_AVOID]>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        MARKS.with(|m| m.set(self.outer));
        if let Some(ids) = self.outer_avoid {
            AVOID.with(|a| a.set(ids));
        }
    }
}

/// The avoid list of the enclosing scope, if it has one (copied out: no
/// borrow held), marking the scope as read.
#[inline]
pub(crate) fn current_avoid() -> Option<([u64; MAX_AVOID], usize)> {
    let mut marks = MARKS.with(Cell::get);
    if !marks.open {
        return None;
    }
    marks.seen = true;
    MARKS.with(|m| m.set(marks));
    let len = usize::from(marks.len);
    (len > 0).then(|| (AVOID.with(Cell::get), len))
}

/// Reports the picked endpoint to the enclosing scope, if any.
#[inline]
pub(crate) fn report_pick(id: u64) {
    MARKS.with(|m| {
        let mut marks = m.get();
        if marks.open {
            marks.picked = Some(id);
            m.set(marks);
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn avoid_now() -> Option<Vec<u64>> {
        current_avoid().map(|(ids, len)| ids[..len].to_vec())
    }

    #[test]
    fn nested_scopes_see_their_own_list_and_restore_the_outer_one() {
        assert_eq!(avoid_now(), None, "no scope open");
        let ((), outer) = scoped(&[1, 2], || {
            assert_eq!(avoid_now(), Some(vec![1, 2]));
            let ((), empty) = scoped(&[], || {
                assert_eq!(avoid_now(), None, "an empty list avoids nothing");
                report_pick(7);
            });
            assert_eq!(
                empty,
                Seen {
                    picked: Some(7),
                    reached: true
                }
            );
            let ((), other) = scoped(&[3], || assert_eq!(avoid_now(), Some(vec![3])));
            assert_eq!(other.picked, None);
            assert_eq!(avoid_now(), Some(vec![1, 2]), "the outer list is back");
            let caught = std::panic::catch_unwind(|| scoped(&[4], || panic!("inner call panics")));
            assert!(caught.is_err());
            assert_eq!(avoid_now(), Some(vec![1, 2]), "also after an unwind");
            report_pick(9);
        });
        assert_eq!(
            outer,
            Seen {
                picked: Some(9),
                reached: true
            }
        );
        let ((), unread) = scoped(&[1; MAX_AVOID + 4], || ());
        assert_eq!(
            unread,
            Seen {
                picked: None,
                reached: false
            }
        );
        assert_eq!(avoid_now(), None, "every scope closed");
        report_pick(5);
        let (none, fresh) = scoped(&[], avoid_now);
        assert_eq!(none, None);
        assert_eq!(fresh.picked, None, "a pick outside any scope is not kept");
    }

    #[tokio::test(start_paused = true)]
    async fn a_reading_holds_inside_its_scope_only() {
        let t = Instant::now();
        tokio::time::advance(Duration::from_secs(5)).await;
        let read = |at, raw| Reading { at, raw };
        let (inner, nested) = at(read(t, Some(7)), || {
            let nested = at(read(t + Duration::from_secs(1), None), || (now(), raw()));
            ((now(), raw()), nested)
        });
        assert_eq!(
            inner,
            (t, Some(7)),
            "the outer reading, restored after the nested one"
        );
        assert_eq!(nested, (t + Duration::from_secs(1), None));
        assert_eq!(now(), t + Duration::from_secs(5), "the clock outside");
        assert_eq!(raw(), None);
        // Restored on unwind as well.
        let caught =
            std::panic::catch_unwind(|| at(read(t, Some(1)), || panic!("inner call panics")));
        assert!(caught.is_err());
        assert_eq!(now(), t + Duration::from_secs(5));
    }
}
