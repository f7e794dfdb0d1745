//! The cost per request of the server side of load reporting
//! (`tower_lb::server::ServerLoad`'s layer) on a no-op HTTP service, in one
//! run: the service alone, behind the layer reporting on every answer,
//! behind it reporting only to probes, and a probe's answer.
//!
//! Run with `cargo bench --bench server`. The ratio of each row to `bare`
//! is the layer's share of a request that does nothing else; a real
//! handler's work and the network dwarf it.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use tower::{Layer, Service};
use tower_lb::server::{PROBE_HEADER, ServerLoad};

/// An HTTP service that answers at once with an empty response.
#[derive(Clone, Copy)]
struct Noop;

impl Service<Request<()>> for Noop {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = Ready<Result<Response<()>, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<()>) -> Self::Future {
        ready(Ok(Response::new(())))
    }
}

fn one<S>(svc: &mut S, cx: &mut Context<'_>, req: Request<()>)
where
    S: Service<Request<()>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
{
    assert!(svc.poll_ready(cx).is_ready());
    let fut = pin!(svc.call(req));
    match fut.poll(cx) {
        Poll::Ready(Ok(r)) => {
            black_box(r);
        }
        _ => panic!("not done"),
    }
}

fn server(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    // The layer reads tokio's clock: inside the runtime's context.
    let _guard = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut g = c.benchmark_group("server");
    let mut bare = Noop;
    g.bench_function("bare", |b| {
        b.iter(|| one(&mut bare, &mut cx, Request::new(())))
    });
    let load = ServerLoad::builder().workers(16).build().expect("valid");
    let mut reporting = load.layer().layer(Noop);
    g.bench_function("layer_reporting", |b| {
        b.iter(|| one(&mut reporting, &mut cx, Request::new(())))
    });
    let quiet = ServerLoad::builder()
        .workers(16)
        .report_responses(false)
        .build()
        .expect("valid");
    let mut counting = quiet.layer().layer(Noop);
    g.bench_function("layer_probes_only", |b| {
        b.iter(|| one(&mut counting, &mut cx, Request::new(())))
    });
    g.bench_function("probe_answer", |b| {
        b.iter(|| {
            let req = Request::builder()
                .header(PROBE_HEADER, "1")
                .body(())
                .expect("a request");
            one(&mut counting, &mut cx, req)
        })
    });
    g.finish();
}

criterion_group!(benches, server);
criterion_main!(benches);
