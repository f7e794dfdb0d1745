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
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::http::Classifier;
use tower_lb::metrics::Metrics;
use tower_lb::metrics::prometheus::Exporter;
use tower_lb::retry::RetryLayer;

type BoxError = Box<dyn Error + Send + Sync>;

/// The upstream stack as one cloneable service (the box keeps the example's
/// types readable; name the concrete `Retry<Balance<..>>` to avoid it).
type Upstream = BoxCloneSyncService<http::Request<Full<Bytes>>, http::Response<Incoming>, BoxError>;

/// Largest request body the gateway buffers (bodies are buffered so a
/// retry can replay them).
const MAX_BODY: usize = 1 << 20;

#[derive(Clone)]
struct Gateway {
    upstream: Upstream,
    exporter: Exporter,
}

/// Starts an upstream replica answering `{name} {method} {path?query}`, or
/// 503 if `failing`.
async fn replica(name: &'static str, failing: bool) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let svc = service_fn(move |req: hyper::Request<Incoming>| async move {
                let body = format!("{name} {} {}", req.method(), req.uri());
                let mut res = hyper::Response::new(Full::new(Bytes::from(body)));
                if failing {
                    *res.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
                }
                Ok::<_, Infallible>(res)
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    Ok(addr)
}

/// Builds the gateway's router over `origins`.
fn app(origins: &[String], exporter: Exporter) -> Result<Router, BoxError> {
    let retry = RetryLayer::builder()
        .classify(Classifier::new())
        .per_try_timeout(Duration::from_secs(2))
        .build()?;
    let breaker = CircuitBreakerConfig::builder()
        .consecutive_failures(3)
        .open_wait(Duration::from_secs(10))
        .build()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let lb = tower_lb::http::balance(client, origins)?
        .circuit_breaker(breaker)
        .metrics(Metrics::new(&exporter.meter(), "upstream").retries(&retry))
        .build()?;
    let upstream = BoxCloneSyncService::new(retry.layer(lb).map_err(BoxError::from));
    let state = Gateway { upstream, exporter };
    Ok(Router::new()
        .route("/api/{*rest}", any(forward))
        .route("/metrics", get(metrics))
        .with_state(state))
}

async fn metrics(State(gw): State<Gateway>) -> http::Response<String> {
    gw.exporter.response()
}

/// Headers that describe one connection, not the request.
fn hop_by_hop(name: &HeaderName) -> bool {
    name == header::HOST
        || name == header::CONNECTION
        || name == header::TRANSFER_ENCODING
        || name == header::TE
        || name == header::UPGRADE
        || name == header::PROXY_AUTHORIZATION
        || name.as_str() == "keep-alive"
}

/// Forwards `/api/rest?query` as `/rest?query` to a balanced replica.
async fn forward(State(gw): State<Gateway>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "body too large").into_response();
    };
    let path = parts.uri.path();
    let path = path.strip_prefix("/api").unwrap_or(path);
    let target = match parts.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    let mut up = match http::Request::builder()
        .method(parts.method)
        .uri(target)
        .body(Full::new(body))
    {
        Ok(up) => up,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) {
            up.headers_mut().append(name.clone(), value.clone());
        }
    }
    match gw.upstream.oneshot(up).await {
        Ok(res) => res.map(Body::new),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
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
    let router = app(&origins, Exporter::new()?)?;
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(local)
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
