//! Per-thread lanes of an endpoint's load and latency.
//!
//! Every answered call writes its endpoint: the in-flight count twice, the
//! request count, the latency estimate and the parallelism, and the
//! reference count of the guard that owns the endpoint. When two threads
//! share one balancer, each of those writes takes the line from the other
//! core: measured write by write (`benches/interleaved.rs`, `shared_2t`),
//! two threads on one `Balance` moved 1.2–1.3× one thread's requests, and
//! removing any single write left the others to bounce the line; with none
//! of them, two threads reached 1.7–2.1×, as two separate balancers do.
//!
//! So each endpoint can keep its request-path state in up to [`LANES`]
//! lanes, one cache line each, where each thread picks and records in its
//! own lane (threads are numbered in the order they first pick, modulo
//! the lanes in use). A guard holds its lane through a per-lane handle
//! ([`Lane`]), so its reference count is on a line of its own too. With
//! lanes, two threads on one `Balance` reach 2.05× one thread's rate
//! (`benches/balance.rs`; 1.84–2.01× in the medians of
//! `benches/interleaved.rs`).
//!
//! What a pick sees under a multi-threaded runtime is then what a balancer
//! per worker would see: the in-flight count, latency estimate and
//! parallelism of this thread's calls. Two things are not per thread:
//!
//! * **Failures** are written to every lane: a replica that fails is
//!   avoided by every thread after one failure, not one per thread, so a
//!   dead replica costs the same errors as with one lane.
//! * **Caps and adaptive limits** need the endpoint's exact count: a
//!   balancer with [`max_in_flight`](crate::balance::Builder::max_in_flight)
//!   or [`AdaptiveConcurrency`](super::AdaptiveConcurrency) uses one lane.
//!
//! Lanes are opt-in ([`per_thread_load`](crate::balance::Builder::per_thread_load)):
//! a thread that weighs only its own calls judges worse when they are few
//! (the lab's `many-clients` over HTTP, `--per-thread-load`:
//! `least_in_flight`'s mean 188 → 297–300 ms). A pick that read every
//! lane's count instead, writing only its own, was tried: reading the line
//! the other core had just written cost as much as sharing it (two threads
//! 1.62–1.67×, one lane 1.53–1.57× in the same runs).
//!
//! The public accessors ([`EndpointState::in_flight`],
//! [`requests`](EndpointState::requests), [`estimate`](EndpointState::estimate)
//! ...) merge the lanes: sums for the counts, the most recently sampled
//! lane for the estimate and parallelism, the lowest floor. Without
//! per-thread load there is one lane, as before lanes existed.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{EndpointState, InFlight};
use crate::guards::Pass;

/// The most lanes an endpoint has: threads beyond it share lanes.
pub(crate) const LANES: usize = 8;

/// The lanes a balancer uses, minus one (a power of two minus one): one
/// lane per core this process may run on, up to [`LANES`].
pub(crate) fn mask_for_cores() -> usize {
    static MASK: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MASK.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.min(LANES).next_power_of_two() - 1
    })
}

thread_local! {
    /// This thread's number, in the order threads first picked.
    static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The next thread's number.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The lane this thread uses, under a balancer whose lanes are `mask + 1`.
#[inline(always)]
pub(crate) fn current(mask: usize) -> usize {
    if mask == 0 {
        return 0;
    }
    INDEX.with(|c| {
        let i = c.get();
        if i != usize::MAX {
            i & mask
        } else {
            let i = NEXT.fetch_add(1, Ordering::Relaxed) & (usize::MAX >> 1);
            c.set(i);
            i & mask
        }
    })
}

/// One lane of an endpoint: what a guard holds, so that its reference
/// count is this lane's (a snapshot keeps one per endpoint and lane).
/// Aligned to a cache line, so that the counts of two lanes never share
/// one.
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Lane {
    pub(crate) state: Arc<EndpointState>,
    pub(crate) index: usize,
}

impl Lane {
    /// Lane `index` of `state`, taken modulo the lanes it uses.
    pub(crate) fn new(state: Arc<EndpointState>, index: usize) -> Arc<Self> {
        let index = index & state.mask();
        Arc::new(Self { state, index })
    }

    /// Takes one in-flight slot on this lane, unless the endpoint already
    /// has `cap`, then asks `admit` (the endpoint's guards) and starts the
    /// call at `now_ns`; the slot is given back if `admit` refuses.
    ///
    /// The guard is built once, complete, rather than taken and then filled
    /// in by value: each step moved it, and the moves' partial writes and
    /// wide reads stalled store forwarding on the request path
    /// (`benches/interleaved.rs`, `default`).
    #[inline]
    ///
    /// `state` is this lane's endpoint, as the pick that chose it holds it:
    /// read through the handle, it was one more load in the chain.
    pub(crate) fn start<E>(
        self: &Arc<Self>,
        state: &EndpointState,
        cap: Option<usize>,
        now_ns: u64,
        admit: impl FnOnce(&EndpointState) -> Result<Option<Pass>, E>,
    ) -> Option<InFlight> {
        debug_assert!(std::ptr::eq(state, &*self.state));
        let concurrency = state.take_slot(cap, self.index)?;
        match admit(state) {
            Ok(pass) => Some(InFlight::started(
                Arc::clone(self),
                concurrency,
                pass,
                now_ns,
            )),
            Err(_) => {
                state.release(self.index);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests;
