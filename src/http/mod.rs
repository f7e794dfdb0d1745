//! HTTP load balancing (feature `http`, off by default): balance a
//! hyper-util or reqwest client over a list of origins.
//!
//! [`balance`] takes a base client and the endpoints' origins
//! (`"http://10.0.0.1:8080"`) and returns a [`Builder`] on which you can
//! still choose a picker, caps and decay. Each endpoint is a
//! [`SetOrigin`] around a clone of the client: it replaces the request's
//! scheme and authority with its endpoint's and keeps the method, path,
//! query, headers and body. Send requests with any authority (a logical name
//! like `http://my-service/...`) or only a path (`/users?id=7`).
//!
//! * **Host.** By default ([`HostHeader::Keep`]) a `Host` header you set is
//!   sent unchanged, and without one the client derives it from the
//!   rewritten URI: the endpoint's authority. [`HostHeader::Endpoint`]
//!   always sends the endpoint's; [`HostHeader::Original`] sends the
//!   authority the request was made with.
//! * **Failures.** [`Classifier`] counts 5xx and 429 answers as failures of
//!   the endpoint (502/503/504 as gateway failures, with `Retry-After`), and
//!   connect errors from hyper-util or reqwest as `Connect` failures; 4xx
//!   are the caller's and count as successes.
//! * **Keys.** [`client_ip`] reads the client's address from
//!   `X-Forwarded-For` or the connection, for hash pickers.
//! * **Gateways.** [`Gateway`] forwards what an axum or hyper server
//!   receives to such a balancer, as a reverse proxy does (hop-by-hop
//!   headers, `Host`, `X-Forwarded-*`, bodies, error statuses): see
//!   [`gateway`].
//! * **Discovery.** [`crate::discover`] keeps the endpoint set in step with
//!   DNS (feature `dns`), Kubernetes (the `tower-lb-kube` crate) or an xDS control plane (`xds`).
//! * **Named services on addressed replicas.** [`Replicas`] keeps the
//!   service's name (`https://api.internal`) and the replicas' addresses
//!   apart: each replica gets its own client (its own connection pool) that
//!   dials its address, while the URI, `Host`, `:authority` and the TLS
//!   server name stay the service's. With feature `rustls`, [`tls`] makes
//!   those clients for hyper-util ([`https`]) and reqwest.
//!
//! ```no_run
//! use http_body_util::Empty;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower::{Service, ServiceExt};
//! use tower_lb::{http, pick};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
//! let mut lb = http::balance(client, ["http://10.0.0.1:8080", "http://10.0.0.2:8080"])?
//!     .picker(pick::LeastInFlight::new())
//!     .build()?;
//! let req = ::http::Request::get("/users?id=7").body(Empty::new())?;
//! let res = lb.ready().await?.call(req).await?;
//! println!("{}", res.status());
//! # Ok(()) }
//! ```
//!
//! hyper-util's `legacy::Client` and `reqwest::Client` (feature `reqwest`)
//! are `Service`s already and need no adapter; any
//! `Service<http::Request<B>> + Clone` works the same way.
//!
//! | feature | adds | dependencies |
//! |---|---|---|
//! | `http` | this module; hyper-util error classification | http, hyper-util (client-legacy, http1), httpdate (for `Retry-After` dates) |
//! | `reqwest` | `SetOrigin` and `Classifier` for `reqwest::Request`/`Response` | reqwest 0.13 without default features (no TLS: enable reqwest's own TLS feature in your crate for `https`) |
//! | `reqwest-middleware` | [`middleware`]: a `reqwest_middleware::Middleware` that balances a `ClientWithMiddleware` | reqwest-middleware 0.5 without default features, async-trait |
//! | `dns` | [`crate::discover::dns`]: endpoints from periodic resolution | tokio `net` |
//! | `rustls` | [`tls`]: HTTPS replicas verified for the service's name | rustls 0.23 (*ring*), hyper-rustls 0.27, http-body, hyper-util `http2`; with `reqwest`, reqwest's `rustls` (which brings aws-lc-rs) and `http2`; with `grpc`, tonic's `tls-ring` |
//! | `grpc` | `grpc::tls`: tonic channels per replica (with `rustls`) | tonic 0.14 (`channel`) |

mod body;
mod check;
mod classify;
pub mod gateway;
mod hyper;
mod load_probe;
#[cfg(feature = "reqwest-middleware")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-middleware")))]
pub mod middleware;
mod named;
mod origin;
#[cfg(feature = "reqwest")]
mod reqwest;
mod set_origin;
#[cfg(feature = "rustls")]
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub mod tls;

use std::collections::HashSet;

pub use body::{EndOfStream, KeepHead, Track, TrackBody};
pub use classify::{Classifier, ClassifyError, ClientErrors, ErrorHook, parse_retry_after};
#[cfg(feature = "grpc")]
pub(crate) use classify::{Common, common_setters};
// The HTTP request keys live with the other keys (`pick::key`); they are
// named here too, with the rest of the HTTP integration.
pub use crate::pick::key::{
    ClientIp, ConnectInfo, Connection, ConnectionAddrs, ForwardedFor, Header, Hop, Path, client_ip,
    first_hop, hash_connection,
};
#[allow(deprecated)]
pub use check::{HttpCheck, HttpProbe};
pub use gateway::Gateway;
pub use load_probe::LoadProbe;
#[cfg(all(feature = "grpc", feature = "rustls"))]
pub(crate) use named::server_name;
pub use named::{
    DialAddr, MakeClient, Replica, ReplicaError, ReplicaFuture, Replicas, ReplicasBuilder, Target,
};
pub use origin::Origin;
pub use set_origin::{HostHeader, OriginRequest, SetOrigin};
#[cfg(feature = "rustls")]
pub use tls::https;

