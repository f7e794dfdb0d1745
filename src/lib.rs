//! # tower-lb
//!
//! Client-side load balancing for [tower]: wrap any `Service` (a hyper or
//! reqwest client, a gRPC channel, your own) and spread requests over the
//! replicas of a backend yourself, with no proxy in between.
//!
//! * [`Balance`] — a `Clone` service that picks an endpoint per request, with
//!   the request in hand, over a set you can change at run time.
//! * [`pick`] — round robin, weighted round robin, random, least in-flight
//!   (full scan and two-choice), least response time, key hash, ring hash,
//!   Maglev (with bounded load), and the default, [`pick::PeakEwma`]:
//!   latency-aware, load-aware, failure-aware.
//! * [`endpoint`] — the one per-endpoint model of load and latency every part
//!   reads: in-flight count, peak-EWMA latency with spread and decay, failure
//!   ratio, learned parallelism, slow start, health.
//! * [`classify`] — what counts as a failure (`http::Classifier` for
//!   HTTP: 5xx, 429, `Retry-After`, slow calls).
//! * [`retry`] — a retry layer with an exact budget, backoff with full jitter,
//!   per-try timeouts, deadlines and hedging, which never retries on an
//!   endpoint it already tried while another is available.
//! * [`breaker`] — circuit breakers, per endpoint inside [`Balance`]
//!   (`Builder::circuit_breaker`) or as a standalone layer.
//! * [`route`] — the step before the picker, for fleets: priority levels
//!   with Envoy's overprovisioning rule, zone-aware and locality-weighted
//!   routing, deterministic subsetting.
//! * [`outlier`] — outlier ejection (`Builder::outlier_detection`) and, with
//!   it, the panic threshold.
//! * `http` (feature `http`) — balancing a hyper-util or reqwest client over
//!   a list of origins; `http::middleware` (feature `reqwest-middleware`)
//!   does it as a `reqwest_middleware::Middleware`.
//! * [`orca`] — server-reported load (ORCA headers and trailers) fed into
//!   the endpoint model, for [`pick::OrcaRoundRobin`] (gRPC A58's weights)
//!   and `PeakEwma`'s utilization term; and adaptive per-endpoint
//!   concurrency limits ([`endpoint::AdaptiveConcurrency`]).
//! * [`discover`] — endpoints from DNS (feature `dns`; TTLs and SRV with
//!   `dns-hickory`), Kubernetes EndpointSlices (the `tower-lb-kube` crate) and xDS EDS over ADS
//!   (`xds`), all through one reconciler that keeps known endpoints' models.
//! * [`probe`] — the probes of the [`pick::Prequal`] picker, sent by a
//!   driver task through each endpoint's own service.
//! * `server` (feature `http`) — the replica's side: a layer that counts
//!   its requests in flight, reports its load (ORCA) and answers probes.
//! * `metrics` (feature `metrics`; `prometheus` for the exposition) —
//!   OpenTelemetry instruments read from the endpoint model.
//!
//! ```
//! use std::convert::Infallible;
//! use tower::{Service, ServiceExt, service_fn};
//! use tower_lb::Balance;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let replica = service_fn(|req: String| async move { Ok::<_, Infallible>(req.len()) });
//! let mut lb = Balance::builder()          // PeakEwma picker by default
//!     .endpoint("10.0.0.1:80", replica.clone())
//!     .weighted_endpoint("10.0.0.2:80", replica, 2.0)
//!     .build()?;
//! let n = lb.ready().await?.call("hello".to_string()).await?;
//! assert_eq!(n, 5);
//! # Ok(()) }
//! ```
//!
//! [tower]: https://docs.rs/tower

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod admission;
pub mod balance;
pub mod breaker;
pub mod check;
pub mod classify;
pub mod discover;
pub mod endpoint;
mod error;
#[cfg(feature = "grpc")]
#[cfg_attr(docsrs, doc(cfg(feature = "grpc")))]
pub mod grpc;
mod guard;
pub mod health;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
mod model;
pub mod orca;
mod outcome;
pub mod outlier;
pub mod pick;
pub mod probe;
pub mod retry;
mod rng;
pub mod route;
mod scope;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod server;
mod task;
pub mod time;

/// The README and the long documents in `docs/`, compiled and run as
/// doctests, so that no Rust block in them can rot.
#[cfg(doctest)]
mod documents {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/guide.md")]
    struct Guide;
    #[doc = include_str!("../docs/lab.md")]
    struct Lab;
    #[doc = include_str!("../docs/performance.md")]
    struct Performance;
    #[doc = include_str!("../docs/conformance.md")]
    struct Conformance;
    #[doc = include_str!("../docs/tails.md")]
    struct Tails;
    #[doc = include_str!("../docs/dependencies.md")]
    struct Dependencies;
    #[doc = include_str!("../docs/vocabulary.md")]
    struct Vocabulary;
    #[doc = include_str!("../docs/history.md")]
    struct History;
}

pub use balance::{Balance, Handle};
pub use endpoint::SlowStart;
pub use error::{ConfigError, Error, Refusal, Unavailable};
