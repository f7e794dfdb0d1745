//! Per-thread load (`Builder::per_thread_load`): threads that share one
//! balancer each pick and record in their own lane, and the endpoint's
//! accessors count every thread's calls exactly once.

use std::future::{Ready, ready};
use std::pin::pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};

use tower::Service;
use tower_lb::{Balance, pick};

/// Answers at once: `Ok` for an even request, `Err` for an odd one.
#[derive(Clone)]
struct Parity;

impl Service<u64> for Parity {
    type Response = u64;
    type Error = &'static str;
    type Future = Ready<Result<u64, &'static str>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: u64) -> Self::Future {
        ready(if req.is_multiple_of(2) {
            Ok(req)
        } else {
            Err("odd")
        })
    }
}

const THREADS: usize = 4;
const HELD: usize = 5;
const ANSWERED: u64 = 200;

/// Every thread holds `HELD` calls dispatched and unpolled, then drops
/// them, then runs `ANSWERED` calls to their end; the main thread reads
/// the endpoints' counts at each step.
#[test]
fn every_threads_calls_are_counted_once() {
    let mut b = Balance::builder()
        .picker(pick::LeastInFlight::new())
        .per_thread_load(true);
    for i in 0..3u32 {
        b = b.endpoint(i, Parity);
    }
    let lb = b.build().unwrap();
    let handle = lb.handle();
    let total = |f: fn(&tower_lb::endpoint::EndpointState) -> u64| {
        handle.endpoints().iter().map(|(_, s)| f(s)).sum::<u64>()
    };
    // Nothing inside the scope asserts: a panic there would leave the
    // other threads waiting at the barrier. Counts are read at each step
    // and checked after every thread has ended.
    let step = Arc::new(Barrier::new(THREADS + 1));
    let (held, after_drop, pending) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (mut lb, step) = (lb.clone(), Arc::clone(&step));
                s.spawn(move || {
                    let held: Vec<_> = (0..HELD as u64).map(|i| lb.call(2 * i)).collect();
                    step.wait(); // held
                    step.wait(); // counted
                    drop(held);
                    step.wait(); // dropped
                    step.wait(); // counted again
                    let mut cx = Context::from_waker(Waker::noop());
                    (0..ANSWERED)
                        .filter(|&i| pin!(lb.call(i)).as_mut().poll(&mut cx).is_pending())
                        .count()
                })
            })
            .collect();
        // A read that panics (a count gone below zero) is kept as `None`.
        let read = |f| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| total(f))).ok();
        step.wait();
        let held = (read(|s| s.in_flight() as u64), read(|s| s.picks()));
        step.wait();
        step.wait();
        let after_drop = read(|s| s.in_flight() as u64);
        step.wait();
        let pending: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        (held, after_drop, pending)
    });
    let n = (THREADS * HELD) as u64;
    assert_eq!(held, (Some(n), Some(n)), "in flight and picks while held");
    assert_eq!(after_drop, Some(0), "in flight after the drops");
    assert_eq!(pending, 0, "every call answers at once");
    let calls = THREADS as u64 * ANSWERED;
    assert_eq!(total(|s| s.in_flight() as u64), 0);
    assert_eq!(total(|s| s.requests()), calls);
    assert_eq!(total(|s| s.failures()), calls / 2);
    assert_eq!(total(|s| s.picks()), calls + (THREADS * HELD) as u64);
}

/// Threads calling through clones of one retry layer's service, each on
/// its own handle and its own line of the request count: the layer counts
/// every request once, and the balancer below every call.
#[test]
fn a_retry_layer_shared_by_threads_counts_every_request_once() {
    use tower::Layer;
    use tower_lb::retry::{CloneRequest, RetryLayer};

    let mut b = Balance::builder().picker(pick::PeakEwma::default());
    for i in 0..3u32 {
        b = b.endpoint(i, Parity);
    }
    let lb = b.build().unwrap();
    let handle = lb.handle();
    let layer = RetryLayer::builder()
        .replay(CloneRequest)
        .build()
        .expect("valid config");
    let svc = layer.layer(lb);
    let pending: usize = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let mut svc = svc.clone();
                s.spawn(move || {
                    let mut cx = Context::from_waker(Waker::noop());
                    // Even requests: answered at once, never retried.
                    (0..ANSWERED)
                        .filter(|&i| {
                            assert!(svc.poll_ready(&mut cx).is_ready());
                            pin!(svc.call(2 * i)).as_mut().poll(&mut cx).is_pending()
                        })
                        .count()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(pending, 0, "every call answers at once");
    let calls = THREADS as u64 * ANSWERED;
    assert_eq!(svc.stats().requests(), calls);
    assert_eq!(svc.stats().attempts(), calls);
    let requests: u64 = handle.endpoints().iter().map(|(_, s)| s.requests()).sum();
    assert_eq!(requests, calls);
}