use crate::balance::{BalanceLayer, Builder, FromKeys, MakeEndpoint};
use crate::error::ConfigError;
use crate::pick::PeakEwma;

/// A balancer builder over `client`, one endpoint per origin in
/// `authorities`, with the HTTP [`Classifier`] and the default picker.
///
/// Each endpoint is keyed by its [`Origin`] and served by
/// `SetOrigin::new(client.clone(), origin)` ([`HostHeader::Keep`]). Set a
/// picker, caps or slow start on the builder, then `build()`. An empty
/// list is allowed (requests fail with `Error::NoEndpoints` until endpoints
/// are inserted through the balancer's `Handle`).
///
/// # Errors
///
/// A [`ConfigError`] naming `authority` for the first entry that is not a
/// valid origin (see [`Origin::parse`]) or repeats an earlier one.
///
/// ```
/// use tower_lb::{http, pick};
///
/// # fn main() -> Result<(), tower_lb::ConfigError> {
/// let client = tower::service_fn(|_: ::http::Request<()>| async {
///     Ok::<_, std::io::Error>(::http::Response::new(()))
/// });
/// let lb = http::balance(client, ["http://10.0.0.1:8080", "http://10.0.0.2:8080"])?
///     .picker(pick::RoundRobin::new())
///     .build()?;
/// assert_eq!(lb.handle().len(), 2);
///
/// let bad = http::balance(client, ["http://ok:1", "tcp://nope:2"]);
/// assert_eq!(bad.err().map(|e| e.field()), Some("authority"));
/// # Ok(()) }
/// ```
pub fn balance<S, I>(
    client: S,
    authorities: I,
) -> Result<Builder<Origin, SetOrigin<S>, PeakEwma, Classifier>, ConfigError>
where
    S: Clone,
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut builder = crate::balance::Balance::builder()
        .classify(Classifier::default())
        .labels(Origin::to_string);
    for origin in origins(authorities)? {
        builder = builder.endpoint(origin.clone(), SetOrigin::new(client.clone(), origin));
    }
    Ok(builder)
}

/// Parses `authorities` into origins, each listed once.
///
/// # Errors
///
/// A [`ConfigError`] naming `authority` for the first entry that is not a
/// valid origin (see [`Origin::parse`]) or repeats an earlier one.
pub fn origins<I>(authorities: I) -> Result<Vec<Origin>, ConfigError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for text in authorities {
        let text = text.as_ref();
        let origin = Origin::parse(text)?;
        if !seen.insert(origin.clone()) {
            return Err(ConfigError::new(
                "authority",
                text,
                "listed once (after lower-casing scheme and host)",
            ));
        }
        out.push(origin);
    }
    Ok(out)
}

/// A [`BalanceLayer`] for HTTP: over a base client `S`, one endpoint per
/// origin in `authorities`, each `SetOrigin::new(client.clone(), origin)`,
/// with the HTTP [`Classifier`] and the default picker. For other settings
/// start from [`layer_builder`].
///
/// # Errors
///
/// As [`origins`].
///
/// ```
/// use tower::{ServiceBuilder, ServiceExt};
/// use tower_lb::http;
///
/// # fn main() -> Result<(), tower_lb::ConfigError> {
/// let client = tower::service_fn(|_: ::http::Request<()>| async {
///     Ok::<_, std::io::Error>(::http::Response::new(()))
/// });
/// let lb = ServiceBuilder::new()
///     .layer(http::layer(["http://10.0.0.1:8080", "http://10.0.0.2:8080"])?)
///     .service(client);
/// assert_eq!(lb.handle().len(), 2);
/// # Ok(()) }
/// ```
pub fn layer<I>(
    authorities: I,
) -> Result<BalanceLayer<Origin, ToOrigin, PeakEwma, Classifier>, ConfigError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    layer_builder().layer(origins(authorities)?, ToOrigin)
}

/// A layer builder with the HTTP [`Classifier`] and origin labels: set a
/// picker, breakers, ... then `.layer(http::origins(list)?, http::ToOrigin)`.
pub fn layer_builder() -> Builder<Origin, FromKeys, PeakEwma, Classifier> {
    crate::balance::Balance::layer_builder()
        .classify(Classifier::default())
        .labels(Origin::to_string)
}

/// Points a layer's base client at an origin: `SetOrigin::new(client.clone(), origin)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToOrigin;

impl<S: Clone> MakeEndpoint<Origin, S> for ToOrigin {
    type Service = SetOrigin<S>;

    fn make(&self, origin: &Origin, client: &S) -> SetOrigin<S> {
        SetOrigin::new(client.clone(), origin.clone())
    }
}
