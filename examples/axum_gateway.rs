//! An axum gateway forwarding `/api/*` to upstream replicas through retry,
//! per-endpoint circuit breakers and `Balance`, serving `/metrics`: the
//! forwarding itself is `tower_lb::http::Gateway` (hop-by-hop headers,
//! `X-Forwarded-*`, bodies, error statuses).
//!
//! `cargo run --example axum_gateway` starts three replicas (one answers
//! 503), the gateway, sends a few requests through it, prints the answers
//! and the request counters, and exits; `-- --dns` does the same with the
//! replicas found by resolving `localhost` (the pool starts empty and the
//! first requests wait for the first answer). `-- --serve` keeps the
//! gateway running on 127.0.0.1:3000 instead (`curl
//! localhost:3000/api/hello`, `curl localhost:3000/metrics`).

use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use tower::Layer;
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::discover::{self, Source, dns::Dns};
use tower_lb::http::{self, Gateway, gateway};
use tower_lb::metrics::{Metrics, prometheus::Exporter};
use tower_lb::retry::RetryLayer;

type BoxError = Box<dyn Error + Send + Sync>;

/// Where the gateway finds its replicas.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// A fixed list of origins (`http://127.0.0.1:8080`).
    Origins(Vec<String>),
    /// Every address `host` resolves to, with `port`, kept up to date.
    Dns(String, u16),
}

/// The gateway: `/api/*` through retry, breakers and the balancer to the
/// upstream's replicas (the `/api` prefix stripped), and `/metrics`. An
/// attempt may take `deadline / 2`, the whole request `deadline`; a
/// request that arrives before DNS's first answer waits up to `deadline`.
pub fn gateway(
    upstream: &Upstream,
    exporter: Exporter,
    deadline: Duration,
) -> Result<Router, BoxError> {
    let retry = RetryLayer::builder()
        .per_try_timeout(deadline / 2)
        .deadline(deadline)
        .build()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<gateway::Body>();
    let origins = match upstream {
        Upstream::Origins(origins) => origins.clone(),
        Upstream::Dns(..) => Vec::new(),
    };
    let lb = http::balance(client.clone(), origins)?
        .circuit_breaker(
            CircuitBreakerConfig::builder()
                .consecutive_failures(3)
                .build()?,
        )
        .metrics(Metrics::new(&exporter.meter(), "upstream").retries(&retry))
        .build()?;
    if let Upstream::Dns(host, port) = upstream {
        let make = discover::http_endpoints(client, "http")?;
        Dns::builder(host.as_str(), *port)
            .build()?
            .spawn(lb.handle(), make)
            .detach();
    }
    let api = Gateway::builder(retry.layer(lb.clone()))
        .wait_for_endpoints(&lb.handle(), deadline)
        .peer_from(|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0))
        .build()?;
    Ok(Router::new()
        .nest_service("/api", api)
        .route("/metrics", get(move || async move { exporter.response() })))
}

/// Serves `router` on `addr` (with each request's peer, for
/// `X-Forwarded-For`); returns the address it listens on.
pub async fn serve(addr: &str, router: Router) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = router.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(local)
}

/// Starts an upstream replica on `addr` answering `{name} {method}
/// {path?query} for {X-Forwarded-For}`, or 503 if `failing`.
async fn replica(addr: &str, name: &'static str, failing: bool) -> std::io::Result<SocketAddr> {
    let router = Router::new().fallback(move |req: Request| async move {
        let status = match failing {
            true => StatusCode::SERVICE_UNAVAILABLE,
            false => StatusCode::OK,
        };
        let xff = req
            .headers()
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok());
        let text = format!(
            "{name} {} {} for {}",
            req.method(),
            req.uri(),
            xff.unwrap_or("?")
        );
        (status, text)
    });
    serve(addr, router).await
}

/// Starts the replicas and the gateway on `addr`; returns the gateway's
/// address once it listens. Without `dns`: three replicas listed by
/// origin, the third answering 503. With it: one replica on a port of
/// `localhost`'s addresses (127.0.0.1, and ::1 where the machine has
/// IPv6), found by resolving `localhost`.
async fn start(addr: &str, dns: bool) -> Result<SocketAddr, BoxError> {
    let upstream = if dns {
        let v4 = replica("127.0.0.1:0", "replica-v4", false).await?;
        // The same port on ::1, which `localhost` may resolve to too.
        let _ = replica(&format!("[::1]:{}", v4.port()), "replica-v6", false).await;
        Upstream::Dns("localhost".to_owned(), v4.port())
    } else {
        let mut origins = Vec::new();
        for (name, failing) in [
            ("replica-1", false),
            ("replica-2", false),
            ("replica-3", true),
        ] {
            origins.push(format!(
                "http://{}",
                replica("127.0.0.1:0", name, failing).await?
            ));
        }
        Upstream::Origins(origins)
    };
    let router = gateway(&upstream, Exporter::new()?, Duration::from_secs(5))?;
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

/// Runs the gateway on an ephemeral port (over DNS if `dns`) and sends it
/// `requests` requests (`GET /api/hello?n=i`) one after another, then reads
/// `/metrics`.
pub async fn run(requests: usize, dns: bool) -> Result<Demo, BoxError> {
    let gateway = start("127.0.0.1:0", dns).await?;
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
    let dns = std::env::args().any(|a| a == "--dns");
    if std::env::args().any(|a| a == "--serve") {
        let addr = start("127.0.0.1:3000", dns).await?;
        println!("gateway on http://{addr}/api/… and http://{addr}/metrics; Ctrl-C to stop");
        tokio::signal::ctrl_c().await?;
        return Ok(());
    }
    let demo = run(12, dns).await?;
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
