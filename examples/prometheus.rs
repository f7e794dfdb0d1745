//! Balances requests over three local backends with metrics on, then prints
//! the Prometheus text exposition.
//!
//! `cargo run --example prometheus`

use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
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
use tower_lb::metrics::Metrics;
use tower_lb::metrics::prometheus::Exporter;

type BoxError = Box<dyn Error + Send + Sync>;

/// Starts a backend that answers after `delay`.
async fn backend(delay: Duration) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let svc = service_fn(move |_: hyper::Request<Incoming>| async move {
                tokio::time::sleep(delay).await;
                Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"ok"))))
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    Ok(addr)
}

/// Sends `requests` requests through the default (latency-aware) balancer
/// over a fast, a medium and a slow backend and returns the exposition.
pub async fn run(requests: usize) -> Result<String, BoxError> {
    let mut origins = Vec::new();
    for ms in [1, 5, 20] {
        origins.push(format!(
            "http://{}",
            backend(Duration::from_millis(ms)).await?
        ));
    }

    // One SDK meter provider feeding a Prometheus registry.
    let exporter = Exporter::new()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut lb = tower_lb::http::balance(client, &origins)?
        .metrics(Metrics::new(&exporter.meter(), "backend"))
        .build()?;

    for i in 0..requests {
        let req = http::Request::get(format!("/item/{i}")).body(Empty::new())?;
        let res = lb.ready().await?.call(req).await?;
        res.into_body().collect().await?;
    }
    // What a `/metrics` handler would serve.
    Ok(exporter.render()?)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    print!("{}", run(200).await?);
    Ok(())
}
