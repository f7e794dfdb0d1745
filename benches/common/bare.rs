//! The least a peak-EWMA balancer does per request, in rungs: each rung adds
//! one piece of the work `Balance` with `PeakEwma::default()` is specified
//! to do, written lock-free and inline with nothing else around it. No
//! health owner, no breaker, no retry scopes, no metrics hooks, no
//! classifier: a floor for the algorithm, not a balancer anyone should
//! ship. The distance from a rung to the real `Balance` is what the crate's
//! machinery costs; the rung's ratio to tower is the best a balancer doing
//! that much can reach on this machine.
//!
//! * `Bare<2, false>`: two random candidates, their in-flight counts and
//!   decayed estimates, one slot taken and given back, the clock read at the
//!   call and at its end, the estimate updated by compare-exchange.
//! * `Bare<3, false>`: three candidates (the default's `choices`).
//! * `Bare<3, true>`: the default's cost and its records. Per candidate the
//!   estimate and its spread (one packed word), the time of the last sample,
//!   the failure ratio, the learned parallelism and the weight:
//!   `(est + spread) · (in_flight + p) / (p · weight · (1 − f)²)`; per
//!   request the request count, the spread, the failure skip and the
//!   parallelism sample.
//! * [`Owned`]: the slot is an owned guard holding the endpoint (a response
//!   future is `'static`, so it must keep its endpoint alive: one reference
//!   count up and down), recorded and released when it drops.
//! * [`AsService`]: the same behind `Service::call`, the guard inside the
//!   returned future, recorded when the inner future answers.

use std::future::{Future, Ready};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tower::Service;

use super::{Noop, one};

/// The decay time constant, 1/ns (10 s, as both balancers use).
const INV_TAU: f64 = 1e-10;
/// The failure ratio's time constant, 1/ns (2 s).
const INV_TAU_FAILURE: f64 = 5e-10;

/// One endpoint of the bare balancer, on its own line.
#[repr(align(64))]
pub struct Endpoint {
    in_flight: AtomicUsize,
    /// The estimate: f64 bits, or (rich) f32 estimate and f32 spread.
    estimate: AtomicU64,
    /// The last sample's time, ns since the epoch.
    stamp: AtomicU64,
    requests: AtomicU64,
    failure: AtomicU64,
    /// f32 floor latency and f32 parallelism.
    parallelism: AtomicU64,
    weight: f64,
}

fn pack(hi: f64, lo: f64) -> u64 {
    (u64::from((hi as f32).to_bits()) << 32) | u64::from((lo as f32).to_bits())
}

fn unpack(v: u64) -> (f64, f64) {
    (
        f64::from(f32::from_bits((v >> 32) as u32)),
        f64::from(f32::from_bits(v as u32)),
    )
}

/// The clock in ns on its own scale, read as the crate's request path
/// reads it (`src/time.rs`, `Clock`): the CPU's counter through `quanta`,
/// scaled to nanoseconds (without the crate's check of its tie to tokio's
/// clock, a load and a compare).
#[inline(always)]
fn clock_ns() -> u64 {
    static CLOCK: std::sync::OnceLock<(quanta::Clock, u64)> = std::sync::OnceLock::new();
    let (clock, origin) = CLOCK.get_or_init(|| {
        let clock = quanta::Clock::new();
        let origin = clock.raw();
        (clock, origin)
    });
    clock.delta_as_nanos(*origin, clock.raw())
}

/// The clock, in ns since `epoch` (the clock's reading at the start).
#[inline(always)]
fn now_ns(epoch: u64) -> u64 {
    clock_ns().saturating_sub(epoch)
}

/// `e^(-dt·rate)`, linear where the busy endpoints are.
#[inline(always)]
fn decay(dt_ns: u64, rate: f64) -> f64 {
    let x = dt_ns as i64 as f64 * rate;
    if x < 1.0 / 4096.0 {
        1.0 - x
    } else {
        (-x).exp()
    }
}

