//! gRPC over tonic (feature `grpc`): balance tonic channels, one per
//! replica, with gRPC's own view of success and failure.
//!
//! `Balance<_, tonic::transport::Channel>` is a tonic transport as it is
//! (`MyClient::new(lb)`); this module adds what gRPC traffic needs:
//!
//! * [`Classifier`]: `grpc-status` from the headers (trailers-only answers)
//!   and from the trailers, so `UNAVAILABLE` counts against its endpoint
//!   for breakers, ejection and the latency model, a stream that fails
//!   midway too; each stream holds its endpoint's in-flight slot until it
//!   ends, so load-aware pickers see open streams. Retry advice per gRPC
//!   A6 (retryable codes, `grpc-retry-pushback-ms`).
//! * [`balance`]: a builder over channels made from `http://host:port`
//!   origins (tonic's `Endpoint`, connected lazily), with that classifier;
//!   [`balance_with`] and [`Channels`]: the same with every replica's
//!   channel made from your own `Endpoint` (timeouts, keep-alive, TLS,
//!   limits, user agent), for static lists and for discovery.
//! * [`GrpcHealthCheck`]: active health checks over `grpc.health.v1`
//!   (`Check` or `Watch`, per service name), for [`check::spawn`](crate::check::spawn).
//! * [`StatusLayer`]: the stack's errors as `tonic::Status` ([`IntoStatus`]):
//!   an empty pool is `UNAVAILABLE`, a deadline `DEADLINE_EXCEEDED`.
//! * With `rustls`, [`tls`]: channels per replica address that verify the
//!   service's name.
//!
//! The retry layer above the balancer uses the balancer's classifier (its
//! default), replays request bodies from a buffer (up to 256 KiB, A6's
//! default) and takes `grpc-timeout` as the call's deadline, sending every
//! retry and hedge the time the call has left in it (A6); see
//! [`retry`](crate::retry). `examples/tonic_client.rs` shows the whole
//! stack against local servers, with no `protoc`; `examples/grpc_health.rs`
//! a generated client with a template and health checks. The guide
//! (`docs/guide.md`, "gRPC") maps tonic's `Channel::balance_list` and
//! `balance_channel` to this module.
//!
//! ```no_run
//! use std::time::Duration;
//! use helloworld::{HelloRequest, greeter_client::GreeterClient}; // your generated code
//! use tonic::transport::Endpoint;
//! use tower::ServiceBuilder;
//! use tower_lb::{grpc, retry::RetryLayer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let template = Endpoint::from_static("http://greeter").timeout(Duration::from_secs(5));
//! let lb = grpc::balance_with(template, ["http://10.0.0.1:50051", "http://10.0.0.2:50051"])?
//!     .build()?;
//! let channel = ServiceBuilder::new()
//!     .layer(grpc::StatusLayer)
//!     .layer(RetryLayer::builder().build()?)
//!     .service(lb);
//! let mut client = GreeterClient::new(channel);
//! let reply = client.say_hello(HelloRequest { name: "tower-lb".into() }).await?;
//! # let _ = reply;
//! # Ok(()) }
//! ```
//!
//! A function that builds the balancer with a picker of the caller's
//! choosing needs the picker to pick tonic's requests, not only to be a
//! picker: `P: Pick<http::Request<tonic::body::Body>>` (which implies
//! `Picker`), and `Clone` when the builder is used as a layer.
//!
//! ```no_run
//! use tonic::transport::Channel;
//! use tower_lb::http::Origin;
//! use tower_lb::pick::{Pick, Prequal};
//! use tower_lb::{Balance, grpc};
//!
//! fn channel<P>(picker: P) -> Result<Balance<Origin, Channel, P, grpc::Classifier>, tower_lb::ConfigError>
//! where
//!     P: Pick<http::Request<tonic::body::Body>>,
//! {
//!     grpc::balance(["http://10.0.0.1:50051", "http://10.0.0.2:50051"])?
//!         .picker(picker)
//!         .build()
//! }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let lb = channel(Prequal::new())?;
//! # let _ = lb; Ok(()) }
//! ```

