//! What the benches share: a no-op inner service, one request through a
//! service, and tower-lb's and tower's balancers over `n` of them.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::Service;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PeakEwma as TowerPeakEwma};
use tower_lb::{Balance, pick};

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
    let mut b = Balance::builder().picker(picker);
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
