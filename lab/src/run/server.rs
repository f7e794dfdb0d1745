//! http mode: one hyper 1 server per backend on 127.0.0.1 (ephemeral
//! port), answering from the backend's server stack ([`super::replica`]).
//! Every answer names its backend in
//! [`BACKEND_HEADER`](super::message::BACKEND_HEADER), so that rows
//! through a proxy can attribute it.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tower_lb::metrics::prometheus::Exporter;

use super::replica::model::Backend;
use super::replica::{self, Served};
use crate::error::LabError;

/// Running servers; dropping this stops accepting connections.
pub struct Servers {
    /// The servers' addresses, in backend order.
    pub addrs: Vec<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts one server per backend. A backend that joins later (`join`)
/// gets its port now but accepts connections only from its join on: the
/// server starts, then the balancers learn of it, as from a discovery
/// source.
pub async fn start(backends: &[Arc<Backend>]) -> Result<Servers, LabError> {
    serve_from(bind(backends.len()).await?, backends, Backend::joins_at)
}

/// Binds `n` listeners on ephemeral 127.0.0.1 ports, without serving yet:
/// a peer's config needs the ports before the backends' clocks start.
pub async fn bind(n: usize) -> Result<Vec<TcpListener>, LabError> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(
            TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| LabError::runtime(format!("cannot bind 127.0.0.1:0: {e}")))?,
        );
    }
    Ok(out)
}

/// Serves backend `i` on listener `i`, every one at once (a proxy's
/// upstream lists them all from the start).
pub fn serve(listeners: Vec<TcpListener>, backends: &[Arc<Backend>]) -> Result<Servers, LabError> {
    serve_from(listeners, backends, |_| None)
}

/// Serves backend `i` on listener `i` from `from(backend)` on (now when
/// `None`).
fn serve_from(
    listeners: Vec<TcpListener>,
    backends: &[Arc<Backend>],
    from: impl Fn(&Backend) -> Option<tokio::time::Instant>,
) -> Result<Servers, LabError> {
    let mut servers = Servers {
        addrs: Vec::new(),
        tasks: Vec::new(),
    };
    for (i, (listener, b)) in listeners.into_iter().zip(backends).enumerate() {
        let addr = listener
            .local_addr()
            .map_err(|e| LabError::runtime(format!("no local address: {e}")))?;
        servers.addrs.push(addr);
        let (served, at) = (replica::served(i, b), from(b));
        servers.tasks.push(tokio::spawn(async move {
            if let Some(at) = at {
                tokio::time::sleep_until(at).await;
            }
            accept(listener, served).await
        }));
    }
    Ok(servers)
}

async fn accept(listener: TcpListener, served: Served) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors or similar: back off, keep serving.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        // One server stack per backend, shared by its connections: one
        // count of requests in flight.
        let svc = TowerToHyperService::new(served.clone());
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// Serves the exporter's Prometheus text at `/metrics` on an ephemeral
/// 127.0.0.1 port; aborting the task stops it.
pub async fn serve_metrics(exporter: Exporter) -> Result<(SocketAddr, AbortOnDrop), LabError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| LabError::runtime(format!("cannot bind 127.0.0.1:0: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| LabError::runtime(format!("no local address: {e}")))?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            };
            let exporter = exporter.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let res = if req.uri().path() == "/metrics" {
                        exporter.response()
                    } else {
                        let mut res = http::Response::new("see /metrics\n".to_string());
                        *res.status_mut() = http::StatusCode::NOT_FOUND;
                        res
                    };
                    std::future::ready(Ok::<_, std::convert::Infallible>(
                        res.map(|b| Full::new(Bytes::from(b))),
                    ))
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok((addr, AbortOnDrop(task)))
}

/// A task aborted when this is dropped.
pub struct AbortOnDrop(JoinHandle<()>);

impl AbortOnDrop {
    /// Aborts `task` when dropped.
    pub fn new(task: JoinHandle<()>) -> Self {
        Self(task)
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
