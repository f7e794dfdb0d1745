//! Active health checks over real hyper servers on 127.0.0.1.
#![cfg(feature = "http")]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::ServiceExt;
use tower_lb::check::{self, HealthCheck};
use tower_lb::http::{self, HttpCheck};
use tower_lb::pick;

/// A backend whose `/healthz` answers 503 while `sick` is set; counts the
/// other (user) requests it serves.
struct Backend {
    addr: SocketAddr,
    sick: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
}

async fn backend() -> Backend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (sick, served) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (s, v) = (sick.clone(), served.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (s, v) = (s.clone(), v.clone());
            let svc = service_fn(move |req: hyper::Request<Incoming>| {
                let mut res = hyper::Response::new(Full::new(Bytes::from_static(b"ok")));
                if req.uri().path() == "/healthz" {
                    if s.load(Ordering::Relaxed) {
                        *res.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
                    }
                } else {
                    v.fetch_add(1, Ordering::Relaxed);
                }
                async move { Ok::<_, Infallible>(res) }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    Backend { addr, sick, served }
}

/// Polls `cond` every 10 ms for up to 10 s.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}

#[tokio::test]
async fn a_failing_endpoint_is_out_after_the_threshold_and_back_after_recovery() {
    let backends = [backend().await, backend().await, backend().await];
    let origins: Vec<String> = backends
        .iter()
        .map(|b| format!("http://{}", b.addr))
        .collect();
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let lb = http::balance(client, &origins)
        .unwrap()
        .picker(pick::RoundRobin::new())
        .build()
        .unwrap();
    let config = HealthCheck::builder()
        .interval(Duration::from_millis(50))
        .no_traffic_interval(Duration::from_millis(50))
        .jitter(Duration::ZERO)
        .timeout(Duration::from_millis(500))
        .unhealthy_threshold(2)
        .healthy_threshold(2)
        .build()
        .unwrap();
    let checks = check::spawn(&lb, config, HttpCheck::get("/healthz").unwrap()).unwrap();
    let sick = &backends[2];
    let state = lb.handle().endpoints()[2].1.clone();

    sick.sick.store(true, Ordering::Relaxed);
    eventually("the sick endpoint fails its check", || {
        state.is_failing_check()
    })
    .await;
    assert!(state.is_unhealthy());
    // No user request reaches it while it fails.
    let before = sick.served.load(Ordering::Relaxed);
    for _ in 0..30 {
        let req = ::http::Request::get("/work").body(Empty::new()).unwrap();
        let res = lb.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), 200);
    }
    assert_eq!(sick.served.load(Ordering::Relaxed), before);
    assert_eq!(backends[0].served.load(Ordering::Relaxed), 15);

    // It recovers: back in rotation after two passing probes.
    sick.sick.store(false, Ordering::Relaxed);
    eventually("the endpoint passes again", || !state.is_failing_check()).await;
    for _ in 0..30 {
        let req = ::http::Request::get("/work").body(Empty::new()).unwrap();
        lb.clone().oneshot(req).await.unwrap();
    }
    assert_eq!(sick.served.load(Ordering::Relaxed), before + 10);

    // A second driver for the same balancer is refused.
    let config = HealthCheck::default();
    let again = check::spawn(&lb, config, HttpCheck::get("/healthz").unwrap());
    assert_eq!(again.unwrap_err().field(), "health_check");

    // Dropping the balancer and its handles stops the driver by itself.
    drop(state);
    drop(lb);
    eventually("the driver stops with the balancer", || {
        checks.is_finished()
    })
    .await;
}

#[tokio::test]
async fn dropping_the_guard_stops_the_checks_and_clears_their_verdicts() {
    let b = backend().await;
    b.sick.store(true, Ordering::Relaxed);
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let lb = http::balance(client, [format!("http://{}", b.addr)])
        .unwrap()
        .build()
        .unwrap();
    let config = HealthCheck::builder()
        .interval(Duration::from_millis(20))
        .no_traffic_interval(Duration::from_millis(20))
        .unhealthy_threshold(1)
        .build()
        .unwrap();
    let checks = check::spawn(&lb, config, HttpCheck::get("/healthz").unwrap()).unwrap();
    let state = lb.handle().endpoints()[0].1.clone();
    eventually("failing", || state.is_failing_check()).await;
    drop(checks);
    // A check that no longer runs keeps no endpoint out of rotation.
    eventually("cleared", || !state.is_failing_check()).await;
    let req = ::http::Request::get("/work").body(Empty::new()).unwrap();
    assert_eq!(lb.clone().oneshot(req).await.unwrap().status(), 200);
}

