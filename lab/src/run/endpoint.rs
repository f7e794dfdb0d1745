//! The per-endpoint service the balancer drives: in `--sim` a direct call
//! into the backend's server stack ([`super::replica`]), in http mode a
//! hyper-util client request whose URI authority is rewritten to the
//! endpoint's address.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::uri::{Authority, Scheme, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::{Service, ServiceExt};

use super::message::{EndpointError, LabRequest, LabResponse, stream_hold};
use super::replica::body::LabBody;
use super::replica::model::Backend;
use super::replica::{self, Served};
use super::server::{self, Servers};
use super::traffic::connections::User;
use crate::error::LabError;
use crate::record::Recorder;
use crate::scenario::Scenario;
use crate::scenario::target::TargetSpec;

/// A load probe's round trip in `--sim` (1 ms, as in Prequal's
/// simulation; over HTTP the loopback's own).
pub const SIM_LOAD_PROBE_RTT: Duration = Duration::from_millis(1);

/// The hyper-util client used in http mode.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// Where an endpoint's requests go.
// It lives behind `Endpoint`'s `Arc`; a hyper-util client with HTTP/2 on
// (features `rustls`, `--all-features`) is just larger than the `Arc`.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Target {
    /// The backend's server stack, called in process.
    Sim(Served),
    /// A backend's HTTP server.
    Http {
        /// Shared client (one connection pool for the run).
        client: HttpClient,
        /// `127.0.0.1:port`.
        authority: Authority,
    },
}

/// One endpoint of a balancer. `Balance` clones the endpoint's service for
/// every request, so everything sits behind one `Arc`: a clone is one atomic
/// increment (a hyper-util `Client` clone is several, on lines every worker
/// thread shares, which showed up as microseconds of "pick time").
#[derive(Clone)]
pub struct Endpoint(Arc<Parts>);

impl Endpoint {
    /// An endpoint from its parts.
    pub fn new(parts: Parts) -> Self {
        Self(Arc::new(parts))
    }
}

/// What an [`Endpoint`] holds.
pub struct Parts {
    /// Backend index (the balancer's key).
    pub idx: usize,
    /// Where requests go.
    pub target: Target,
    /// Extra client-side latency per request (the scenario's `overhead`).
    pub overhead: Duration,
    /// Counts the picks per backend.
    pub rec: Arc<Recorder>,
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<LabResponse, EndpointError>> + Send>>;

impl Service<LabRequest> for Endpoint {
    type Response = LabResponse;
    type Error = EndpointError;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), EndpointError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: LabRequest) -> BoxFuture {
        let parts = &*self.0;
        // A load probe is not a pick: the table counts requests.
        let load_probe = req.headers().contains_key(tower_lb::server::PROBE_HEADER);
        if !load_probe {
            parts.rec.pick(parts.idx);
            if let Some(&User(u)) = req.extensions().get::<User>() {
                parts.rec.reached(u, parts.idx);
            }
        }
        let overhead = parts.overhead;
        match parts.target.clone() {
            Target::Sim(served) => Box::pin(async move {
                let out = served.oneshot(req).await;
                // The network's share, after the answer: the scenario's
                // overhead, and for a load probe at least the open-loop
                // model's round trip.
                let wait = if load_probe {
                    overhead.max(SIM_LOAD_PROBE_RTT)
                } else {
                    overhead
                };
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                out
            }),
            Target::Http { client, authority } => Box::pin(async move {
                let streams = stream_hold(&req).is_some();
                let mut parts = req.uri().clone().into_parts();
                parts.scheme = Some(Scheme::HTTP);
                parts.authority = Some(authority);
                *req.uri_mut() =
                    Uri::from_parts(parts).map_err(|e| EndpointError(e.to_string()))?;
                let res = client
                    .request(req)
                    .await
                    .map_err(|e| EndpointError(format!("request failed: {e}")))?;
                // A stream's body is passed on (the balancer tracks it);
                // others are read here, as before.
                if streams {
                    return Ok(res.map(LabBody::Http));
                }
                let status = res.status();
                let report = res.headers().get(tower_lb::orca::HEADER).cloned();
                res.into_body()
                    .collect()
                    .await
                    .map_err(|e| EndpointError(format!("body failed: {e}")))?;
                if !overhead.is_zero() {
                    tokio::time::sleep(overhead).await;
                }
                let mut out = http::Response::new(LabBody::Done);
                *out.status_mut() = status;
                if let Some(v) = report {
                    out.headers_mut().insert(tower_lb::orca::HEADER, v);
                }
                Ok(out)
            }),
        }
    }
}

/// Where each backend's requests go: the backend model in `--sim`, else
/// its HTTP server, started here (the servers run while the returned
/// handle lives); with `[target]`, the user's replicas.
pub async fn targets(
    sc: &Scenario,
    sim: bool,
    backends: &[Arc<Backend>],
) -> Result<(Vec<Target>, Option<Servers>), LabError> {
    if let Some(t) = &sc.target {
        return Ok((replicas(t)?, None));
    }
    if sim {
        let served = backends.iter().enumerate();
        return Ok((
            served
                .map(|(i, b)| Target::Sim(replica::served(i, b)))
                .collect(),
            None,
        ));
    }
    let servers = server::start(backends).await?;
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build_http::<Full<Bytes>>();
    let t = servers
        .addrs
        .iter()
        .map(|a| {
            a.to_string()
                .parse()
                .map(|authority| Target::Http {
                    client: client.clone(),
                    authority,
                })
                .map_err(|e| LabError::runtime(format!("bad address {a}: {e}")))
        })
        .collect::<Result<_, _>>()?;
    Ok((t, Some(servers)))
}

/// How long a connection to one of the user's replicas may take to open
/// before the request fails: the check before the run allows the same.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The user's replicas (`[target]`), over one client.
fn replicas(t: &TargetSpec) -> Result<Vec<Target>, LabError> {
    let replicas = t
        .replicas()
        .map_err(|e| LabError::input(format!("[target] urls: {e}")))?;
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector);
    Ok(replicas
        .into_iter()
        .map(|r| Target::Http {
            client: client.clone(),
            authority: r.authority,
        })
        .collect())
}
