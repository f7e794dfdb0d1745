//! The `Balance` request path allocates nothing per request (beyond what the
//! inner service does), with metrics off and on: counted with a global
//! allocator, on the measuring thread only (the harness's own thread may
//! allocate meanwhile, as it did under CPU contention). One `#[test]`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::{Ready, ready};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use tower::Service;
use tower_lb::{Balance, pick};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set on the thread whose allocations are counted.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn tally() {
    if COUNTED.with(Cell::get) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        tally();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        tally();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A no-op endpoint that allocates nothing.
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

fn allocations_per_request<P: pick::Pick<u64>>(picker: P) -> usize {
    let mut b = Balance::builder().picker(picker).seed(1).max_in_flight(8);
    for i in 0..16u32 {
        b = b.weighted_endpoint(i, Noop, 1.0 + f64::from(i % 3));
    }
    count(b.build().unwrap(), 100)
}

/// Allocations in 10,000 calls, after `warm_up` calls.
fn count<P: pick::Pick<u64>>(mut lb: Balance<u32, Noop, P>, warm_up: u64) -> usize {
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
    // Warm up thread-locals (arc-swap's debt list, the RNG) and, with
    // metrics, the SDK's tracker for each attribute set (created on first
    // record; a latency-aware picker may reach some endpoints only after a
    // few thousand requests).
    run(warm_up);
    let before = ALLOCS.load(Ordering::Relaxed);
    COUNTED.with(|c| c.set(true));
    run(10_000);
    COUNTED.with(|c| c.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

#[test]
fn balance_path_does_not_allocate() {
    assert_eq!(allocations_per_request(pick::PeakEwma::default()), 0);
    assert_eq!(allocations_per_request(pick::PeakEwma::classic()), 0);
    assert_eq!(allocations_per_request(pick::RoundRobin::new()), 0);
    assert_eq!(allocations_per_request(pick::WeightedRoundRobin::new()), 0);
    assert_eq!(allocations_per_request(pick::Random::new()), 0);
    assert_eq!(allocations_per_request(pick::LeastInFlight::new()), 0);
    assert_eq!(allocations_per_request(pick::P2cLeastInFlight::new()), 0);
    assert_eq!(allocations_per_request(pick::LeastResponseTime::new()), 0);
    #[cfg(feature = "metrics")]
    with_metrics();
}

/// The duration histogram is recorded with attribute sets built when the
/// endpoint joined, on a real SDK meter provider.
#[cfg(feature = "metrics")]
fn with_metrics() {
    use opentelemetry::metrics::MeterProvider;
    use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
    use tower_lb::metrics::Metrics;

    let provider = SdkMeterProvider::builder()
        .with_reader(ManualReader::builder().build())
        .build();
    let meter = provider.meter("alloc-test");
    fn build<P: pick::Picker>(
        p: P,
        meter: &opentelemetry::metrics::Meter,
    ) -> Balance<u32, Noop, P> {
        let mut b = Balance::builder()
            .picker(p)
            .seed(1)
            .metrics(Metrics::new(meter, "alloc"));
        for i in 0..16u32 {
            b = b.weighted_endpoint(i, Noop, 1.0 + f64::from(i % 3));
        }
        b.build().unwrap()
    }
    assert_eq!(count(build(pick::PeakEwma::default(), &meter), 20_000), 0);
    assert_eq!(count(build(pick::RoundRobin::new(), &meter), 20_000), 0);
    assert_eq!(count(build(pick::LeastInFlight::new(), &meter), 20_000), 0);
}
