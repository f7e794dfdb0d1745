//! [`HttpCheck`]: an active health check over HTTP.

use std::marker::PhantomData;
use std::ops::RangeInclusive;

use http::uri::PathAndQuery;
use http::{Method, Request, Response};
use tower::ServiceExt;
use tower_service::Service;

use crate::check::{Check, CheckFuture};
use crate::error::ConfigError;

/// Probes an endpoint with `GET path` through the endpoint's own service
/// (for [`http::balance`](super::balance) endpoints, a [`SetOrigin`](super::SetOrigin)
/// that sends it to that endpoint's origin) and passes when the status is
/// in the expected range (default 2xx). The response body is not read.
///
/// `B` is the request body type of the endpoint's client; it is inferred,
/// and must be `Default` (an empty body).
///
/// ```no_run
/// use std::time::Duration;
/// use http_body_util::Empty;
/// use hyper_util::client::legacy::Client;
/// use hyper_util::rt::TokioExecutor;
/// use tower_lb::{check::{self, HealthCheck}, http};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
/// let lb = http::balance(client, ["http://10.0.0.1:8080", "http://10.0.0.2:8080"])?.build()?;
/// let checks = check::spawn(&lb, HealthCheck::default(), http::HttpCheck::get("/healthz")?)?;
/// # checks.detach(); Ok(()) }
/// ```
pub struct HttpCheck<B> {
    path: PathAndQuery,
    expect: RangeInclusive<u16>,
    body: PhantomData<fn() -> B>,
}

impl<B> Clone for HttpCheck<B> {
    fn clone(&self) -> Self {
        Self {
            path: self.path.clone(),
            expect: self.expect.clone(),
            body: PhantomData,
        }
    }
}

impl<B> std::fmt::Debug for HttpCheck<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpCheck")
            .field("path", &self.path)
            .field("expect", &self.expect)
            .finish()
    }
}

impl<B> HttpCheck<B> {
    /// Probes with `GET path` (a path and optional query, such as
    /// `/healthz` or `/ready?full=1`), expecting a 2xx answer.
    ///
    /// # Errors
    /// A [`ConfigError`] on `health_check.path` unless `path` starts with
    /// `/` and parses as a URI path.
    pub fn get(path: &str) -> Result<Self, ConfigError> {
        let parsed = path
            .starts_with('/')
            .then(|| path.parse::<PathAndQuery>().ok())
            .flatten()
            .ok_or_else(|| {
                ConfigError::new("health_check.path", path, "a URI path starting with `/`")
            })?;
        Ok(Self {
            path: parsed,
            expect: 200..=299,
            body: PhantomData,
        })
    }

    /// The statuses that pass (default `200..=299`).
    ///
    /// # Errors
    /// A [`ConfigError`] on `health_check.expect` unless the range is
    /// non-empty and within `100..=599`.
    pub fn expect(mut self, statuses: RangeInclusive<u16>) -> Result<Self, ConfigError> {
        if statuses.is_empty() || *statuses.start() < 100 || *statuses.end() > 599 {
            return Err(ConfigError::new(
                "health_check.expect",
                statuses,
                "a non-empty range of statuses within 100..=599",
            ));
        }
        self.expect = statuses;
        Ok(self)
    }
}

impl<K, S, B, RB> Check<K, S> for HttpCheck<B>
where
    S: Service<Request<B>, Response = Response<RB>> + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Display,
    B: Default + Send + 'static,
    RB: Send + 'static,
{
    fn run(&self, _key: &K, service: S) -> CheckFuture {
        let mut req = Request::new(B::default());
        *req.method_mut() = Method::GET;
        *req.uri_mut() = self.path.clone().into();
        let expect = self.expect.clone();
        Box::pin(async move {
            let res = service.oneshot(req).await.map_err(|e| e.to_string())?;
            let status = res.status().as_u16();
            if expect.contains(&status) {
                Ok(())
            } else {
                Err(format!("status {status}"))
            }
        })
    }
}

/// The old name of [`HttpCheck`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `http::HttpCheck`, apart from the probing picker's `http::LoadProbe`"
)]
pub type HttpProbe<B> = HttpCheck<B>;
