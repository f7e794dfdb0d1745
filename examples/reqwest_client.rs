//! Balances a `reqwest::Client` over three local backends.
//!
//! `cargo run --example reqwest_client --features reqwest`

use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tower::{Service, ServiceExt};
use tower_lb::pick;

type BoxError = Box<dyn Error + Send + Sync>;

/// Starts a backend on an ephemeral port that answers with its name and
/// the request's path.
async fn backend(name: String) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let name = name.clone();
            let svc = service_fn(move |req: hyper::Request<Incoming>| {
                let body = format!("{name} answered {}", req.uri());
                async move { Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(body)))) }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    Ok(addr)
}

/// Sends `requests` requests through a round-robin balancer over three
/// backends and returns their answers.
pub async fn run(requests: usize) -> Result<Vec<String>, BoxError> {
    let mut origins = Vec::new();
    for i in 1..=3 {
        origins.push(format!("http://{}", backend(format!("backend-{i}")).await?));
    }

    let client = reqwest::Client::new();
    let mut lb = tower_lb::http::balance(client.clone(), &origins)?
        .picker(pick::RoundRobin::new())
        .build()?;

    let mut answers = Vec::new();
    for i in 0..requests {
        // Any host will do: the balancer replaces it with the picked backend's.
        let req = client.get(format!("http://backends/hello?n={i}")).build()?;
        let res = lb.ready().await?.call(req).await?;
        answers.push(res.text().await?);
    }
    Ok(answers)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    for answer in run(6).await? {
        println!("{answer}");
    }
    Ok(())
}