/// A balancer over `n` endpoints comparing `K` candidates (2 or 3), with the
/// default's cost and records when `RICH`.
pub struct Bare<const K: usize, const RICH: bool> {
    endpoints: Vec<Arc<Endpoint>>,
    epoch: u64,
}

impl<const K: usize, const RICH: bool> Bare<K, RICH> {
    pub fn new(n: usize) -> Self {
        let estimate = if RICH {
            pack(30e6, 0.0)
        } else {
            30e6f64.to_bits()
        };
        Self {
            endpoints: (0..n)
                .map(|_| {
                    Arc::new(Endpoint {
                        in_flight: AtomicUsize::new(0),
                        estimate: AtomicU64::new(estimate),
                        stamp: AtomicU64::new(0),
                        requests: AtomicU64::new(0),
                        failure: AtomicU64::new(0),
                        parallelism: AtomicU64::new(pack(f64::INFINITY, 1.0)),
                        weight: 1.0,
                    })
                })
                .collect(),
            epoch: clock_ns(),
        }
    }

    #[inline(always)]
    fn cost(e: &Endpoint, now_ns: u64) -> f64 {
        let dt = now_ns.saturating_sub(e.stamp.load(Ordering::Relaxed));
        let w = decay(dt, INV_TAU);
        let in_flight = e.in_flight.load(Ordering::Relaxed) as i64 as f64;
        if !RICH {
            return f64::from_bits(e.estimate.load(Ordering::Relaxed)) * w * (in_flight + 1.0);
        }
        let (est, spread) = unpack(e.estimate.load(Ordering::Relaxed));
        let f = match e.failure.load(Ordering::Relaxed) {
            0 => 0.0,
            bits => f64::from_bits(bits) * decay(dt, INV_TAU_FAILURE),
        };
        let ok = (1.0 - f).max(0.01);
        let p = unpack(e.parallelism.load(Ordering::Relaxed)).1;
        (est * w + spread.max(0.0) * w) * (in_flight + p) / (p * e.weight * ok * ok)
    }

    /// Picks the cheapest of `K` distinct uniform candidates (three lanes
    /// of one random number) and takes a slot on it; returns it with the
    /// time of the call and the in-flight count it was dispatched at.
    #[inline(always)]
    fn start(&self, rng: &mut fastrand::Rng) -> (&Arc<Endpoint>, u64, usize) {
        let n = self.endpoints.len() as u64;
        let r = rng.u64(..);
        let lane = |k: u32, m: u64| ((((r >> (21 * k)) & ((1 << 21) - 1)) * m) >> 21) as usize;
        let a = lane(0, n);
        let b = lane(1, n - 1);
        let b = b + usize::from(b >= a);
        let start = now_ns(self.epoch);
        let (ea, eb) = (&self.endpoints[a], &self.endpoints[b]);
        let (mut e, mut best) = (ea, Self::cost(ea, start));
        let cb = Self::cost(eb, start);
        if cb < best {
            (e, best) = (eb, cb);
        }
        if K == 3 {
            let (lo, hi) = (a.min(b), a.max(b));
            let c = lane(2, n - 2);
            let c = c + usize::from(c >= lo);
            let c = c + usize::from(c >= hi);
            let ec = &self.endpoints[c];
            if Self::cost(ec, start) < best {
                e = ec;
            }
        }
        let k = e.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        (e, start, k)
    }

