//! The `Prequal` picker end to end: replicas behind `server::ServerLoad`
//! answer its probes, sent by `probe::spawn` through the endpoints' own
//! services, over real hyper and tonic servers on 127.0.0.1.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tower::{Layer, ServiceExt, service_fn};
use tower_lb::metrics::Metrics;
use tower_lb::metrics::prometheus::Exporter;
use tower_lb::pick::Prequal;
use tower_lb::server::ServerLoad;
use tower_lb::{grpc, http, probe};

/// A hyper server that answers after `delay`, behind a `ServerLoad`.
async fn replica(delay: Duration) -> (SocketAddr, ServerLoad) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let load = ServerLoad::builder().workers(4).build().unwrap();
    let svc = load
        .layer()
        .layer(service_fn(move |_req: ::http::Request<_>| async move {
            tokio::time::sleep(delay).await;
            Ok::<_, Infallible>(::http::Response::new(Full::new(Bytes::from_static(b"ok"))))
        }));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let svc = TowerToHyperService::new(svc.clone());
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc),
            );
        }
    });
    (addr, load)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_probes_are_answered_and_picks_come_from_them() {
    let (slow, _) = replica(Duration::from_millis(40)).await;
    let (fast, fast_load) = replica(Duration::from_millis(1)).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let origins = [format!("http://{slow}"), format!("http://{fast}")];
    let exporter = Exporter::new().unwrap();
    let lb = http::balance(client, origins.iter().map(String::as_str))
        .unwrap()
        .picker(Prequal::new())
        .metrics(Metrics::new(&exporter.meter(), "probing"))
        .build()
        .unwrap();
    let probes = probe::spawn(&lb, http::LoadProbe::http()).unwrap();
    for _ in 0..200 {
        let req = ::http::Request::get("/").body(Empty::new()).unwrap();
        let res = lb.clone().oneshot(req).await.unwrap();
        res.into_body().collect().await.unwrap();
    }
    let served: Vec<u64> = lb
        .handle()
        .endpoints()
        .iter()
        .map(|(_, s)| s.picks())
        .collect();
    let c = probes.counts();
    assert!(c.sent > 0 && c.answered > 0, "{c:?}");
    assert_eq!(c.failed, 0, "{c:?}");
    assert!(c.pooled > 100, "most picks come from answers: {c:?}");
    // The fast replica answers probes with a lower latency: it takes most.
    assert!(served[1] > 3 * served[0], "{served:?} {c:?}");
    // The probes were not requests: the fast replica served what was sent.
    assert_eq!(fast_load.in_flight(), 0);
    // Counted in the metrics, as the driver counted them (stopped first,
    // so that nothing moves between the two readings).
    drop(probes);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let text = exporter.render().unwrap();
    let line = |name: &str, label: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains(label))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} {label} in\n{text}"))
    };
    let c = lb.picker().counts();
    assert_eq!(
        line("lb_probes_total", "lb_probe_result=\"answered\""),
        c.answered as f64
    );
    assert_eq!(
        line("lb_probes_total", "lb_probe_result=\"sent\""),
        c.sent as f64
    );
    assert_eq!(
        line("lb_probe_picks_total", "lb_probe_source=\"pool\""),
        c.pooled as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_stops_answering_probes_is_forgotten() {
    let (a, _) = replica(Duration::from_millis(1)).await;
    // Nothing listens on b's port: its probes fail at once.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let b = closed.local_addr().unwrap();
    drop(closed);
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let origins = [format!("http://{a}"), format!("http://{b}")];
    let lb = http::balance(client, origins.iter().map(String::as_str))
        .unwrap()
        .picker(Prequal::new().probes_per_request(2.0))
        .build()
        .unwrap();
    let probes = probe::spawn(&lb, http::LoadProbe::http()).unwrap();
    for _ in 0..50 {
        let req = ::http::Request::get("/").body(Empty::new()).unwrap();
        let _ = lb.clone().oneshot(req).await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let c = probes.counts();
    assert!(c.failed > 0 && c.answered > 0, "{c:?}");
    // No answer of b is kept.
    let b_id = lb.handle().endpoints()[1].1.id();
    let pool = lb.picker().pool();
    assert!(
        pool.answers().iter().all(|x| x.id != b_id),
        "{:?}",
        pool.answers()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_probes_are_answered_trailers_only() {
    use crate::grpc_server::{Reply, say};
    // A tonic server with the layer in front of its routes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let load = ServerLoad::new();
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(load.layer())
            .add_service(crate::grpc_server::echoes("a", |_| Reply::Ok))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let lb = grpc::balance([format!("http://{addr}")])
        .unwrap()
        .picker(Prequal::new())
        .build()
        .unwrap();
    let probes = probe::spawn(&lb, http::LoadProbe::grpc()).unwrap();
    for _ in 0..20 {
        assert!(say(lb.clone(), "hi").await.unwrap().ends_with(":hi"));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let c = probes.counts();
    assert!(c.answered > 0 && c.failed == 0, "{c:?}");
}

/// `probe::spawn`'s refusals name their field: outside a tokio runtime
/// (`probe`), and for a picker that takes no probes (`picker`).
#[test]
fn probes_need_a_runtime_and_a_probing_picker() {
    type Svc = tower::util::BoxCloneSyncService<(), (), Infallible>;
    let svc = || Svc::new(service_fn(|()| async { Ok::<_, Infallible>(()) }));
    let prober =
        |_: &&str, _svc: Svc| async { Ok::<_, Infallible>(tower_lb::orca::LoadReport::default()) };
    let lb = tower_lb::Balance::builder()
        .picker(Prequal::new())
        .endpoint("a", svc())
        .build()
        .unwrap();
    let e = probe::spawn(&lb, prober).unwrap_err();
    assert_eq!(
        (e.field(), e.value()),
        ("probe", "\"no tokio runtime\""),
        "{e}"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let _in_runtime = rt.enter();
    let lb = tower_lb::Balance::builder()
        .endpoint("a", svc())
        .build()
        .unwrap();
    let e = probe::spawn(&lb, prober).unwrap_err();
    assert_eq!((e.field(), e.value()), ("picker", "\"peak_ewma\""), "{e}");
}