#[test]
fn every_bad_check_setting_is_a_config_error() {
    let d = Duration::from_secs(1);
    let cases = [
        (
            HealthCheck::builder().interval(Duration::ZERO),
            "health_check.interval",
        ),
        (
            HealthCheck::builder().interval(Duration::MAX),
            "health_check.interval",
        ),
        (
            HealthCheck::builder().timeout(Duration::ZERO),
            "health_check.timeout",
        ),
        (
            HealthCheck::builder().jitter(Duration::MAX),
            "health_check.jitter",
        ),
        (
            HealthCheck::builder().unhealthy_threshold(0),
            "health_check.unhealthy_threshold",
        ),
        (
            HealthCheck::builder().healthy_threshold(0),
            "health_check.healthy_threshold",
        ),
        (
            HealthCheck::builder()
                .interval(d * 10)
                .no_traffic_interval(d),
            "health_check.no_traffic_interval",
        ),
    ];
    for (b, field) in cases {
        assert_eq!(b.build().unwrap_err().field(), field);
    }
    for bad in ["", "healthz", "/a b"] {
        assert_eq!(
            HttpCheck::<Empty<Bytes>>::get(bad).unwrap_err().field(),
            "health_check.path"
        );
    }
    let p = HttpCheck::<Empty<Bytes>>::get("/ready").unwrap();
    assert!(p.clone().expect(200..=204).is_ok());
    #[allow(clippy::reversed_empty_ranges)]
    let empty = 300..=200;
    assert!(p.clone().expect(empty).is_err());
    assert!(p.expect(0..=700).is_err());
}

#[test]
fn checks_need_a_runtime() {
    let lb = tower_lb::Balance::<&str, tower::util::BoxCloneSyncService<(), (), ()>>::builder()
        .build()
        .unwrap();
    let e = check::spawn(&lb, HealthCheck::default(), |_: &&str, _svc| async {
        Ok::<(), std::io::Error>(())
    })
    .unwrap_err();
    assert_eq!(e.field(), "health_check");
}

/// An endpoint without traffic that fails its check is probed again after
/// `interval`, not `no_traffic_interval`: it takes no traffic while it
/// fails, so the longer wait would keep it out a minute after it recovers
/// (the probe that failed it used to schedule the next one as for an idle
/// passing endpoint).
#[tokio::test(start_paused = true)]
async fn an_idle_endpoint_that_fails_is_probed_again_at_the_interval() {
    type Svc = tower::util::BoxCloneSyncService<(), (), Infallible>;
    let svc = || Svc::new(tower::service_fn(|()| async { Ok::<_, Infallible>(()) }));
    let lb = tower_lb::Balance::builder()
        .endpoint("a", svc())
        .endpoint("b", svc())
        .build()
        .unwrap();
    let sick = Arc::new(AtomicBool::new(false));
    let flag = sick.clone();
    let probe = move |key: &&str, _svc: Svc| {
        let failing = *key == "b" && flag.load(Ordering::Relaxed);
        async move { if failing { Err("sick") } else { Ok(()) } }
    };
    let config = HealthCheck::builder()
        .interval(Duration::from_secs(1))
        .jitter(Duration::ZERO)
        .unhealthy_threshold(1)
        .healthy_threshold(1)
        .no_traffic_interval(Duration::from_secs(60))
        .build()
        .unwrap();
    let checks = check::spawn(&lb, config, probe).unwrap();
    let b = lb
        .handle()
        .endpoints()
        .into_iter()
        .find(|(k, _)| *k == "b")
        .map(|(_, s)| s)
        .unwrap();
    // No traffic: after the first round, b is probed every 60 s.
    tokio::time::sleep(Duration::from_secs(1)).await;
    sick.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert!(b.is_failing_check());
    sick.store(false, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(!b.is_failing_check(), "still out 1.5 s after it recovered");
    drop(checks);
}

/// The health checks' names before 0.1.0 (`Probe`, `probe_fn`,
/// `HttpProbe`), kept as deprecated aliases: a bound written with the old
/// trait holds for every check, and the old constructors make the same
/// checks.
#[tokio::test]
#[allow(deprecated)]
async fn the_old_health_check_names_still_work() {
    use tower_lb::check::Check;
    fn old_bound<K, S, P: check::Probe<K, S>>(p: P) -> P {
        p
    }
    async fn by_value(key: &'static str, svc: u32) -> Result<(), String> {
        if svc == 1 {
            Ok(())
        } else {
            Err(format!("{key}: {svc}"))
        }
    }
    let made: check::ProbeFn<_> = old_bound(check::probe_fn(by_value));
    let fut: check::ProbeFuture = made.run(&"a", 1);
    assert_eq!(fut.await, Ok(()));
    assert_eq!(made.run(&"a", 2).await, Err("a: 2".to_string()));
    let p: http::HttpProbe<Empty<Bytes>> = http::HttpProbe::get("/ready").unwrap();
    assert!(p.expect(200..=204).is_ok());
}
