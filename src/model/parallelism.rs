//! How many requests an endpoint serves at once, learned from this client's
//! own traffic.
//!
//! Finagle's cost `latency · (in_flight + 1)` treats every replica as a
//! single server: a replica with 16 workers is charged for in-flight requests
//! that cost it nothing, so traffic spills onto slow replicas and they set the
//! p99 (the lab's `steady-capacity` scenario shows it: four 16-worker
//! replicas, and Finagle's formula sets the p99 at 500 ms). This estimator learns a
//! parallelism `p` per endpoint so the cost becomes
//! `latency · (in_flight / p + 1)`:
//!
//! * a **floor** latency `base` (the unloaded service time) follows samples
//!   down at once and creeps up slowly with queued samples (time constant
//!   6τ), so a replica that permanently slows down is re-based;
//! * a sample taken with `k` requests in flight (its own included) whose
//!   latency stays within 25% of the floor shows the replica served `k` at
//!   once without queueing: `p = max(p, k)`;
//! * a queued sample (latency above that) says the replica managed about
//!   `k · base / latency` at once; `p` decays toward it with the latency
//!   EWMA's weight.
//!
//! With many independent clients, each sees only its own in-flight requests
//! while the latency carries everyone's queueing, so `p` settles near this
//! client's share of the replica (often 1, Finagle's assumption), which keeps
//! the clients from herding.

use std::sync::atomic::{AtomicU64, Ordering};

/// A sample within this factor of the floor latency counts as unqueued.
const QUEUE_TOLERANCE: f64 = 1.25;

#[derive(Debug)]
pub(crate) struct Parallelism {
    /// High 32 bits: floor latency (f32 ns, +inf before any sample);
    /// low 32 bits: parallelism (f32, >= 1).
    packed: AtomicU64,
}

#[inline]
fn pack(base: f64, p: f64) -> u64 {
    (u64::from((base as f32).to_bits()) << 32) | u64::from((p as f32).to_bits())
}

#[inline]
fn unpack(v: u64) -> (f64, f64) {
    (
        f64::from(f32::from_bits((v >> 32) as u32)),
        f64::from(f32::from_bits(v as u32)),
    )
}

impl Parallelism {
    pub(crate) fn new() -> Self {
        Self {
            packed: AtomicU64::new(pack(f64::INFINITY, 1.0)),
        }
    }

    /// The learned parallelism, at least 1.
    #[inline]
    pub(crate) fn get(&self) -> f64 {
        unpack(self.packed.load(Ordering::Relaxed)).1
    }

    /// The floor latency in ns and the parallelism, from one load.
    #[inline(always)]
    pub(crate) fn read(&self) -> (f64, f64) {
        unpack(self.packed.load(Ordering::Relaxed))
    }

    /// The floor latency in ns (infinite before the first sample).
    pub(crate) fn floor(&self) -> f64 {
        unpack(self.packed.load(Ordering::Relaxed)).0
    }

    /// Records a successful call of `latency_ns` that had `k` requests in
    /// flight (itself included) when dispatched. `weights` gives the latency
    /// EWMA's weight for this sample and the floor's (slower) weight; it is
    /// only called for a queued sample, the one case that blends. Returns
    /// the floor as readers will read it, when this sample moved it.
    #[inline]
    pub(crate) fn observe(
        &self,
        latency_ns: f64,
        k: usize,
        weights: impl FnOnce() -> (f64, f64),
    ) -> Option<f64> {
        let k = k.max(1) as f64;
        // A load and a store: this is a heuristic estimate, and a sample lost
        // to a concurrent update on the same endpoint costs nothing, while a
        // compare-exchange loop costs a read-modify-write on every response.
        let was = self.packed.load(Ordering::Relaxed);
        let (base, p) = unpack(was);
        let (base, p) = if latency_ns < base || !base.is_finite() {
            // A new floor: this sample was not queued.
            (latency_ns, p.max(k))
        } else if latency_ns <= base * QUEUE_TOLERANCE {
            if k <= p {
                return None; // nothing learned: skip the write
            }
            (base, k)
        } else {
            let (w, w_floor) = weights();
            let managed = (k * base / latency_ns).max(1.0);
            (
                base * w_floor + latency_ns * (1.0 - w_floor),
                (p * w + managed * (1.0 - w)).max(1.0),
            )
        };
        let packed = pack(base, p);
        self.packed.store(packed, Ordering::Relaxed);
        // The floor is the high half.
        (packed >> 32 != was >> 32).then(|| unpack(packed).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unqueued_concurrency_raises_p() {
        let p = Parallelism::new();
        for k in 1..=16 {
            p.observe(50e6, k, || (0.99, 0.999));
        }
        assert_eq!(p.get(), 16.0);
        assert_eq!(p.floor(), 50e6);
    }

    #[test]
    fn queued_samples_pull_p_toward_what_was_managed() {
        let p = Parallelism::new();
        p.observe(50e6, 8, || (0.5, 0.999));
        assert_eq!(p.get(), 8.0);
        // 8 in flight but twice the floor latency: about 4 at once.
        for _ in 0..40 {
            p.observe(100e6, 8, || (0.5, 1.0));
        }
        assert!((p.get() - 4.0).abs() < 0.01, "{}", p.get());
    }

    #[test]
    fn never_below_one() {
        let p = Parallelism::new();
        p.observe(1e6, 1, || (0.0, 1.0));
        p.observe(1e9, 1, || (0.0, 1.0));
        assert_eq!(p.get(), 1.0);
    }
}
