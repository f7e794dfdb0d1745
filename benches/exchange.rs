//! The cost of following the whole HTTP exchange: body-end tracking against
//! header-time tracking, and the gRPC classifier against the HTTP one, on
//! the same ready inner service and body, in one run; and the whole stack
//! (retry, breakers, ejection) with body tracking.
//!
//! Run with `cargo bench --bench exchange --features http,grpc`. Each
//! iteration is one request: ready, call, poll the head, then read the body
//! to its end (data frame, trailers), so every row does the same work
//! besides what it measures.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue};
use hyper::body::{Body, Frame};
use tower::{Layer, Service};
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::classify::Classify;
use tower_lb::http::{Classifier, Track};
use tower_lb::outlier::OutlierDetection;
use tower_lb::retry::{self, RetryLayer};
use tower_lb::{Balance, grpc, pick};

/// A body of one data frame and, optionally, gRPC trailers: ready at once,
/// no allocation.
struct Reply {
    data: Option<Bytes>,
    trailers: bool,
}

impl Body for Reply {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(d) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        if std::mem::take(&mut self.trailers) {
            let mut t = HeaderMap::new();
            t.insert("grpc-status", HeaderValue::from_static("0"));
            return Poll::Ready(Some(Ok(Frame::trailers(t))));
        }
        Poll::Ready(None)
    }
}

/// The inner service: answers at once with a [`Reply`].
#[derive(Clone, Copy)]
struct Answer {
    trailers: bool,
}

impl Service<u64> for Answer {
    type Response = http::Response<Reply>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: u64) -> Self::Future {
        ready(Ok(http::Response::new(Reply {
            data: Some(Bytes::from_static(b"ok")),
            trailers: self.trailers,
        })))
    }
}

fn balance<C>(classify: C, trailers: bool) -> Balance<usize, Answer, pick::PeakEwma, C>
where
    C: Classify<http::Response<Reply>, Infallible>,
{
    let mut b = Balance::builder().classify(classify);
    for i in 0..8 {
        b = b.endpoint(i, Answer { trailers });
    }
    b.build().expect("valid config")
}

/// One request: ready, call, head, then the body to its end.
#[inline]
fn one<S, B>(svc: &mut S, cx: &mut Context<'_>, req: u64)
where
    S: Service<u64, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: Body,
{
    assert!(matches!(svc.poll_ready(cx), Poll::Ready(Ok(()))));
    let fut = pin!(svc.call(req));
    let Poll::Ready(Ok(res)) = fut.poll(cx) else {
        panic!("not done")
    };
    let mut body = pin!(res.into_body());
    while let Poll::Ready(Some(frame)) = body.as_mut().poll_frame(cx) {
        let _ = black_box(frame.is_ok());
    }
}

fn exchange(c: &mut Criterion) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut g = c.benchmark_group("exchange");
    let rows: [(&str, Track); 3] = [
        ("http_headers", Track::Headers),
        ("http_body", Track::Body),
        ("http_whole_body", Track::WholeBody),
    ];
    for (name, track) in rows {
        let mut lb = balance(Classifier::new().track(track), false);
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut lb, &mut cx, i)
            })
        });
    }
    // The same exchange with trailers: the HTTP classifier ignores them,
    // the gRPC one reads `grpc-status`.
    let mut http = balance(Classifier::new(), true);
    g.bench_function("trailers_http_classifier", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut http, &mut cx, i)
        })
    });
    let mut grpc = balance(grpc::Classifier::new(), true);
    g.bench_function("trailers_grpc_classifier", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut grpc, &mut cx, i)
        })
    });
    // The whole stack with body tracking: retry (the balancer's classifier,
    // inherited) over per-endpoint breakers and ejection, against
    // `http_body` above.
    let mut b = Balance::builder()
        .classify(Classifier::new())
        .circuit_breaker(CircuitBreakerConfig::default())
        .outlier_detection(OutlierDetection::default());
    for i in 0..8 {
        b = b.endpoint(i, Answer { trailers: false });
    }
    let layer = RetryLayer::builder()
        .replay(retry::CloneRequest)
        .build()
        .expect("valid config");
    let mut stack = layer.layer(b.build().expect("valid config"));
    g.bench_function("stack_http_body", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut stack, &mut cx, i)
        })
    });
    g.finish();
}

criterion_group!(benches, exchange);
criterion_main!(benches);
