//! An axum gateway forwarding `/api/*` to three upstream replicas through
//! retry, per-endpoint circuit breakers and `Balance`, serving `/metrics`.
//!
//! `cargo run --example axum_gateway` starts the replicas (one answers 503),
//! the gateway, sends a few requests through it, prints the answers and the
//! request counters, and exits. `cargo run --example axum_gateway -- --serve`
//! keeps the gateway running on 127.0.0.1:3000 instead
//! (`curl localhost:3000/api/hello`, `curl localhost:3000/metrics`).

use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use tower::{Layer, ServiceExt, service_fn};
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::http::Classifier;
use tower_lb::metrics::{Metrics, prometheus::Exporter};
use tower_lb::retry::RetryLayer;

type BoxError = Box<dyn Error + Send + Sync>;

/// The largest request body the gateway buffers (so a retry can replay it).
const MAX_BODY: usize = 1 << 20;

/// The gateway: `/api/*` through retry, breakers and the balancer to
/// `origins` (the `/api` prefix stripped), and `/metrics`. An attempt may
/// take `deadline / 2`, the whole request `deadline`.
pub fn gateway(
    origins: &[String],
    exporter: Exporter,
    deadline: Duration,
) -> Result<Router, BoxError> {
    let retry = RetryLayer::builder()
        .classify(Classifier::new())
        .per_try_timeout(deadline / 2)
        .deadline(deadline)
        .build()?;
    let breaker = CircuitBreakerConfig::builder()
        .consecutive_failures(3)
        .build()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let lb = tower_lb::http::balance(client, origins)?
        .circuit_breaker(breaker)
        .metrics(Metrics::new(&exporter.meter(), "upstream").retries(&retry))
        .build()?;
    let upstream = retry.layer(lb);
    let api = service_fn(move |req: Request| {
        let upstream = upstream.clone();
        async move {
            let (parts, body) = req.into_parts();
            let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
                return Ok::<_, Infallible>(StatusCode::PAYLOAD_TOO_LARGE.into_response());
            };
            let mut up = http::Request::new(Full::new(body));
            (*up.method_mut(), *up.uri_mut()) = (parts.method, parts.uri);
            for (name, value) in &parts.headers {
                if !hop_by_hop(name) {
                    up.headers_mut().append(name.clone(), value.clone());
                }
            }
            Ok(match upstream.oneshot(up).await {
                Ok(res) => res.map(Body::new),
                // The reason stays in the gateway's logs and metrics.
                Err(e) if e.is_timeout() => StatusCode::GATEWAY_TIMEOUT.into_response(),
                Err(_) => StatusCode::BAD_GATEWAY.into_response(),
            })
        }
    });
    Ok(Router::new()
        .nest_service("/api", api)
        .route("/metrics", get(move || async move { exporter.response() })))
}

/// Headers that describe one connection, not the request.
fn hop_by_hop(name: &HeaderName) -> bool {
    [
        header::HOST,
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::TE,
    ]
    .contains(name)
        || [header::UPGRADE, header::PROXY_AUTHORIZATION].contains(name)
        || name.as_str() == "keep-alive"
}

/// Serves `router` on `addr`; returns the address it listens on.
pub async fn serve(addr: &str, router: Router) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(local)
}

/// Starts an upstream replica answering `{name} {method} {path?query}`, or
/// 503 if `failing`.
async fn replica(name: &'static str, failing: bool) -> std::io::Result<SocketAddr> {
    let router = Router::new().fallback(move |req: Request| async move {
        let status = if failing {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        };
        (status, format!("{name} {} {}", req.method(), req.uri()))
    });
    serve("127.0.0.1:0", router).await
}

/// Starts three replicas (the third answering 503) and the gateway on
/// `addr`; returns the gateway's address once it listens.
async fn start(addr: &str) -> Result<SocketAddr, BoxError> {
    let mut origins = Vec::new();
    for (name, failing) in [
        ("replica-1", false),
        ("replica-2", false),
        ("replica-3", true),
    ] {
        origins.push(format!("http://{}", replica(name, failing).await?));
    }
    let router = gateway(&origins, Exporter::new()?, Duration::from_secs(5))?;
    Ok(serve(addr, router).await?)
}

/// What the demo saw: each answer's status and body, and `/metrics`.
#[derive(Debug)]
pub struct Demo {
    /// Status and body of each `/api` answer, in order.
    pub answers: Vec<(u16, String)>,
    /// Status of `/metrics`.
    pub metrics_status: u16,
    /// The exposition served on `/metrics`.
    pub metrics: String,
}

/// Runs the gateway on an ephemeral port and sends it `requests` requests
/// (`GET /api/hello?n=i`), then reads `/metrics`.
pub async fn run(requests: usize) -> Result<Demo, BoxError> {
    let gateway = start("127.0.0.1:0").await?;
    let client = &Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let get = |path: String| async move {
        let res = client
            .get(format!("http://{gateway}{path}").parse()?)
            .await?;
        let status = res.status().as_u16();
        let body = res.into_body().collect().await?.to_bytes();
        Ok::<_, BoxError>((status, String::from_utf8_lossy(&body).into_owned()))
    };
    let mut answers = Vec::new();
    for i in 0..requests {
        answers.push(get(format!("/api/hello?n={i}")).await?);
    }
    let (metrics_status, metrics) = get("/metrics".to_owned()).await?;
    Ok(Demo {
        answers,
        metrics_status,
        metrics,
    })
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    if std::env::args().any(|a| a == "--serve") {
        let addr = start("127.0.0.1:3000").await?;
        println!("gateway on http://{addr}/api/… and http://{addr}/metrics; Ctrl-C to stop");
        tokio::signal::ctrl_c().await?;
        return Ok(());
    }
    let demo = run(12).await?;
    for (status, body) in &demo.answers {
        println!("{status} {body}");
    }
    println!("\nGET /metrics -> {}", demo.metrics_status);
    for line in demo.metrics.lines() {
        if line.starts_with("lb_requests_total") || line.starts_with("lb_breaker_state") {
            println!("{line}");
        }
    }
    Ok(())
}
