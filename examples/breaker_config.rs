//! Per-endpoint circuit breakers with every threshold set in code: one of
//! three local backends starts failing (503) and its breaker opens, taking
//! it out of the rotation.
//!
//! `cargo run --example breaker_config`

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::{Service, ServiceExt};
use tower_lb::breaker::{CircuitBreakerConfig, Jitter, State};
use tower_lb::pick;

type BoxError = Box<dyn Error + Send + Sync>;

/// Starts a backend that answers with its name, or 503 while `fail` is set.
async fn backend(name: &'static str, fail: Arc<AtomicBool>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let fail = fail.clone();
            let svc = service_fn(move |_: hyper::Request<Incoming>| {
                let failing = fail.load(Ordering::Relaxed);
                async move {
                    let mut res = hyper::Response::new(Full::new(Bytes::from(name)));
                    if failing {
                        *res.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
                    }
                    Ok::<_, Infallible>(res)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    Ok(addr)
}

/// The breaker every endpoint gets, with each threshold spelled out.
pub fn breaker() -> Result<CircuitBreakerConfig, tower_lb::ConfigError> {
    CircuitBreakerConfig::builder()
        // Rates over the last 20 calls of the endpoint, once it has 10.
        .count_window(20)
        .minimum_calls(10)
        // Open at 50% failures or 80% slow calls (slower than 2 s).
        .failure_rate_threshold(50.0)
        .slow_call_rate_threshold(80.0)
        .slow_call_duration(Duration::from_secs(2))
        // Or at once after 3 hard failures (5xx, connect errors) in a row.
        .consecutive_failures(3)
        // Stay open 5 s, doubling on each reopen up to 60 s, jittered.
        .open_wait(Duration::from_secs(5))
        .open_wait_cap(Duration::from_secs(60))
        .jitter(Jitter::Equal)
        // Then admit 2 probes, each allowed 1 s before it counts as failed.
        .half_open_probes(2)
        .half_open_timeout(Duration::from_secs(1))
        .build()
}

/// What happened: answers per backend, 503s seen, each breaker's state and
/// how often it opened.
#[derive(Debug)]
pub struct Report {
    /// Successful answers by backend name.
    pub served: BTreeMap<String, usize>,
    /// 503 answers passed through before the breaker opened.
    pub unavailable: usize,
    /// Breaker state and times opened, by backend name.
    pub breakers: BTreeMap<String, (State, u64)>,
}

/// Sends `requests` round-robin requests over backends `a`, `b` and `c`,
/// with `c` failing from the start.
pub async fn run(requests: usize) -> Result<Report, BoxError> {
    let c_fails = Arc::new(AtomicBool::new(true));
    let mut origins = Vec::new();
    let mut names = BTreeMap::new();
    for (name, fail) in [
        ("a", Arc::new(AtomicBool::new(false))),
        ("b", Arc::new(AtomicBool::new(false))),
        ("c", c_fails.clone()),
    ] {
        let origin = format!("http://{}", backend(name, fail).await?);
        names.insert(origin.clone(), name.to_owned());
        origins.push(origin);
    }

    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut lb = tower_lb::http::balance(client, &origins)?
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker()?)
        .build()?;

    let mut report = Report {
        served: BTreeMap::new(),
        unavailable: 0,
        breakers: BTreeMap::new(),
    };
    for _ in 0..requests {
        let req = http::Request::get("/").body(Empty::new())?;
        let res = lb.ready().await?.call(req).await?;
        if res.status() == hyper::StatusCode::SERVICE_UNAVAILABLE {
            report.unavailable += 1;
        } else {
            let body = res.into_body().collect().await?.to_bytes();
            let name = String::from_utf8_lossy(&body).into_owned();
            *report.served.entry(name).or_insert(0) += 1;
        }
    }
    for (origin, state) in lb.handle().endpoints() {
        if let Some(b) = state.breaker() {
            let name = names.get(&origin.to_string()).cloned().unwrap_or_default();
            report
                .breakers
                .insert(name, (b.state(), b.transitions_to(State::Open)));
        }
    }
    Ok(report)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let report = run(30).await?;
    println!("served: {:?}", report.served);
    println!("503s before c's breaker opened: {}", report.unavailable);
    for (name, (state, opened)) in &report.breakers {
        println!("breaker {name}: {state} (opened {opened} times)");
    }
    Ok(())
}
