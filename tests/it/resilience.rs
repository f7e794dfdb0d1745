//! End to end: three hyper servers on 127.0.0.1, one answering 503 and one
//! closing connections mid-run. Idempotent GETs through retry + per-endpoint
//! breakers + outlier ejection + `Balance` see no errors; the bad servers are
//! ejected, and re-admitted once they recover.
//!
//! Real sockets need the real clock; every time constant is scaled down
//! (ejection 300 ms, breaker wait 300 ms) and the test only waits for
//! behaviour, with generous bounds, never asserting on durations.
#![cfg(feature = "http")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Empty, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::{Layer, ServiceExt};
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::http::Classifier;
use tower_lb::outlier::OutlierDetection;
use tower_lb::retry::{Budget, RetryLayer};

const OK: u8 = 0;
const UNAVAILABLE: u8 = 1;
const HANG_UP: u8 = 2;

/// A backend whose behaviour `mode` switches at run time: answer 200, answer
/// 503, or drop the connection without an answer.
async fn backend(name: &'static str, mode: Arc<AtomicU8>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let mode = mode.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |_req| {
                    let m = mode.load(Ordering::Relaxed);
                    async move {
                        match m {
                            // An error from the service makes hyper close the
                            // connection without answering.
                            HANG_UP => Err(std::io::Error::other("hang up")),
                            UNAVAILABLE => Ok(hyper::Response::builder()
                                .status(503)
                                .body(Full::new(Bytes::from_static(b"busy")))
                                .unwrap()),
                            _ => Ok(hyper::Response::new(Full::new(Bytes::from(name)))),
                        }
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_servers_are_retried_around_ejected_and_readmitted() {
    let modes: Vec<Arc<AtomicU8>> = (0..3).map(|_| Arc::new(AtomicU8::new(OK))).collect();
    let names = ["a", "b", "c"];
    let mut urls = Vec::new();
    for (name, mode) in names.iter().zip(&modes) {
        urls.push(format!("http://{}", backend(name, mode.clone()).await));
    }
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let breaker = CircuitBreakerConfig::builder()
        .count_window(10)
        .minimum_calls(5)
        .open_wait(Duration::from_millis(300))
        .open_wait_cap(Duration::from_millis(300))
        .half_open_probes(2)
        .build()
        .unwrap();
    let ejection = OutlierDetection::builder()
        .interval(Duration::from_millis(100))
        .base_ejection_time(Duration::from_millis(300))
        .max_ejection_jitter(Duration::ZERO)
        .max_ejection_percent(67)
        .build()
        .unwrap();
    // Round robin keeps sending the bad servers their share, so the
    // breakers and ejection (not the latency penalty, which would starve
    // them first) are what protects the caller here.
    let lb = tower_lb::http::balance(client, &urls)
        .unwrap()
        .picker(tower_lb::pick::RoundRobin::new())
        .circuit_breaker(breaker)
        .outlier_detection(ejection)
        .panic_threshold(30.0)
        .build()
        .unwrap();
    let retry = RetryLayer::builder()
        .classify(Classifier::default())
        .budget(Budget::new(Duration::from_secs(10), 100, 0.2).unwrap())
        .build()
        .unwrap();
    let svc = retry.layer(lb.clone());
    let get = |svc: &tower_lb::retry::Retry<_, _, _>| {
        let svc = svc.clone();
        async move {
            let req = http::Request::get("http://service.internal/x")
                .body(Empty::<Bytes>::new())
                .unwrap();
            let res: http::Response<tower_lb::http::TrackBody<hyper::body::Incoming>> =
                svc.oneshot(req).await.expect("no error reaches the caller");
            assert_eq!(res.status(), 200, "a failure reached the caller");
        }
    };

    for _ in 0..30 {
        get(&svc).await;
    }
    // b answers 503, c hangs up on every request.
    modes[1].store(UNAVAILABLE, Ordering::Relaxed);
    modes[2].store(HANG_UP, Ordering::Relaxed);
    for _ in 0..300 {
        get(&svc).await;
    }
    let eps = lb.handle().endpoints();
    for (origin, s) in &eps[1..] {
        let ejections: u64 = tower_lb::outlier::EjectionReason::ALL
            .iter()
            .map(|r| s.outlier().ejections(*r))
            .sum();
        let opened = s
            .breaker()
            .unwrap()
            .transitions_to(tower_lb::breaker::State::Open);
        assert!(ejections > 0, "{origin} was never ejected");
        assert!(opened > 0, "{origin}'s breaker never opened");
    }
    assert!(retry.stats().retries() > 0);

    // Both recover; after their ejection and open wait they serve again.
    modes[1].store(OK, Ordering::Relaxed);
    modes[2].store(OK, Ordering::Relaxed);
    let served = |i: usize| eps[i].1.requests();
    let before = (served(1), served(2));
    let mut rounds = 0;
    while served(1) < before.0 + 5 || served(2) < before.1 + 5 {
        get(&svc).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        rounds += 1;
        assert!(rounds < 2_000, "b and c were not re-admitted");
    }
    for (_, s) in &eps {
        assert_eq!(s.in_flight(), 0);
    }
}
