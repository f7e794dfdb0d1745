//! Per-call hints between a layer above [`Balance`](super::Balance) and the
//! balancer: which endpoints to avoid, and which one was picked.
//!
//! A retry must not return to an endpoint it already tried while another is
//! available. DESIGN.md suggested carrying the tried set in the request's
//! extensions, but `Balance` serves any request type, and only HTTP requests
//! have extensions. Instead the retry layer wraps its synchronous `call` into
//! the balancer in [`call_avoiding`]: the pick happens inside `call`, on the
//! same thread, so a thread-local scope reaches it through any number of
//! synchronous layers in between, for every request type, with no allocation.
//! (A layer that defers `call` to another task, such as `tower::buffer`,
//! breaks the chain; then the hint is simply absent and picks are unbiased.)

use std::cell::Cell;

/// Most endpoints one call can ask to avoid.
pub const MAX_AVOID: usize = 8;

#[derive(Clone, Copy)]
struct Scope {
    avoid: [u64; MAX_AVOID],
    len: usize,
    picked: Option<u64>,
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
    let mut scope = Scope {
        avoid: [0; MAX_AVOID],
        len: avoid.len().min(MAX_AVOID),
        picked: None,
    };
    scope.avoid[..scope.len].copy_from_slice(&avoid[..scope.len]);
    let restore = Restore {
        outer: SCOPE.with(|s| s.replace(Some(scope))),
        was_active: ACTIVE.with(|a| a.replace(true)),
    };
    let r = f();
    let picked = SCOPE.with(Cell::get).and_then(|s| s.picked);
    drop(restore);
    (r, picked)
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

/// The avoid list of the enclosing scope, if any (copied out: no borrow held).
#[inline]
pub(crate) fn current_avoid() -> Option<([u64; MAX_AVOID], usize)> {
    if !ACTIVE.with(Cell::get) {
        return None;
    }
    SCOPE.with(|s| s.get().map(|s| (s.avoid, s.len)))
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
