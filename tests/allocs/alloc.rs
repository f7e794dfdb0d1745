//! The `Balance` request path allocates nothing per request (beyond what the
//! inner service does), with metrics off and on: counted with the binary's
//! global allocator, per thread (`counting.rs`).

use std::future::{Ready, ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use tower::Service;
use tower_lb::{Balance, pick};

use crate::counting::allocations as allocs;

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

/// Allocations in 10,000 calls through `svc` (a balancer, or a stack over
/// one), after `warm_up` calls.
fn count<S>(mut svc: S, warm_up: u64) -> usize
where
    S: Service<u64, Response = u64>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let mut run = |n: u64| {
        for i in 0..n {
            assert!(svc.poll_ready(&mut cx).is_ready());
            let fut = pin!(svc.call(i));
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
    let before = allocs();
    run(10_000);
    allocs() - before
}

#[test]
fn balance_path_does_not_allocate() {
    assert_eq!(allocations_per_request(pick::PeakEwma::default()), 0);
    // Every picker of the registry, hash pickers included.
    for &name in pick::NAMES {
        let picker = pick::AnyPicker::by_name(name, pick::key_fn(|r: &u64| Some(*r))).unwrap();
        assert_eq!(allocations_per_request(picker), 0, "{name}");
    }
    #[cfg(feature = "metrics")]
    with_metrics();
}

/// The probing picker's selection from a pool of answers allocates nothing
/// (its probes, sent by a driver task, are the probe calls' own).
#[test]
fn probing_selection_does_not_allocate() {
    use tower_lb::pick::prequal::Answer;
    let mut b = Balance::builder().picker(pick::Prequal::new()).seed(1);
    for i in 0..16u32 {
        b = b.endpoint(i, Noop);
    }
    let lb = b.build().unwrap();
    let pool = std::sync::Arc::clone(lb.picker().pool());
    let ids: Vec<u64> = lb
        .handle()
        .endpoints()
        .iter()
        .map(|(_, s)| s.id())
        .collect();
    let mut svc = lb.clone();
    let mut cx = Context::from_waker(Waker::noop());
    let mut run = |n: u64| {
        for i in 0..n {
            // Three answers per request, as the driver would file them
            // (fresh: an arrival time past now counts as age zero).
            for k in [0, 5, 11] {
                let e = ((i + k) % 16) as usize;
                pool.insert(Answer {
                    id: ids[e],
                    hint: e,
                    rif: ((i * 7 + k) % 5) as f64,
                    latency_ns: 1e6,
                    at_ns: u64::MAX,
                    own: 0,
                    uses: 0,
                    failure: None,
                });
            }
            assert!(svc.poll_ready(&mut cx).is_ready());
            let fut = pin!(svc.call(i));
            assert!(matches!(fut.poll(&mut cx), Poll::Ready(Ok(v)) if v == i));
        }
    };
    run(100);
    let before = allocs();
    run(10_000);
    assert_eq!(allocs() - before, 0);
    assert!(
        lb.picker().counts().pooled >= 10_000,
        "{:?}",
        lb.picker().counts()
    );
}

/// With per-thread load, every picker picks and records in its thread's
/// lane without allocating.
#[test]
fn per_thread_path_does_not_allocate() {
    for &name in pick::NAMES {
        let picker = pick::AnyPicker::by_name(name, pick::key_fn(|r: &u64| Some(*r))).unwrap();
        let mut b = Balance::builder()
            .picker(picker)
            .seed(1)
            .per_thread_load(true);
        for i in 0..16u32 {
            b = b.weighted_endpoint(i, Noop, 1.0 + f64::from(i % 3));
        }
        assert_eq!(count(b.build().unwrap(), 100), 0, "{name}");
    }
}

/// With the route step on (two priority levels, zones, a subset), every
/// picker picks without allocating.
#[test]
fn routed_path_does_not_allocate() {
    use tower_lb::breaker::CircuitBreakerConfig;
    use tower_lb::endpoint::{EndpointMeta, Locality};
    use tower_lb::route::{Callers, Routing, Subset, ZoneAware};

    let routed = |name: &str| {
        let picker = pick::AnyPicker::by_name(name, pick::key_fn(|r: &u64| Some(*r))).unwrap();
        let zones = Callers::new([("a", 1.0), ("b", 1.0), ("c", 1.0)]);
        let routing = Routing::new()
            .zone_aware(ZoneAware::new("a", zones).min_cluster_size(2))
            .subset(Subset::new(1, 3, 18));
        let mut b = Balance::builder()
            .picker(picker)
            .seed(1)
            .max_in_flight(8)
            .routing(routing)
            .circuit_breaker(CircuitBreakerConfig::default());
        for i in 0..24u32 {
            let meta = EndpointMeta::new()
                .with_locality(Locality::in_zone(["a", "b", "c"][i as usize % 3]))
                .with_priority(i / 12);
            b = b.endpoint_with(i, Noop, 1.0 + f64::from(i % 3), meta);
        }
        b.build().unwrap()
    };
    for &name in pick::NAMES {
        assert_eq!(count(routed(name), 100), 0, "{name}");
    }
}

/// The duration histogram is recorded with attribute sets built when the
/// endpoint joined, on a real SDK meter provider: OpenTelemetry's stable
/// `Histogram::record` (the SDK looks the set up without allocating once
/// its series exists), and with feature `metrics-bound` bound histograms.
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
    // Through bound histograms (each bound on its outcome's first record,
    // in the warm-up).
    #[cfg(feature = "metrics-bound")]
    {
        let mut b = Balance::builder()
            .picker(pick::RoundRobin::new())
            .seed(1)
            .metrics(Metrics::new(&meter, "alloc-bound").bound(true));
        for i in 0..16u32 {
            b = b.endpoint(i, Noop);
        }
        assert_eq!(count(b.build().unwrap(), 20_000), 0);
    }
}

/// An HTTP endpoint that answers with a one-frame static body and allocates
/// nothing (`Response::new` leaves its header map empty).
#[cfg(feature = "http")]
#[derive(Clone)]
struct StaticHttp;

#[cfg(feature = "http")]
impl Service<http::Request<()>> for StaticHttp {
    type Response = http::Response<http_body_util::Full<bytes::Bytes>>;
    type Error = std::convert::Infallible;
    type Future = Ready<Result<Self::Response, Self::Error>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: http::Request<()>) -> Self::Future {
        let body = http_body_util::Full::new(bytes::Bytes::from_static(b"ok"));
        ready(Ok(http::Response::new(body)))
    }
}

