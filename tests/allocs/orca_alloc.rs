//! Reading load reports allocates nothing: the HTTP classifier with a TEXT
//! or JSON report (or none) makes exactly the allocations it makes with
//! reports off, and the pickers that read reports allocate nothing per
//! request. Counted with the binary's global allocator,
//! per thread (`counting.rs`).
#![cfg(feature = "http")]

use std::future::{Future, Ready, ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::HeaderValue;
use tower::Service;
use tower_lb::http::Classifier;
use tower_lb::orca::LoadReport;
use tower_lb::pick::{self, OrcaRoundRobin, PeakEwma};
use tower_lb::{Balance, pick::Pick};

use crate::counting::allocations as allocs;

const TEXT: &str = "TEXT cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=120, eps=2, application_utilization=0.4, named_metrics.foo=1";
const JSON: &str =
    r#"JSON {"cpuUtilization": 0.3, "rpsFractional": 120, "namedMetrics": {"foo": 1}}"#;

/// Answers with an `http::Response<()>`, with the report header when set
/// (the response's own header map allocates; that is the same with reports
/// on and off).
#[derive(Clone, Copy)]
struct Answer(Option<&'static str>);

impl Service<u64> for Answer {
    type Response = http::Response<()>;
    type Error = std::convert::Infallible;
    type Future = Ready<Result<Self::Response, Self::Error>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: u64) -> Self::Future {
        let mut res = http::Response::new(());
        if let Some(r) = self.0 {
            res.headers_mut()
                .insert("endpoint-load-metrics", HeaderValue::from_static(r));
        }
        ready(Ok(res))
    }
}

/// Allocations of 1000 requests (after a warm-up) through `lb`.
fn count<S, F>(mut lb: S) -> usize
where
    S: Service<u64, Response = http::Response<F>>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let mut one = |i| {
        assert!(matches!(lb.poll_ready(&mut cx), Poll::Ready(Ok(()))));
        let fut = pin!(lb.call(i));
        let Poll::Ready(Ok(res)) = fut.poll(&mut cx) else {
            panic!("not done")
        };
        drop(res);
    };
    for i in 0..100 {
        one(i);
    }
    let before = allocs();
    for i in 0..1000 {
        one(i);
    }
    allocs() - before
}

fn lb<P: Pick<u64>>(
    picker: P,
    reports: bool,
    answer: Answer,
) -> Balance<usize, Answer, P, Classifier> {
    let mut b = Balance::builder()
        .picker(picker)
        .classify(Classifier::new().load_reports(reports));
    for i in 0..8 {
        b = b.endpoint(i, answer);
    }
    b.build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn reading_reports_adds_no_allocation() {
    for header in [None, Some(TEXT), Some(JSON)] {
        let answer = Answer(header);
        let on = count(lb(PeakEwma::default(), true, answer));
        let off = count(lb(PeakEwma::default(), false, answer));
        assert_eq!(on, off, "{header:?}");
        let on = count(lb(PeakEwma::default().utilization(true), true, answer));
        assert_eq!(on, off, "peak_ewma_orca {header:?}");
        let on = count(lb(OrcaRoundRobin::new(), true, answer));
        assert_eq!(on, off, "orca_round_robin {header:?}");
    }
    // Without a report, nothing beyond the response itself.
    assert_eq!(count(lb(PeakEwma::default(), true, Answer(None))), 0);
}

/// No-op endpoints: the pickers that read reports, with fresh reports fed
/// between requests, allocate nothing.
#[tokio::test(start_paused = true)]
async fn report_pickers_allocate_nothing_per_request() {
    #[derive(Clone, Copy)]
    struct Noop;
    impl Service<u64> for Noop {
        type Response = http::Response<()>;
        type Error = std::convert::Infallible;
        type Future = Ready<Result<Self::Response, Self::Error>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: u64) -> Self::Future {
            ready(Ok(http::Response::new(())))
        }
    }
    fn check<P: Pick<u64>>(picker: P) {
        let mut b = Balance::builder().picker(picker);
        for i in 0..8usize {
            b = b.endpoint(i, Noop);
        }
        let lb = b.build().unwrap();
        let states: Vec<_> = lb.handle().endpoints();
        let report = LoadReport::parse(TEXT).unwrap();
        for (_, s) in &states {
            s.report_load(&report);
        }
        let before = allocs();
        for (_, s) in &states {
            s.report_load(&report);
        }
        assert_eq!(allocs() - before, 0, "report_load");
        // http::Response<()> has an empty header map: no allocation.
        assert_eq!(count(lb), 0);
    }
    check(PeakEwma::default().utilization(true));
    check(OrcaRoundRobin::new());
    check(pick::RoundRobin::new());
}
