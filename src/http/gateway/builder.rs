//! [`Builder`]: what a [`Gateway`] does to the requests it forwards.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::uri::Scheme;
use http::{Extensions, HeaderValue, Method};

use super::Gateway;
use crate::balance::{Handle, Membership};
use crate::error::{ConfigError, check_positive};
use crate::pick::Picker;
use crate::pick::key::Connection;
use crate::retry::{MAX_REPLAY_LIMIT, is_idempotent};

/// Default bound on a request body the gateway buffers: 1 MiB, nginx's
/// `client_max_body_size` default.
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;

/// The `Host` header a [`Gateway`] sends upstream.
///
/// The default is [`Keep`](Self::Keep), as Envoy, HAProxy, Traefik and
/// Caddy do: the upstream serves the virtual host the client asked for and
/// builds its links and cookies from it. nginx instead sends the name
/// written in `proxy_pass` (`$proxy_host`), which is [`Set`](Self::Set)
/// here, or the replica's own address with [`Replica`](Self::Replica).
/// Whichever is chosen, the client's `Host` travels in `X-Forwarded-Host`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostPolicy {
    /// The client's `Host` (for HTTP/2 clients, the request's
    /// `:authority`).
    #[default]
    Keep,
    /// The picked replica's authority (`10.0.0.7:8080`), or the service's
    /// name for a [`Replicas`](crate::http::Replicas) pool: the gateway
    /// drops the client's `Host` and the client library derives it from
    /// the URI the balancer rewrote.
    Replica,
    /// This value, for every request: the upstream's own virtual host
    /// (`api.internal`).
    Set(HeaderValue),
}

/// What a [`Gateway`] does with `X-Forwarded-For`, `-Host` and `-Proto`
/// that arrive with a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum XForwarded {
    /// Behind a proxy or load balancer you trust (the default, as nginx's
    /// `$proxy_add_x_forwarded_for` and Envoy do): the peer's address is
    /// appended to `X-Forwarded-For`; `X-Forwarded-Host` and
    /// `X-Forwarded-Proto` are kept when present (the first proxy saw the
    /// client) and set from this hop otherwise. A client that reaches the
    /// gateway directly can write the earlier entries: upstreams read the
    /// last hop they trust, not the first.
    #[default]
    Append,
    /// At the edge, facing clients directly: whatever the client sent is
    /// dropped, and all three describe this hop only (the peer's address,
    /// the client's `Host`, this gateway's scheme).
    Replace,
}

/// Which requests a [`Gateway`] reads whole before sending them upstream,
/// so that a retry can send their bodies again.
///
/// A buffered body is bounded by [`Builder::max_body`]: a longer one is
/// refused with `413 Payload Too Large`. Every other body is streamed as
/// it arrives, unbounded by the gateway, and its request is sent once.
/// Match it to the retry layer's [`Replayable`](crate::retry::Replayable)
/// policy below the gateway.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Buffer {
    /// Idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE): the
    /// requests `Replayable::idempotent()`, the retry layer's default,
    /// retries. The default.
    #[default]
    Idempotent,
    /// Every request, for a retry layer with `Replayable::any_method()`.
    All,
    /// None: for a stack without retries, every body streams.
    Never,
}

impl Buffer {
    /// Whether a request with `method` is buffered.
    pub fn applies(&self, method: &Method) -> bool {
        match self {
            Buffer::Idempotent => is_idempotent(method),
            Buffer::All => true,
            Buffer::Never => false,
        }
    }
}

/// What every clone of one gateway shares.
pub(crate) struct Config {
    pub(crate) host: HostPolicy,
    pub(crate) forwarded: XForwarded,
    /// `X-Forwarded-Proto` for requests whose URI carries no scheme.
    pub(crate) proto: HeaderValue,
    pub(crate) peer: Connection,
    pub(crate) buffer: Buffer,
    pub(crate) max_body: usize,
    pub(crate) wait: Option<(Arc<Membership>, Duration)>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            host: HostPolicy::Keep,
            forwarded: XForwarded::Append,
            proto: HeaderValue::from_static("http"),
            peer: Connection::new(),
            buffer: Buffer::Idempotent,
            max_body: DEFAULT_MAX_BODY,
            wait: None,
        }
    }
}

/// Configures a [`Gateway`]; made by [`Gateway::builder`].
#[must_use]
pub struct Builder<S> {
    upstream: S,
    host: HostPolicy,
    forwarded: XForwarded,
    scheme: Scheme,
    peer: Connection,
    buffer: Buffer,
    max_body: usize,
    wait: Option<(Arc<Membership>, Duration)>,
}

impl<S> std::fmt::Debug for Builder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("host", &self.host)
            .field("forwarded", &self.forwarded)
            .field("buffer", &self.buffer)
            .field("max_body", &self.max_body)
            .finish_non_exhaustive()
    }
}

