//! The server side of load reporting (`tower_lb::server`): requests in
//! flight, latency by RIF, reports and probes; on tokio's paused clock,
//! and over real hyper and tonic servers with the `Prequal` picker.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::orca::{HEADER, LoadReport};
use tower_lb::server::{GRPC_PROBE_PATH, PROBE_HEADER, ServerLoad};

/// A service that answers after the number of milliseconds in its body,
/// with status 500 when the body says "fail"; counts its calls.
fn app(
    calls: Arc<AtomicUsize>,
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send>
+ Clone
+ Send {
    service_fn(move |req: Request<String>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if req.body() == "fail" {
                let mut r = Response::new(String::new());
                *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                return Ok(r);
            }
            let ms: u64 = req.body().parse().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(Response::new(format!("slept {ms}")))
        }
    })
}

fn report(res: &Response<String>) -> LoadReport {
    let v = res.headers().get(HEADER).expect("a load report");
    LoadReport::parse(v.to_str().unwrap()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn requests_in_flight_and_latency_by_rif() {
    let load = ServerLoad::new();
    let svc = load.layer().layer(app(Arc::default()));
    // Three requests arrive together: at RIF 1, 2 and 3.
    let calls: Vec<_> = [10, 20, 30]
        .into_iter()
        .map(|ms| tokio::spawn(svc.clone().oneshot(Request::new(ms.to_string()))))
        .collect();
    tokio::task::yield_now().await;
    assert_eq!(load.in_flight(), 3);
    let mut answers = Vec::new();
    for c in calls {
        answers.push(c.await.unwrap().unwrap());
    }
    assert_eq!(load.in_flight(), 0);
    assert_eq!(load.latency_at(1), Some(Duration::from_millis(10)));
    assert_eq!(load.latency_at(2), Some(Duration::from_millis(20)));
    assert_eq!(load.latency_at(3), Some(Duration::from_millis(30)));
    // Level 5 saw nothing: the nearest below stands in.
    assert_eq!(load.latency_at(5), Some(Duration::from_millis(30)));
    // A request arriving now would be alone: 10 ms.
    assert_eq!(load.latency(), Some(Duration::from_millis(10)));
    // The last answer's report: nothing else in flight, and what a new
    // request at RIF 1 can expect.
    let r = report(&answers[2]);
    assert_eq!(r.named_metric("rif"), Some(0.0));
    assert_eq!(r.named_metric("latency_ms"), Some(10.0));
    assert_eq!(r.rps_fractional(), Some(3.0));
    assert_eq!(r.eps(), Some(0.0));
}

#[tokio::test(start_paused = true)]
async fn probes_are_answered_by_the_layer_alone() {
    let calls = Arc::new(AtomicUsize::new(0));
    let load = ServerLoad::builder()
        .probe_path("/lb/probe")
        .build()
        .unwrap();
    let svc = load.layer().layer(app(calls.clone()));
    // One request in flight while the probes arrive.
    let busy = tokio::spawn(svc.clone().oneshot(Request::new("50".to_string())));
    tokio::task::yield_now().await;
    let by_header = Request::builder()
        .header(PROBE_HEADER, "yes")
        .body(String::new())
        .unwrap();
    let by_path = Request::builder()
        .uri("/lb/probe")
        .body(String::new())
        .unwrap();
    let grpc = Request::builder()
        .method("POST")
        .uri(GRPC_PROBE_PATH)
        .body(String::new())
        .unwrap();
    for (req, is_grpc) in [(by_header, false), (by_path, false), (grpc, true)] {
        let res = svc.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.body(), "");
        assert_eq!(report(&res).named_metric("rif"), Some(1.0));
        assert_eq!(res.headers().contains_key("grpc-status"), is_grpc);
        if is_grpc {
            assert_eq!(res.headers()["grpc-status"], "0");
            assert_eq!(res.headers()["content-type"], "application/grpc");
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only the real request");
    busy.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn utilization_from_the_workers_and_errors_per_second() {
    let load = ServerLoad::builder().workers(4).build().unwrap();
    let svc = load.layer().layer(app(Arc::default()));
    let held: Vec<_> = (0..6)
        .map(|_| tokio::spawn(svc.clone().oneshot(Request::new("100".to_string()))))
        .collect();
    tokio::task::yield_now().await;
    // Six in flight over four workers: all busy, demand 1.5.
    let r = load.report();
    assert_eq!(r.cpu_utilization(), Some(1.0));
    assert_eq!(r.application_utilization(), Some(1.5));
    for h in held {
        h.await.unwrap().unwrap();
    }
    for _ in 0..2 {
        let res = svc
            .clone()
            .oneshot(Request::new("fail".to_string()))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
    let r = load.report();
    assert_eq!((r.rps_fractional(), r.eps()), (Some(8.0), Some(2.0)));
    assert_eq!(r.cpu_utilization(), Some(0.0));
    // Set by the server, they win over the estimate; nonsense clears them.
    load.set_cpu_utilization(0.3);
    load.set_application_utilization(f64::NAN);
    let r = load.report();
    assert_eq!(r.cpu_utilization(), Some(0.3));
    assert_eq!(r.application_utilization(), Some(0.0));
    // A second later the rates are gone.
    tokio::time::advance(Duration::from_millis(1100)).await;
    assert_eq!(load.report().rps_fractional(), Some(0.0));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_leaves_the_count() {
    let load = ServerLoad::builder()
        .report_responses(false)
        .build()
        .unwrap();
    let svc = load.layer().layer(app(Arc::default()));
    let call = svc.clone().oneshot(Request::new("1000".to_string()));
    let t = tokio::spawn(call);
    tokio::task::yield_now().await;
    assert_eq!(load.in_flight(), 1);
    t.abort();
    let _ = t.await;
    assert_eq!(load.in_flight(), 0);
    // Responses carry no report with `report_responses(false)`.
    let res = svc.oneshot(Request::new("0".to_string())).await.unwrap();
    assert!(!res.headers().contains_key(HEADER));
}

#[test]
fn bad_settings_are_named() {
    let field = |b: tower_lb::server::Builder| b.build().unwrap_err().field();
    assert_eq!(field(ServerLoad::builder().workers(0)), "server.workers");
    assert_eq!(
        field(ServerLoad::builder().workers(u32::MAX)),
        "server.workers"
    );
    assert_eq!(
        field(ServerLoad::builder().probe_path("lb")),
        "server.probe_path"
    );
    assert_eq!(
        field(ServerLoad::builder().probe_path("/a b")),
        "server.probe_path"
    );
}
