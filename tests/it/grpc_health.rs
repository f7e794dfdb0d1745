//! The `grpc.health.v1` probe against the real health service of
//! `tonic-health` on 127.0.0.1: `Check` and `Watch`, per service name,
//! alone and driving active checks of a gRPC balancer.
#![cfg(feature = "grpc")]

use std::sync::Arc;
use std::time::Duration;

use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::Channel;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use tower_lb::check::{self, Check, HealthCheck};
use tower_lb::endpoint::EndpointState;
use tower_lb::grpc::{self, GrpcHealthCheck};

/// The service name the servers register.
const SERVICE: &str = "test.Echo";

/// A server with only the health service; its reporter sets statuses.
struct Health {
    origin: String,
    reporter: HealthReporter,
}

async fn health_server() -> Health {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a local port");
    let origin = format!("http://{}", listener.local_addr().expect("an address"));
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status(SERVICE, ServingStatus::Serving)
        .await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    Health { origin, reporter }
}

fn channel(origin: &str) -> Channel {
    tonic::transport::Endpoint::from_shared(origin.to_owned())
        .expect("a valid origin")
        .connect_lazy()
}

/// `Check` and `Watch` probes of a service name.
const MAKES: [fn(&str) -> GrpcHealthCheck; 2] = [
    |name| GrpcHealthCheck::check(name),
    |name| GrpcHealthCheck::watch(name),
];

async fn probe(p: &GrpcHealthCheck, origin: &str) -> Result<(), String> {
    Check::<(), Channel>::run(p, &(), channel(origin)).await
}

/// Both RPCs, every status, a known and an unknown service name.
#[tokio::test]
async fn check_and_watch_read_the_named_services_status() {
    let server = health_server().await;
    for make in MAKES {
        let serving = make(SERVICE);
        assert_eq!(probe(&serving, &server.origin).await, Ok(()));
        // The whole server ("") is serving by default.
        assert_eq!(probe(&make(""), &server.origin).await, Ok(()));
        // An unknown service: Check answers NOT_FOUND, Watch SERVICE_UNKNOWN.
        let unknown = probe(&make("no.Such"), &server.origin).await;
        let why = unknown.expect_err("an unknown service fails");
        assert!(
            why.contains("NotFound") || why.contains("SERVICE_UNKNOWN"),
            "{why}"
        );
    }
    server
        .reporter
        .set_service_status(SERVICE, ServingStatus::NotServing)
        .await;
    for p in [
        GrpcHealthCheck::check(SERVICE),
        GrpcHealthCheck::watch(SERVICE),
    ] {
        let why = probe(&p, &server.origin).await.expect_err("not serving");
        assert!(why.contains("NOT_SERVING"), "{why}");
    }
}

/// No server at all: the probe fails with the transport's reason.
#[tokio::test]
async fn a_server_that_is_gone_fails_the_probe() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
    let origin = format!("http://{}", listener.local_addr().expect("an address"));
    drop(listener);
    let got = probe(&GrpcHealthCheck::check(SERVICE), &origin).await;
    assert!(got.is_err(), "{got:?}");
}

/// Polls `cond` every 10 ms for up to 10 s (a bound for a loaded machine,
/// not a timing assertion).
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// Active checks of a `grpc::balance` over two servers: the one whose
/// service stops serving is taken out, and back once it serves again;
/// with `Check` and with `Watch`.
#[tokio::test]
async fn a_grpc_balancers_checks_follow_the_health_service() {
    for make in MAKES {
        let (a, b) = (health_server().await, health_server().await);
        let lb = grpc::balance([&a.origin, &b.origin])
            .expect("valid origins")
            .build()
            .expect("a valid balancer");
        let config = HealthCheck::builder()
            .interval(Duration::from_millis(50))
            .jitter(Duration::ZERO)
            .unhealthy_threshold(1)
            .healthy_threshold(1)
            .build()
            .expect("a valid config");
        let checks = check::spawn(&lb, config, make(SERVICE)).expect("one driver");
        let state = |origin: &str| -> Arc<EndpointState> {
            lb.handle()
                .endpoints()
                .into_iter()
                .find(|(k, _)| k.to_string() == origin)
                .map(|(_, s)| s)
                .expect("the endpoint")
        };
        let (sa, sb) = (state(&a.origin), state(&b.origin));
        b.reporter
            .set_service_status(SERVICE, ServingStatus::NotServing)
            .await;
        eventually("b fails its check", || sb.is_failing_check()).await;
        assert!(!sa.is_failing_check());
        b.reporter
            .set_service_status(SERVICE, ServingStatus::Serving)
            .await;
        eventually("b passes again", || !sb.is_failing_check()).await;
        drop(checks);
    }
}

#[allow(dead_code)]
#[path = "../../examples/grpc_health.rs"]
mod grpc_health_example;

/// The example: a generated client over three replicas; the one reporting
/// `NOT_SERVING` takes no calls until it serves again.
#[tokio::test]
async fn the_grpc_health_example_takes_a_not_serving_replica_out_and_back() {
    let demo = grpc_health_example::run(6).await.expect("the demo runs");
    let count = |answers: &[String], name: &str| answers.iter().filter(|a| *a == name).count();
    for name in ["a", "b", "c"] {
        assert_eq!(count(&demo.before, name), 2, "{:?}", demo.before);
        assert_eq!(count(&demo.after, name), 2, "{:?}", demo.after);
    }
    assert_eq!(
        count(&demo.while_c_is_down, "c"),
        0,
        "{:?}",
        demo.while_c_is_down
    );
    assert_eq!(count(&demo.while_c_is_down, "a"), 3);
    let changes: Vec<&str> = demo.flips.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(changes, ["failing", "passing"], "{:?}", demo.flips);
}
