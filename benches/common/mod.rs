//! What the benches share: a no-op inner service, one request through a
//! service, tower-lb's and tower's balancers over `n` of them, and the
//! whole resilience stack.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::Service;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PeakEwma as TowerPeakEwma};
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::classify::Inherit;
use tower_lb::outlier::OutlierDetection;
use tower_lb::retry::{self, RetryLayer};
use tower_lb::{Balance, pick};

#[allow(dead_code)] // Not every bench uses every rung.
pub mod bare;

/// The inner service: always ready, answers at once, allocates nothing.
#[derive(Clone, Copy)]
pub struct Noop;

impl Service<u64> for Noop {
    type Response = u64;
    type Error = Infallible;
    type Future = Ready<Result<u64, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: u64) -> Self::Future {
        ready(Ok(req))
    }
}

/// One request through a service: ready, call, poll to completion.
#[inline]
pub fn one<S: Service<u64>>(svc: &mut S, cx: &mut Context<'_>, req: u64)
where
    S::Error: std::fmt::Debug,
{
    match svc.poll_ready(cx) {
        Poll::Ready(Ok(())) => {}
        _ => panic!("not ready"),
    }
    let fut = pin!(svc.call(req));
    match fut.poll(cx) {
        Poll::Ready(Ok(r)) => {
            black_box(r);
        }
        _ => panic!("not done"),
    }
}

/// A balancer with `picker` over `n` no-op endpoints.
pub fn tower_lb<P: pick::Pick<u64>>(picker: P, n: usize) -> Balance<usize, Noop, P> {
    tower_lb_with(picker, n, false)
}

/// [`tower_lb`] with per-thread load on or off
/// (`Builder::per_thread_load`).
pub fn tower_lb_with<P: pick::Pick<u64>>(
    picker: P,
    n: usize,
    per_thread: bool,
) -> Balance<usize, Noop, P> {
    let mut b = Balance::builder()
        .picker(picker)
        .per_thread_load(per_thread);
    for i in 0..n {
        b = b.endpoint(i, Noop);
    }
    b.build().expect("valid config")
}

/// tower's own balancer over `n` no-op endpoints: p2c over `PeakEwma`,
/// with the same defaults as tower-lb's (30 ms initial RTT, 10 s decay).
pub fn tower_p2c(n: usize) -> impl Service<u64, Error = tower::BoxError> {
    let endpoints = (0..n).map(|_| {
        TowerPeakEwma::new(
            Noop,
            Duration::from_millis(30),
            10e9,
            CompleteOnResponse::default(),
        )
    });
    tower::balance::p2c::Balance::new(ServiceList::new(endpoints))
}

/// The retry layer as the stack benches configure it: defaults, with the
/// request replayed by clone.
#[allow(dead_code)] // Not every bench uses every helper.
pub fn retry_layer() -> RetryLayer<retry::CloneRequest, Inherit> {
    RetryLayer::builder()
        .replay(retry::CloneRequest)
        .build()
        .expect("valid config")
}

/// The default balancer over 8 no-op endpoints with per-endpoint breakers
/// and outlier ejection, and metrics recorded on `meter` if given.
#[allow(dead_code)]
pub fn guarded(meter: Option<&opentelemetry::metrics::Meter>) -> Balance<usize, Noop> {
    guarded_with(meter.map(|m| tower_lb::metrics::Metrics::new(m, "stack")))
}

/// [`guarded`] with these metrics, if any.
#[allow(dead_code)]
pub fn guarded_with(metrics: Option<tower_lb::metrics::Metrics>) -> Balance<usize, Noop> {
    let mut b = Balance::builder()
        .circuit_breaker(CircuitBreakerConfig::default())
        .outlier_detection(OutlierDetection::default());
    if let Some(metrics) = metrics {
        b = b.metrics(metrics);
    }
    for i in 0..8usize {
        b = b.endpoint(i, Noop);
    }
    b.build().expect("valid config")
}

/// The default balancer over 8 no-op endpoints with metrics on `meter`,
/// its duration histogram bound per endpoint if `bound` (feature
/// `metrics-bound`; without it `bound` must be false).
#[allow(dead_code)]
pub fn metered(meter: &opentelemetry::metrics::Meter, bound: bool) -> Balance<usize, Noop> {
    let metrics = tower_lb::metrics::Metrics::new(meter, "bench");
    #[cfg(feature = "metrics-bound")]
    let metrics = metrics.bound(bound);
    #[cfg(not(feature = "metrics-bound"))]
    assert!(!bound, "bound histograms need feature metrics-bound");
    let mut b = Balance::builder().metrics(metrics);
    for i in 0..8usize {
        b = b.endpoint(i, Noop);
    }
    b.build().expect("valid config")
}

/// A meter provider with a manual reader (nothing exported), for benches
/// that record metrics.
#[allow(dead_code)]
pub fn meter_provider() -> opentelemetry_sdk::metrics::SdkMeterProvider {
    opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(opentelemetry_sdk::metrics::ManualReader::builder().build())
        .build()
}
