//! [`LoadProbe`]: asks an HTTP or gRPC endpoint for its load, for the
//! [`Prequal`](crate::pick::Prequal) picker's probes.

use std::marker::PhantomData;

use http::uri::PathAndQuery;
use http::{HeaderValue, Method, Request, Response};
use tower::ServiceExt;
use tower_service::Service;

use crate::error::ConfigError;
use crate::orca::LoadReport;
use crate::probe::{Prober, ProberFuture};
use crate::server::{GRPC_PROBE_PATH, PROBE_HEADER};

/// Probes an endpoint for its load through the endpoint's own service: a
/// request marked as a probe, which [`server::ServerLoad`](crate::server::ServerLoad)
/// answers at once with its report (the body is not read).
///
/// * [`LoadProbe::http`]: `GET /` with the [`PROBE_HEADER`] (or
///   [`at`](Self::at) another path);
/// * [`LoadProbe::grpc`]: a unary call to [`GRPC_PROBE_PATH`], answered
///   trailers-only, its report in the head.
///
/// `B` is the request body type of the endpoint's client, inferred; it
/// must be `Default` (an empty body: `http_body_util::Empty`,
/// `tonic::body::Body`, ...).
///
/// ```no_run
/// use http_body_util::Empty;
/// use hyper_util::client::legacy::Client;
/// use hyper_util::rt::TokioExecutor;
/// use tower_lb::{http, pick::Prequal, probe};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
/// let lb = http::balance(client, ["http://10.0.0.1:8080", "http://10.0.0.2:8080"])?
///     .picker(Prequal::new())
///     .build()?;
/// let probes = probe::spawn(&lb, http::LoadProbe::http())?;
/// # probes.detach(); Ok(()) }
/// ```
pub struct LoadProbe<B> {
    path: PathAndQuery,
    grpc: bool,
    body: PhantomData<fn() -> B>,
}

impl<B> Clone for LoadProbe<B> {
    fn clone(&self) -> Self {
        Self {
            path: self.path.clone(),
            grpc: self.grpc,
            body: PhantomData,
        }
    }
}

impl<B> std::fmt::Debug for LoadProbe<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadProbe")
            .field("path", &self.path)
            .field("grpc", &self.grpc)
            .finish()
    }
}

impl<B> LoadProbe<B> {
    /// `GET /` with the [`PROBE_HEADER`].
    pub fn http() -> Self {
        Self {
            path: PathAndQuery::from_static("/"),
            grpc: false,
            body: PhantomData,
        }
    }

    /// A gRPC unary call to [`GRPC_PROBE_PATH`].
    pub fn grpc() -> Self {
        Self {
            path: PathAndQuery::from_static(GRPC_PROBE_PATH),
            grpc: true,
            body: PhantomData,
        }
    }

    /// Sends the HTTP probe to `path` (a path and optional query) instead
    /// of `/`, still with the [`PROBE_HEADER`].
    ///
    /// # Errors
    /// A [`ConfigError`] on `probe.path` unless `path` starts with `/` and
    /// parses as a URI path.
    pub fn at(mut self, path: &str) -> Result<Self, ConfigError> {
        self.path = path
            .starts_with('/')
            .then(|| path.parse::<PathAndQuery>().ok())
            .flatten()
            .ok_or_else(|| ConfigError::new("probe.path", path, "a URI path starting with `/`"))?;
        Ok(self)
    }

    fn request(&self) -> Request<B>
    where
        B: Default,
    {
        let mut req = Request::new(B::default());
        *req.uri_mut() = self.path.clone().into();
        if self.grpc {
            *req.method_mut() = Method::POST;
        }
        let h = req.headers_mut();
        h.insert(PROBE_HEADER, HeaderValue::from_static("1"));
        if self.grpc {
            h.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/grpc"),
            );
            h.insert(http::header::TE, HeaderValue::from_static("trailers"));
        }
        req
    }
}

impl<K, S, B, RB> Prober<K, S> for LoadProbe<B>
where
    S: Service<Request<B>, Response = Response<RB>> + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Display,
    B: Default + Send + 'static,
    RB: Send + 'static,
{
    fn probe(&self, _key: &K, service: S) -> ProberFuture {
        let req = self.request();
        Box::pin(async move {
            let res = service.oneshot(req).await.map_err(|e| e.to_string())?;
            match LoadReport::from_headers(res.headers()) {
                Some(Ok(r)) => Ok(r),
                Some(Err(e)) => Err(format!("a bad load report: {e}")),
                None => Err(format!("no load report (status {})", res.status())),
            }
        })
    }
}