mod channels;
mod classify;
mod health;
mod status;
#[cfg(feature = "rustls")]
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub mod tls;

pub use channels::Channels;
pub use classify::{Classifier, PUSHBACK_HEADER, Trailers};
#[allow(deprecated)]
pub use health::{GrpcHealthCheck, GrpcHealthProbe};
pub use status::{IntoStatus, StatusFuture, StatusLayer, ToStatus};

use tonic::transport::{Channel, Endpoint};

use crate::balance::Balance;
use crate::balance::Builder;
use crate::error::ConfigError;
use crate::error::current_runtime;
use crate::http::Origin;
use crate::pick::PeakEwma;

/// A [`Builder`] over one lazily connected tonic [`Channel`] per origin in
/// `origins` (`http://host:port`; `https` needs a TLS config, see
/// [`balance_with`] and [`tls`]), labelled by origin, with the gRPC
/// [`Classifier`]. Set a picker, breakers, ... then `build()`.
///
/// Each channel is `Endpoint::from_shared(origin).connect_lazy()`, with
/// tonic's defaults and the replica's own authority. For timeouts,
/// keep-alive, TLS, limits or a user agent, pass an `Endpoint` as the
/// template: [`balance_with`].
///
/// Call it inside a tokio runtime: each channel spawns its connection
/// worker there.
///
/// # Errors
///
/// A [`ConfigError`] on `origins` for an origin that does not parse or
/// repeats an earlier one, or on `runtime` outside a tokio runtime.
pub fn balance<I>(origins: I) -> Result<Builder<Origin, Channel, PeakEwma, Classifier>, ConfigError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    current_runtime(
        "runtime",
        "a call inside a tokio runtime (tonic channels spawn their worker)",
    )?;
    let mut b = Balance::builder()
        .classify(Classifier::new())
        .labels(Origin::to_string);
    // `http::origins` names its field `authority`, after `http::balance`'s
    // parameter; here the parameter, and the documented field, is `origins`.
    let origins = crate::http::origins(origins).map_err(|e| e.on_field("origins"))?;
    for origin in origins {
        let endpoint = Endpoint::from_shared(origin.to_string()).map_err(|_| {
            ConfigError::new(
                "origins",
                origin.to_string(),
                "an http:// or https:// origin tonic accepts",
            )
        })?;
        b = b.endpoint(origin, endpoint.connect_lazy());
    }
    Ok(b)
}

/// [`balance`] with every replica's channel made from `template`, a tonic
/// [`Endpoint`] with the settings you would give a single channel
/// (timeouts, keep-alive, TLS, limits, user agent). The template's URI
/// names the service: its scheme is every replica's and its authority
/// every call's `:authority`; see [`Channels`] for what applies and how.
/// `Channels::new(template)?.balance(origins)`, in one call; keep the
/// [`Channels`] to give discovery the same template.
///
/// ```no_run
/// use std::time::Duration;
/// use tonic::transport::Endpoint;
/// use tower_lb::grpc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let template = Endpoint::from_static("http://greeter")
///     .connect_timeout(Duration::from_secs(1))
///     .timeout(Duration::from_secs(5))
///     .user_agent("checkout/1.4")?;
/// let lb = grpc::balance_with(template, ["http://10.0.0.1:50051", "http://10.0.0.2:50051"])?
///     .build()?;
/// # drop(lb); Ok(()) }
/// ```
///
/// # Errors
///
/// As [`Channels::new`] (`template`) and [`Channels::balance`]
/// (`origins`, `runtime`).
pub fn balance_with<I>(
    template: Endpoint,
    origins: I,
) -> Result<Builder<Origin, Channel, PeakEwma, Classifier>, ConfigError>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    Channels::new(template)?.balance(origins)
}
