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
use tower::Service;

use super::backend::{Answer, Backend};
use super::load::{Sink, feed};
use super::record::Recorder;

/// What a virtual user sends.
pub type LabRequest = http::Request<Empty<Bytes>>;
/// What it gets back (the body is read and dropped).
pub type LabResponse = http::Response<()>;
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
    /// Where the backend's load reports go (this endpoint's balancer).
    pub reports: Arc<Sink>,
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
        let sink = parts.reports.clone();
        match parts.target.clone() {
            Target::Sim(backend) => Box::pin(async move {
                let answer = backend.serve().await;
                let report = backend.load_report(tokio::time::Instant::now());
                if !overhead.is_zero() {
                    tokio::time::sleep(overhead).await;
                }
                let mut out = respond(answer)?;
                if let Some(v) = report.and_then(|r| http::HeaderValue::try_from(r).ok()) {
                    out.headers_mut().insert(tower_lb::orca::HEADER, v);
                }
                feed(&sink, out.headers());
                Ok(out)
            }),
            Target::Http { client, authority } => Box::pin(async move {
                let mut parts = req.uri().clone().into_parts();
                parts.scheme = Some(Scheme::HTTP);
                parts.authority = Some(authority);
                *req.uri_mut() =
                    Uri::from_parts(parts).map_err(|e| EndpointError(e.to_string()))?;
                let res = client
                    .request(req)
                    .await
                    .map_err(|e| EndpointError(format!("request failed: {e}")))?;
                let status = res.status();
                let report = res.headers().get(tower_lb::orca::HEADER).cloned();
                res.into_body()
                    .collect()
                    .await
                    .map_err(|e| EndpointError(format!("body failed: {e}")))?;
                if !overhead.is_zero() {
                    tokio::time::sleep(overhead).await;
                }
                let mut out = http::Response::new(());
                *out.status_mut() = status;
                if let Some(v) = report {
                    out.headers_mut().insert(tower_lb::orca::HEADER, v);
                }
                feed(&sink, out.headers());
                Ok(out)
            }),
        }
    }
}

fn respond(answer: Answer) -> Result<LabResponse, EndpointError> {
    match answer {
        Answer::Down => Err(EndpointError("connection closed".into())),
        Answer::Status(s) => {
            let mut out = http::Response::new(());
            *out.status_mut() =
                http::StatusCode::from_u16(s).map_err(|e| EndpointError(e.to_string()))?;
            Ok(out)
        }
    }
}