/// The whole exchange over HTTP, the slot held until the body ends (the
/// default) and released at the head: classifying, tracking the body and
/// reading it to its end allocate nothing.
#[cfg(feature = "http")]
#[test]
fn http_exchange_does_not_allocate_with_body_or_header_tracking() {
    use http_body::Body;
    use tower_lb::http::{Classifier, Track};

    for track in [Track::Body, Track::Headers, Track::WholeBody] {
        let mut b = Balance::builder()
            .classify(Classifier::new().track(track))
            .seed(1);
        for i in 0..8u32 {
            b = b.endpoint(i, StaticHttp);
        }
        let mut lb = b.build().unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        let mut run = |n: u64| {
            for _ in 0..n {
                let fut = pin!(lb.call(http::Request::new(())));
                let Poll::Ready(Ok(res)) = fut.poll(&mut cx) else {
                    panic!("a ready endpoint answers at once");
                };
                let mut body = pin!(res.into_body());
                let mut frames = 0;
                loop {
                    match body.as_mut().poll_frame(&mut cx) {
                        Poll::Ready(Some(Ok(_))) => frames += 1,
                        Poll::Ready(None) => break,
                        other => panic!("a static body ends at once: {:?}", other.is_ready()),
                    }
                }
                assert_eq!(frames, 1);
            }
        };
        run(100);
        let before = allocs();
        run(10_000);
        assert_eq!(allocs() - before, 0, "{track:?}");
    }
}

/// A balancer timeout, a retry layer's per-try timeout and its deadline
/// cost a call that answers at once no allocation: both timers are made
/// (boxed) only when a call has to wait on them.
#[test]
fn timeouts_allocate_nothing_for_a_call_that_answers_at_once() {
    use std::time::Duration;
    use tower::Layer;
    use tower_lb::retry::{CloneRequest, RetryLayer};

    let mut b = Balance::builder().seed(1).timeout(Duration::from_secs(1));
    for i in 0..8u32 {
        b = b.endpoint(i, Noop);
    }
    let retry = RetryLayer::builder()
        .replay(CloneRequest)
        .per_try_timeout(Duration::from_millis(200))
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap();
    assert_eq!(count(retry.layer(b.build().unwrap()), 100), 0);
}
