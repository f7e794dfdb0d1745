//! With metrics on, the `Balance` request path still allocates nothing per
//! request: the duration histogram is recorded with attribute sets built
//! when the endpoint joined. Counted with a global allocator, over a real
//! SDK meter provider.
#![cfg(feature = "metrics")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::{Ready, ready};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
use tower::Service;
use tower_lb::metrics::Metrics;
use tower_lb::{Balance, pick};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[derive(Clone)]
struct Noop;

impl Service<u64> for Noop {
    type Response = u64;
    type Error = std::convert::Infallible;
    type Future = Ready<Result<u64, Self::Error>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: u64) -> Self::Future {
        ready(Ok(req))
    }
}

fn allocations_per_request<P: pick::Pick<u64>>(
    picker: P,
    meter: &opentelemetry::metrics::Meter,
) -> usize {
    let mut b = Balance::builder()
        .picker(picker)
        .seed(1)
        .metrics(Metrics::new(meter, "alloc"));
    for i in 0..16u32 {
        b = b.weighted_endpoint(i, Noop, 1.0 + f64::from(i % 3));
    }
    let mut lb = b.build().unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    let mut run = |n: u64| {
        for i in 0..n {
            let fut = pin!(lb.call(i));
            match fut.poll(&mut cx) {
                Poll::Ready(Ok(v)) => assert_eq!(v, i),
                other => panic!("{other:?}"),
            }
        }
    };
    // Warm up: the SDK creates each attribute set's tracker on first use.
    // Warm up: the SDK allocates a tracker for each attribute set on its
    // first record, and a latency-aware picker may reach some endpoints
    // only after a few thousand requests.
    run(20_000);
    let before = ALLOCS.load(Ordering::Relaxed);
    run(10_000);
    ALLOCS.load(Ordering::Relaxed) - before
}

#[test]
fn balance_path_with_metrics_does_not_allocate() {
    let provider = SdkMeterProvider::builder()
        .with_reader(ManualReader::builder().build())
        .build();
    let meter = provider.meter("alloc-test");
    assert_eq!(
        allocations_per_request(pick::PeakEwma::default(), &meter),
        0
    );
    assert_eq!(allocations_per_request(pick::RoundRobin::new(), &meter), 0);
    assert_eq!(
        allocations_per_request(pick::LeastInFlight::new(), &meter),
        0
    );
}
