//! The cost of following the whole HTTP exchange: body-end tracking against
//! header-time tracking, the gRPC classifier against the HTTP one, and
//! reading ORCA load reports (header and trailer) against not reading them,
//! on the same ready inner service and body, in one run, beside tower's
//! p2c over `tower::load::PeakEwma` on the same exchange; and the whole
//! stack (retry, breakers, ejection) with body tracking.
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

/// A body of one data frame and, optionally, gRPC trailers (with a binary
/// load report): ready at once.
struct Reply {
    data: Option<Bytes>,
    trailers: bool,
    bin_report: bool,
}

/// The issue's example report, in the TEXT form.
const TEXT_REPORT: &str = "TEXT cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=120, eps=2, application_utilization=0.4, named_metrics.foo=1";
/// The same in JSON.
const JSON_REPORT: &str = r#"JSON {"cpuUtilization": 0.3, "memUtilization": 0.8, "rpsFractional": 120, "eps": 2, "applicationUtilization": 0.4, "namedMetrics": {"foo": 1}}"#;
/// `OrcaLoadReport { cpu 0.3, rps 120, eps 2, application 0.4 }`, base64.
const BIN_REPORT: &str = "CTMzMzMzM9M/MQAAAAAAAF5AOQAAAAAAAABASZqZmZmZmdk/";

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
            if self.bin_report {
                t.insert(
                    "endpoint-load-metrics-bin",
                    HeaderValue::from_static(BIN_REPORT),
                );
            }
            return Poll::Ready(Some(Ok(Frame::trailers(t))));
        }
        Poll::Ready(None)
    }
}

/// The inner service: answers at once with a [`Reply`], and the header
/// `report` when set.
#[derive(Clone, Copy, Default)]
struct Answer {
    trailers: bool,
    report: Option<&'static str>,
    bin_report: bool,
}

impl Service<u64> for Answer {
    type Response = http::Response<Reply>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: u64) -> Self::Future {
        let mut res = http::Response::new(Reply {
            data: Some(Bytes::from_static(b"ok")),
            trailers: self.trailers,
            bin_report: self.bin_report,
        });
        if let Some(r) = self.report {
            res.headers_mut()
                .insert("endpoint-load-metrics", HeaderValue::from_static(r));
        }
        ready(Ok(res))
    }
}

fn balance<C>(classify: C, trailers: bool) -> Balance<usize, Answer, pick::PeakEwma, C>
where
    C: Classify<http::Response<Reply>, Infallible>,
{
    with_answer(
        classify,
        Answer {
            trailers,
            ..Answer::default()
        },
    )
}

fn with_answer<C>(classify: C, answer: Answer) -> Balance<usize, Answer, pick::PeakEwma, C>
where
    C: Classify<http::Response<Reply>, Infallible>,
{
    let mut b = Balance::builder().classify(classify);
    for i in 0..8 {
        b = b.endpoint(i, answer);
    }
    b.build().expect("valid config")
}

/// tower's p2c over `tower::load::PeakEwma` endpoints (completion at the
/// response, as tower's default) on the same exchange.
fn tower_p2c(
    answer: Answer,
) -> impl Service<u64, Response = http::Response<Reply>, Error = tower::BoxError> {
    use tower::load::{CompleteOnResponse, PeakEwma};
    let endpoints = (0..8).map(move |_| {
        PeakEwma::new(
            answer,
            std::time::Duration::from_millis(30),
            10e9,
            CompleteOnResponse::default(),
        )
    });
    tower::balance::p2c::Balance::new(tower::discover::ServiceList::new(endpoints))
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
    // `http_body_reports_off`: the default exchange without the one
    // lookup for a load report (what reading reports costs when there are
    // none).
    let rows: [(&str, Track, bool); 4] = [
        ("http_headers", Track::Headers, true),
        ("http_body", Track::Body, true),
        ("http_body_reports_off", Track::Body, false),
        ("http_whole_body", Track::WholeBody, true),
    ];
    for (name, track, reports) in rows {
        let mut lb = balance(Classifier::new().track(track).load_reports(reports), false);
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
        b = b.endpoint(i, Answer::default());
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
    // ORCA: the same responses with a load report, read (the default) and
    // not read (`load_reports(false)`); the difference is the lookup, the
    // parse and the model update. Without a report, the read is the one
    // header lookup `http_body` above already pays.
    let reported = |report| Answer {
        report: Some(report),
        ..Answer::default()
    };
    let rows: [(&str, Answer, bool); 4] = [
        ("orca_text_header", reported(TEXT_REPORT), true),
        ("orca_text_header_not_read", reported(TEXT_REPORT), false),
        ("orca_json_header", reported(JSON_REPORT), true),
        ("orca_json_header_not_read", reported(JSON_REPORT), false),
    ];
    for (name, answer, read) in rows {
        let mut lb = with_answer(Classifier::new().load_reports(read), answer);
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut lb, &mut cx, i)
            })
        });
    }
    let bin = Answer {
        trailers: true,
        bin_report: true,
        ..Answer::default()
    };
    for (name, read) in [
        ("orca_bin_trailer", true),
        ("orca_bin_trailer_not_read", false),
    ] {
        let mut lb = with_answer(grpc::Classifier::new().load_reports(read), bin);
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut lb, &mut cx, i)
            })
        });
    }
    // tower's p2c over PeakEwma, on the plain exchange and on the one with
    // a TEXT report (which it does not read).
    for (name, answer) in [
        ("tower_p2c_peak_ewma", Answer::default()),
        ("tower_p2c_peak_ewma_text_header", reported(TEXT_REPORT)),
    ] {
        let mut theirs = tower_p2c(answer);
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut theirs, &mut cx, i)
            })
        });
    }
    g.finish();
    // The parse alone, per form.
    let mut g = c.benchmark_group("orca_parse");
    for (name, text) in [("text", TEXT_REPORT), ("json", JSON_REPORT)] {
        g.bench_function(name, |b| {
            b.iter(|| tower_lb::orca::LoadReport::parse(black_box(text)))
        });
    }
    g.bench_function("bin_header", |b| {
        let mut h = HeaderMap::new();
        h.insert(
            "endpoint-load-metrics-bin",
            HeaderValue::from_static(BIN_REPORT),
        );
        b.iter(|| tower_lb::orca::LoadReport::from_headers(black_box(&h)))
    });
    g.finish();
}

criterion_group!(benches, exchange);
criterion_main!(benches);
