//! Replicas that register in etcd, and a client whose balancer follows
//! them: joins, a graceful leave, and a replica that stops renewing (as a
//! crashed one would) leaving when its lease runs out.
//!
//! ```text
//! cargo run -p tower-lb-etcd --example etcd                          # starts etcd itself (needs /usr/bin/etcd)
//! cargo run -p tower-lb-etcd --example etcd -- http://10.0.0.5:2379   # or uses yours
//! ```
//!
//! With no argument it starts the etcd binary (Debian's `etcd-server`) on
//! 127.0.0.1 with a temporary data directory. Three replicas serve HTTP on
//! 127.0.0.1 and register under `services/hello` with a 2 s lease; the
//! client prints, every half second, the pool and who answered ten
//! requests.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::server::conn::http1;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tower::ServiceExt;
use tower_lb::discover::{self, Source};
use tower_lb_etcd::local::LocalEtcd;
use tower_lb_etcd::{Endpoint, Etcd, Registration, register};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TARGET: &str = "services/hello";
const TTL: Duration = Duration::from_secs(2);

/// A replica: an HTTP server answering with its name.
async fn replica(name: &'static str) -> Result<SocketAddr, BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let svc = hyper::service::service_fn(move |_req| async move {
                Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(name))))
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(tcp), svc));
        }
    });
    Ok(addr)
}

/// Registers a replica in etcd with its own client, as its process would.
async fn join(etcd: &str, name: &'static str, zone: &str) -> Result<Registration, BoxError> {
    let addr = replica(name).await?;
    let client = etcd_client::Client::connect([etcd], None).await?;
    let me = Endpoint::new(addr).zone(zone).label("name", name);
    println!("{name} registers as {addr}");
    Ok(register(&client, TARGET, me, TTL).await?)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // Yours, or one started here (kept alive until the end of main).
    let (endpoint, _local) = match std::env::args().nth(1) {
        Some(url) => (url, None),
        None => {
            let local = LocalEtcd::start().await?;
            (local.endpoint(), Some(local))
        }
    };
    println!("etcd at {endpoint}");

    // The client side: a balancer that follows services/hello/.
    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    // Round robin, so that the answers show the whole pool.
    let lb = tower_lb::http::balance(http.clone(), Vec::<&str>::new())?
        .picker(tower_lb::pick::RoundRobin::new())
        .build()?;
    let etcd = etcd_client::Client::connect([endpoint.as_str()], None).await?;
    let source = Etcd::builder(etcd, TARGET).build()?;
    let stats = source.stats();
    let _driver = source.spawn(lb.handle(), discover::http_endpoints(http, "http")?);

    let a = join(&endpoint, "a", "z1").await?;
    let b = join(&endpoint, "b", "z1").await?;
    let mut c = Some(join(&endpoint, "c", "z2").await?);
    let mut a = Some(a);

    let start = Instant::now();
    for tick in 0..14 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        match tick {
            3 => {
                println!("-- a leaves gracefully (its lease is revoked)");
                if let Some(a) = a.take() {
                    a.revoke().await?;
                }
            }
            6 => {
                println!(
                    "-- c stops renewing, as a crashed process would: its {TTL:?} lease runs out"
                );
                if let Some(c) = c.take() {
                    c.let_expire();
                }
            }
            _ => {}
        }
        let mut pool: Vec<String> = (lb.handle().endpoints().iter())
            .map(|(origin, state)| format!("{origin} ({})", state.meta().locality().zone()))
            .collect();
        pool.sort();
        let mut answers = std::collections::BTreeMap::<String, u32>::new();
        for _ in 0..10 {
            let req = http::Request::get("http://hello/").body(Empty::new())?;
            let answer = match lb.clone().oneshot(req).await {
                Ok(res) => {
                    let body = res.into_body().collect().await?.to_bytes();
                    String::from_utf8_lossy(&body).into_owned()
                }
                Err(e) => format!("error: {e}"),
            };
            *answers.entry(answer).or_default() += 1;
        }
        println!(
            "{:>4.1}s pool={pool:?} answers={answers:?} (updates {}, errors {})",
            start.elapsed().as_secs_f64(),
            stats.updates(),
            stats.errors()
        );
    }
    b.revoke().await?;
    Ok(())
}
