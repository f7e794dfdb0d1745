//! reqwest with the full resilience stack: a `reqwest_middleware` client
//! balanced over three local replicas (the third answers 503) with the
//! crate's retries, per-replica circuit breakers, outlier ejection,
//! `reqwest-tracing` spans per attempt, and OpenTelemetry metrics served on
//! `/metrics`.
//!
//! `cargo run --example reqwest_client` sends 30 requests, prints who
//! answered, each replica's breaker, and the counters it reads back from
//! its own `/metrics`.

use std::collections::BTreeMap;
use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::routing::get;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_tracing::TracingMiddleware;
use tokio::net::TcpListener;
use tower::Layer;
use tower_lb::breaker::{CircuitBreakerConfig, State};
use tower_lb::endpoint::EndpointState;
use tower_lb::http::Origin;
use tower_lb::http::middleware::{self, BalanceMiddleware};
use tower_lb::metrics::{Metrics, prometheus::Exporter};
use tower_lb::outlier::OutlierDetection;
use tower_lb::pick;
use tower_lb::retry::RetryLayer;

type BoxError = Box<dyn Error + Send + Sync>;

/// Each replica's endpoint model, for reading its breaker.
pub type Replicas = Box<dyn Fn() -> Vec<(Origin, std::sync::Arc<EndpointState>)> + Send + Sync>;

/// The client: retries around the balancer, breakers and ejection per
/// replica, metrics into `exporter`, and `reqwest-tracing` after the
/// balancer (one span per attempt, naming its replica).
pub fn client(
    origins: &[String],
    exporter: &Exporter,
) -> Result<(ClientWithMiddleware, Replicas), BoxError> {
    let retry = RetryLayer::builder()
        .per_try_timeout(Duration::from_secs(2))
        .build()?;
    // The breaker's defaults (decide over the last 100 calls, once 100
    // were made; stay open a minute) suit a service, not a 30-request
    // demo: decide after 5 calls.
    let breaker = CircuitBreakerConfig::builder()
        .minimum_calls(5)
        .open_wait(Duration::from_secs(10))
        .build()?;
    let lb = middleware::balance(origins)?
        // Round robin keeps sending the failing replica its share until
        // its breaker opens; the default, PeakEwma, would steer away from
        // it after its first failure and the demo would show no breaker.
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker)
        .outlier_detection(OutlierDetection::default())
        .metrics(Metrics::new(&exporter.meter(), "users").retries(&retry))
        .build()?;
    let handle = lb.handle();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(BalanceMiddleware::new(retry.layer(lb)))
        .with(TracingMiddleware::default())
        .build();
    Ok((client, Box::new(move || handle.endpoints())))
}

/// Serves `router` on an ephemeral port of 127.0.0.1.
async fn serve(router: Router) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// A replica answering its name and the path, or 503 if `failing`.
async fn replica(name: &'static str, failing: bool) -> std::io::Result<SocketAddr> {
    serve(Router::new().fallback(move |req: Request| async move {
        let status = match failing {
            true => StatusCode::SERVICE_UNAVAILABLE,
            false => StatusCode::OK,
        };
        (status, format!("{name} {}", req.uri()))
    }))
    .await
}

/// What the run saw.
#[derive(Debug)]
pub struct Report {
    /// Status and body of each answer, in order.
    pub answers: Vec<(u16, String)>,
    /// Each replica's breaker: its state and how often it opened.
    pub breakers: BTreeMap<&'static str, (State, u64)>,
    /// The exposition served on `/metrics`.
    pub metrics: String,
}

/// Starts the replicas and the metrics page, and sends `requests` GETs
/// (`http://users/users/{i}`).
pub async fn run(requests: usize) -> Result<Report, BoxError> {
    let names = ["replica-1", "replica-2", "replica-3"];
    let mut origins = Vec::new();
    for (i, name) in names.into_iter().enumerate() {
        origins.push(format!("http://{}", replica(name, i == 2).await?));
    }
    let exporter = Exporter::new()?;
    let (client, replicas) = client(&origins, &exporter)?;
    let page = exporter.clone();
    let metrics =
        serve(Router::new().route("/metrics", get(move || async move { page.response() }))).await?;

    let mut answers = Vec::new();
    for i in 0..requests {
        let res = client.get(format!("http://users/users/{i}")).send().await?;
        answers.push((res.status().as_u16(), res.text().await?));
    }
    let mut breakers = BTreeMap::new();
    for (origin, state) in replicas() {
        let i = origins.iter().position(|o| *o == origin.to_string());
        if let (Some(i), Some(b)) = (i, state.breaker()) {
            breakers.insert(names[i], (b.state(), b.transitions_to(State::Open)));
        }
    }
    let url = format!("http://{metrics}/metrics");
    let metrics = reqwest::get(url).await?.text().await?;
    Ok(Report {
        answers,
        breakers,
        metrics,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let report = run(30).await?;
    for (status, body) in &report.answers {
        println!("{status} {body}");
    }
    for (name, (state, opened)) in &report.breakers {
        println!("breaker {name}: {state} (opened {opened} times)");
    }
    let counters = ["lb_requests_total", "lb_retries_total"];
    for line in report.metrics.lines() {
        if counters.iter().any(|c| line.starts_with(c)) {
            println!("{line}");
        }
    }
    Ok(())
}