impl<S> Builder<S> {
    pub(crate) fn new(upstream: S) -> Self {
        Self {
            upstream,
            host: HostPolicy::Keep,
            forwarded: XForwarded::Append,
            scheme: Scheme::HTTP,
            peer: Connection::new(),
            buffer: Buffer::Idempotent,
            max_body: DEFAULT_MAX_BODY,
            wait: None,
        }
    }

    /// The `Host` header sent upstream (default [`HostPolicy::Keep`]).
    pub fn host(mut self, host: HostPolicy) -> Self {
        self.host = host;
        self
    }

    /// What happens to the `X-Forwarded-*` headers a request arrives with
    /// (default [`XForwarded::Append`]).
    pub fn x_forwarded(mut self, forwarded: XForwarded) -> Self {
        self.forwarded = forwarded;
        self
    }

    /// The scheme clients reach the gateway by, sent as
    /// `X-Forwarded-Proto` for requests whose URI has none (every HTTP/1
    /// request): `Scheme::HTTPS` behind TLS. Default `http`.
    pub fn scheme(mut self, scheme: Scheme) -> Self {
        self.scheme = scheme;
        self
    }

    /// Where the client's address is found, for `X-Forwarded-For`: by
    /// default this crate's [`ConnectionAddrs`](crate::http::ConnectionAddrs),
    /// [`ConnectInfo<SocketAddr>`](crate::http::ConnectInfo) or a bare
    /// `SocketAddr` in the request's extensions; for axum, its own
    /// `ConnectInfo` (served with
    /// `into_make_service_with_connect_info::<SocketAddr>()`):
    ///
    /// ```
    /// use std::net::SocketAddr;
    /// use axum::extract::ConnectInfo;
    /// # let upstream = tower::service_fn(|_: http::Request<tower_lb::http::gateway::Body>| async {
    /// #     Ok::<_, std::io::Error>(http::Response::new(String::new()))
    /// # });
    /// let gateway = tower_lb::http::Gateway::builder(upstream)
    ///     .peer_from(|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0))
    ///     .build();
    /// # let _ = gateway;
    /// ```
    ///
    /// A request whose peer is not found gets no `X-Forwarded-For` entry.
    pub fn peer_from(mut self, read: fn(&Extensions) -> Option<SocketAddr>) -> Self {
        self.peer = Connection::peer_from(read);
        self
    }

    /// Which requests are read whole before they are sent, so a retry can
    /// replay them (default [`Buffer::Idempotent`]).
    pub fn buffer(mut self, buffer: Buffer) -> Self {
        self.buffer = buffer;
        self
    }

    /// The longest body the gateway buffers, in bytes (default
    /// [`DEFAULT_MAX_BODY`]; at most the retry layer's
    /// [`MAX_REPLAY_LIMIT`], 64 MiB; 0 buffers only empty bodies). A longer
    /// one is answered `413` without reaching the upstream: at once when
    /// its `Content-Length` says so, else once the bound is passed.
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Makes a request that arrives while `pool`'s balancer has no
    /// endpoint wait up to `timeout` for one (for a pool that discovery
    /// fills), instead of failing at once; a request still without one is
    /// answered `503`. Without it, requests to an empty pool are answered
    /// `503` at once. See [`Handle::wait_for_endpoints`].
    pub fn wait_for_endpoints<K, S2, P: Picker, C>(
        mut self,
        pool: &Handle<K, S2, P, C>,
        timeout: Duration,
    ) -> Self {
        self.wait = Some((pool.membership(), timeout));
        self
    }

    /// The gateway.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] on `gateway.max_body` above [`MAX_REPLAY_LIMIT`],
    /// and on `gateway.wait_for_endpoints` for a timeout of zero or more
    /// than one year.
    pub fn build(self) -> Result<Gateway<S>, ConfigError> {
        if self.max_body > MAX_REPLAY_LIMIT {
            return Err(ConfigError::new(
                "gateway.max_body",
                self.max_body,
                "at most 64 MiB (retry::MAX_REPLAY_LIMIT)",
            ));
        }
        if let Some((_, timeout)) = &self.wait {
            check_positive("gateway.wait_for_endpoints", *timeout)?;
        }
        let proto = HeaderValue::from_str(self.scheme.as_str()).map_err(|_| {
            ConfigError::new("gateway.scheme", self.scheme.as_str(), "a header value")
        })?;
        let config = Config {
            host: self.host,
            forwarded: self.forwarded,
            proto,
            peer: self.peer,
            buffer: self.buffer,
            max_body: self.max_body,
            wait: self.wait,
        };
        Ok(Gateway {
            inner: self.upstream,
            config: Arc::new(config),
        })
    }
}
