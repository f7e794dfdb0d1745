//! An HTTP gateway over a balanced upstream (feature `http`): the tower
//! `Service` an axum `Router` mounts (`nest_service`, `route_service`,
//! `fallback_service`) or a hyper server serves, in front of
//! [`http::balance`](crate::http::balance) and the retry layer.
//!
//! [`Gateway`] does what a reverse proxy does to each request and answer:
//!
//! * **Hop-by-hop fields** are removed in both directions (RFC 9110
//!   §7.6.1): every field named in `Connection`, then `Connection`,
//!   `Proxy-Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`,
//!   `Upgrade` and the proxy credentials (`Proxy-Authorization`,
//!   `Proxy-Authenticate`). `TE: trailers` is sent on (gRPC needs it) and
//!   `Trailer` is kept (end-to-end since RFC 9110), so trailers pass over
//!   HTTP/1 as over HTTP/2. Upgrades (WebSocket) are not proxied.
//! * **`Host`**: the client's by default ([`HostPolicy::Keep`]), or the
//!   picked replica's, or a fixed name.
//! * **`X-Forwarded-For`** gets the peer's address appended (found as
//!   [`Builder::peer_from`] says), **`X-Forwarded-Host`** the client's
//!   `Host`, **`X-Forwarded-Proto`** the scheme; [`XForwarded`] says
//!   whether to trust what the client sent.
//! * **Bodies**: a request a retry may send again ([`Buffer`]: idempotent
//!   methods by default, as the retry layer) is read whole first, up to
//!   [`Builder::max_body`] (1 MiB; `413` past it), so a retry can replay
//!   it; every other body streams through as it arrives.
//! * **Errors** become answers: `503` when no endpoint can take the
//!   request (an empty pool, open breakers, every endpoint at its cap),
//!   `504` when time ran out, `502` when the upstream failed (see
//!   [`ErrorStatus`]). The answer carries a [`GatewayError`].
//! * **An empty pool can be waited for**: with
//!   [`Builder::wait_for_endpoints`], a request that arrives before
//!   discovery's first answer waits for it, for a bounded time.
//!
//! Paths are forwarded as the service receives them: mounted with
//! axum's `nest_service("/api", ..)`, `/api/users` goes upstream as
//! `/users`; with `route_service("/api/{*rest}", ..)` it keeps its prefix.
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use axum::{Router, extract::ConnectInfo};
//! use hyper_util::{client::legacy::Client, rt::TokioExecutor};
//! use tower::Layer;
//! use tower_lb::discover::{self, Source, dns::Dns};
//! use tower_lb::http::{self, Gateway, gateway};
//! use tower_lb::retry::RetryLayer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let client = Client::builder(TokioExecutor::new()).build_http::<gateway::Body>();
//! let lb = http::balance(client.clone(), Vec::<String>::new())?.build()?;
//! let _dns = Dns::builder("users.internal", 8080)
//!     .build()?
//!     .spawn(lb.handle(), discover::http_endpoints(client, "http")?);
//! let gateway = Gateway::builder(RetryLayer::builder().build()?.layer(lb.clone()))
//!     .wait_for_endpoints(&lb.handle(), Duration::from_secs(5))
//!     .peer_from(|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0))
//!     .build()?;
//! let app = Router::new().nest_service("/api", gateway);
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! ```

mod body;
mod builder;
mod error;
mod future;
mod headers;

use std::convert::Infallible;
use std::fmt::Display;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

pub use body::{Body, BoxError, Kept, ResponseBody};
pub use builder::{Buffer, Builder, DEFAULT_MAX_BODY, HostPolicy, XForwarded};
pub use error::{ErrorStatus, GatewayError};
pub use future::ResponseFuture;

use builder::Config;
use headers::rewrite_request;

/// A reverse proxy in front of an upstream stack `S` (a
/// [`Balance`](crate::Balance) from [`http::balance`](crate::http::balance),
/// usually under a [`RetryLayer`](crate::retry::RetryLayer)); see the
/// [module docs](self).
///
/// A `Service<http::Request<B>>` for any body `B` (axum's, hyper's
/// `Incoming`), always ready, that never fails: its errors are answers.
/// The upstream receives `http::Request<`[`Body`]`>`s.
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Full};
/// use tower::{ServiceExt, service_fn};
/// use tower_lb::http::{Gateway, gateway};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let upstream = service_fn(|req: http::Request<gateway::Body>| async move {
///     let seen = format!("{:?} {:?}", req.headers().get("x-forwarded-proto"), req.headers().get("x-private"));
///     Ok::<_, std::io::Error>(http::Response::new(Full::new(Bytes::from(seen))))
/// });
/// let req = http::Request::get("/users/7")
///     .header("connection", "x-private")
///     .header("x-private", "for the gateway only")
///     .body(Full::new(Bytes::new()))?;
/// let res = Gateway::new(upstream).oneshot(req).await?;
/// let body = res.into_body().collect().await?.to_bytes();
/// assert_eq!(body, r#"Some("http") None"#);
/// # Ok(()) }
/// ```
pub struct Gateway<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Gateway<S> {
    /// A gateway over `upstream` with every default: `Host` kept,
    /// `X-Forwarded-*` appended, idempotent requests buffered up to 1 MiB,
    /// no wait for endpoints.
    pub fn new(upstream: S) -> Self {
        Self {
            inner: upstream,
            config: Arc::new(Config::default()),
        }
    }

    /// A builder over `upstream`.
    pub fn builder(upstream: S) -> Builder<S> {
        Builder::new(upstream)
    }

    /// The upstream stack.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone> Clone for Gateway<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: Arc::clone(&self.config),
        }
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for Gateway<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("upstream", &self.inner)
            .field("host", &self.config.host)
            .field("buffer", &self.config.buffer)
            .finish_non_exhaustive()
    }
}

impl<S, B, RB> Service<Request<B>> for Gateway<S>
where
    S: Service<Request<Body>, Response = Response<RB>> + Clone + Send + 'static,
    S::Error: ErrorStatus + Display,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<ResponseBody<RB>>;
    type Error = Infallible;
    type Future = ResponseFuture<S>;

    /// Always ready: the upstream's readiness is awaited per request.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    /// Rewrites the head at once; a request that must wait for endpoints or
    /// have its body read goes through one boxed step first.
    fn call(&mut self, req: Request<B>) -> ResponseFuture<S> {
        let (mut parts, body) = req.into_parts();
        let config = &self.config;
        rewrite_request(&mut parts, config);
        let upstream = self.inner.clone();
        let wait = config.wait.as_ref().filter(|(pool, _)| pool.len() == 0);
        let buffer = config.buffer.applies(&parts.method);
        match (wait, buffer) {
            (None, false) => {
                ResponseFuture::call(upstream, Request::from_parts(parts, Body::stream(body)))
            }
            (None, true) if body.is_end_stream() => {
                ResponseFuture::call(upstream, Request::from_parts(parts, Body::empty()))
            }
            _ => {
                let wait = wait.map(|(pool, timeout)| (Arc::clone(pool), *timeout));
                let max_body = config.max_body;
                ResponseFuture::prepare(
                    upstream,
                    Box::pin(async move {
                        if let Some((pool, timeout)) = wait {
                            pool.wait(timeout)
                                .await
                                .map_err(GatewayError::NoEndpoints)?;
                        }
                        let body = if buffer {
                            body::read_whole(body, max_body).await?
                        } else {
                            Body::stream(body)
                        };
                        Ok(Request::from_parts(parts, body))
                    }),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests;