    /// Records a call on `e` that started at `start` with `k` in flight.
    #[inline(always)]
    fn record(epoch: u64, e: &Endpoint, start: u64, k: usize) {
        let end = now_ns(epoch);
        let rtt = end.saturating_sub(start) as f64;
        let dt = end.saturating_sub(e.stamp.load(Ordering::Relaxed));
        let w = decay(dt, INV_TAU);
        e.stamp.store(end, Ordering::Relaxed);
        if !RICH {
            let _ = e
                .estimate
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                    let est = f64::from_bits(bits);
                    Some(
                        if rtt > est {
                            rtt
                        } else {
                            est * w + rtt * (1.0 - w)
                        }
                        .to_bits(),
                    )
                });
            return;
        }
        e.requests.fetch_add(1, Ordering::Relaxed);
        let _ = e
            .estimate
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                let (est, spread) = unpack(v);
                let spread = spread * w + (rtt - est).abs() * (1.0 - w);
                let est = if rtt > est {
                    rtt
                } else {
                    est * w + rtt * (1.0 - w)
                };
                Some(pack(est, spread))
            });
        if e.failure.load(Ordering::Relaxed) != 0 {
            e.failure.store(0, Ordering::Relaxed);
        }
        let (base, p) = unpack(e.parallelism.load(Ordering::Relaxed));
        let k = k as f64;
        if rtt < base || (rtt <= base * 1.25 && k > p) {
            e.parallelism
                .store(pack(rtt.min(base), p.max(k)), Ordering::Relaxed);
        }
    }

    /// One request to `svc`, the slot a borrowed endpoint.
    #[inline]
    pub fn request(&self, rng: &mut fastrand::Rng, svc: &mut Noop, cx: &mut Context<'_>, req: u64) {
        let (e, start, k) = self.start(rng);
        one(svc, cx, req);
        Self::record(self.epoch, e, start, k);
        e.in_flight.fetch_sub(1, Ordering::Release);
    }
}

/// The slot as an owned guard: recorded and released when it drops.
pub struct Slot<const K: usize, const RICH: bool> {
    endpoint: Arc<Endpoint>,
    epoch: u64,
    start: u64,
    k: usize,
}

impl<const K: usize, const RICH: bool> Drop for Slot<K, RICH> {
    #[inline]
    fn drop(&mut self) {
        Bare::<K, RICH>::record(self.epoch, &self.endpoint, self.start, self.k);
        self.endpoint.in_flight.fetch_sub(1, Ordering::Release);
    }
}

impl<const K: usize, const RICH: bool> Bare<K, RICH> {
    #[inline(always)]
    fn slot(&self, rng: &mut fastrand::Rng) -> Slot<K, RICH> {
        let (e, start, k) = self.start(rng);
        Slot {
            endpoint: Arc::clone(e),
            epoch: self.epoch,
            start,
            k,
        }
    }
}

/// The rung with the slot an owned guard.
pub struct Owned<const K: usize, const RICH: bool>(pub Bare<K, RICH>);

impl<const K: usize, const RICH: bool> Owned<K, RICH> {
    #[inline]
    pub fn request(&self, rng: &mut fastrand::Rng, svc: &mut Noop, cx: &mut Context<'_>, req: u64) {
        let slot = self.0.slot(rng);
        one(svc, cx, req);
        drop(slot);
    }
}

/// The rung behind `Service`: the guard travels in the response future.
pub struct AsService<const K: usize, const RICH: bool> {
    bare: Bare<K, RICH>,
    rng: fastrand::Rng,
    inner: Noop,
}

impl<const K: usize, const RICH: bool> AsService<K, RICH> {
    pub fn new(n: usize) -> Self {
        Self {
            bare: Bare::new(n),
            rng: fastrand::Rng::new(),
            inner: Noop,
        }
    }
}

/// The response future of [`AsService`].
pub struct Answer<F, const K: usize, const RICH: bool> {
    fut: F,
    slot: Option<Slot<K, RICH>>,
}

impl<F: Future + Unpin, const K: usize, const RICH: bool> Future for Answer<F, K, RICH> {
    type Output = F::Output;
    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = Pin::new(&mut self.fut).poll(cx);
        if out.is_ready() {
            self.slot = None;
        }
        out
    }
}

impl<const K: usize, const RICH: bool> Service<u64> for AsService<K, RICH> {
    type Response = u64;
    type Error = std::convert::Infallible;
    type Future = Answer<Ready<Result<u64, Self::Error>>, K, RICH>;
    #[inline]
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    #[inline]
    fn call(&mut self, req: u64) -> Self::Future {
        let slot = self.bare.slot(&mut self.rng);
        Answer {
            fut: self.inner.call(req),
            slot: Some(slot),
        }
    }
}
