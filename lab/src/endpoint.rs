//! The per-endpoint service the balancer drives: in `--sim` a direct call
//! into the backend model, in http mode a hyper-util client request whose
//! URI authority is rewritten to the endpoint's address.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::uri::{Authority, Scheme, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::Service;

use super::backend::{Answer, Backend, Hold};
use super::body::LabBody;
use super::error::LabError;
use super::record::Recorder;
use super::server::{self, Servers};

/// What a virtual user sends.
pub type LabRequest = http::Request<Empty<Bytes>>;
/// What it gets back (the user reads the body to its end).
pub type LabResponse = http::Response<LabBody>;

/// The request header that makes a request a stream: its value is how long
/// the body streams, in milliseconds.
pub const STREAM_HEADER: &str = "x-lab-stream";

/// How long a request's body streams, if it is a stream.
pub fn stream_hold(req: &http::Request<impl Sized>) -> Option<Duration> {
    let ms: u64 = req
        .headers()
        .get(STREAM_HEADER)?
        .to_str()
        .ok()?
        .parse()
        .ok()?;
    Some(Duration::from_millis(ms))
}
/// The hyper-util client used in http mode.
pub type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// A request that got no HTTP answer.
#[derive(Debug, Clone)]
pub struct EndpointError(pub String);

impl std::fmt::Display for EndpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EndpointError {}

/// The lab's errors say nothing more than "failed" to the HTTP classifier.
impl tower_lb::http::ClassifyError for EndpointError {}

/// Where an endpoint's requests go.
// It lives behind `Endpoint`'s `Arc`; a hyper-util client with HTTP/2 on
// (features `rustls`, `--all-features`) is just larger than the `Arc`.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Target {
    /// The backend model, called in process.
    Sim(Arc<Backend>),
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
        parts.rec.pick(parts.idx);
        let overhead = parts.overhead;
        match parts.target.clone() {
            Target::Sim(backend) => Box::pin(async move {
                let (answer, hold) = backend.serve(stream_hold(&req)).await;
                // The report as the backend sends it, with its answer; the
                // balancer's classifier reads it.
                let report = backend.load_report(tokio::time::Instant::now());
                if !overhead.is_zero() {
                    tokio::time::sleep(overhead).await;
                }
                let mut out = respond(answer, hold)?;
                if let Some(v) = report.and_then(|r| http::HeaderValue::try_from(r).ok()) {
                    out.headers_mut().insert(tower_lb::orca::HEADER, v);
                }
                Ok(out)
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
/// handle lives).
pub async fn targets(
    sim: bool,
    backends: &[Arc<Backend>],
) -> Result<(Vec<Target>, Option<Servers>), LabError> {
    if sim {
        return Ok((
            backends.iter().map(|b| Target::Sim(b.clone())).collect(),
            None,
        ));
    }
    let servers = server::start(backends).await?;
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build_http::<Empty<Bytes>>();
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

fn respond(answer: Answer, hold: Option<Hold>) -> Result<LabResponse, EndpointError> {
    match answer {
        Answer::Down => Err(EndpointError("connection closed".into())),
        Answer::Status(s) => {
            let mut out = http::Response::new(LabBody::held(hold));
            *out.status_mut() =
                http::StatusCode::from_u16(s).map_err(|e| EndpointError(e.to_string()))?;
            Ok(out)
        }
    }
}
