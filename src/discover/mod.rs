//! Discovery: keep a balancer's endpoints in step with where the platform
//! your fleet runs on says they are.
//!
//! | source | feature | reads | weight | locality / priority | draining |
//! |---|---|---|---|---|---|
//! | [`dns`] | `dns` (`dns-hickory` for TTLs and SRV) | A/AAAA, or SRV then A/AAAA | SRV weight | SRV priority (ranked) | — |
//! | `tower_lb_kube::Kube` | the `tower-lb-kube` crate | the EndpointSlices of one Service | 1 | zone; hints as a label | `serving && terminating` |
//! | `xds` | `xds` | `ClusterLoadAssignment`s over ADS | `load_balancing_weight` | locality, its weight, priority | `DRAINING` (and `DEGRADED`) |
//! | `tower_lb_etcd::Etcd` | the `tower-lb-etcd` crate | the keys under an etcd prefix (gRPC-go's etcd naming) | `Metadata.weight` | `Metadata` zone, region, priority | `Metadata.draining` |
//!
//! Every source works the same way:
//!
//! * It turns what the platform says into a desired set of [`Target`]s
//!   (address, weight, [`EndpointMeta`](crate::endpoint::EndpointMeta),
//!   serving or draining) and applies it with one [`Reconciler`]: one
//!   [`Handle::edit`](crate::Handle::edit) per change, so the balancer
//!   publishes one snapshot; an address seen before keeps its endpoint and
//!   model; only what changed is written.
//! * You give it a *maker* from address to the endpoint's key and service,
//!   `FnMut(SocketAddr) -> Option<(K, S)>`: [`http_endpoints`] for an HTTP
//!   balancer keyed by [`Origin`], or your own.
//! * On any source error (a failed resolution, a watch error, a lost
//!   stream, a resource it cannot apply) it keeps the last good set, counts
//!   the error in its [`Stats`], and reports it with
//!   [`Handle::report_discovery_error`](crate::Handle::report_discovery_error)
//!   (a `tracing` event with the error's text).
//! * Each implements [`Source`]: [`stats`](Source::stats), then
//!   [`spawn`](Source::spawn) runs it as one task and returns a [`Driver`]: dropping the
//!   driver stops the source, and so does dropping the balancer with all its
//!   handles.
//!
//! # A source of your own
//!
//! Everything a source needs is public: a [`Reconciler`] to apply each
//! desired set, [`Stats::applied`] and [`Stats::error`] to count updates and
//! errors (the error is also reported on the balancer), and [`until_gone`]
//! to end with the balancer. Kubernetes discovery is written this way, in a
//! crate of its own (`tower-lb-kube`, since its API names `kube::Client`
//! and kube's breaking releases should not be tower-lb's); so is etcd
//! discovery (`tower-lb-etcd`).

mod driver;
mod reconcile;
mod source;
mod stats;

#[cfg(feature = "dns")]
#[cfg_attr(docsrs, doc(cfg(feature = "dns")))]
pub mod dns;
#[cfg(feature = "xds")]
#[cfg_attr(docsrs, doc(cfg(feature = "xds")))]
pub mod xds;

pub use driver::{Driver, LIVENESS_CHECK, until_gone};
pub use reconcile::{Applied, Reconciler, Target, TargetState};
pub use source::Source;
pub use stats::Stats;

#[cfg(feature = "dns")]
pub(crate) use driver::balancer_gone;

#[cfg(feature = "http")]
use crate::http::{Origin, SetOrigin};

/// An HTTP endpoint: its key and service.
#[cfg(feature = "http")]
pub type HttpEndpoint<S> = (Origin, SetOrigin<S>);

/// The maker for an HTTP balancer built with
/// [`http::balance`](crate::http::balance): each address becomes the
/// endpoint `scheme://ip:port` served by a clone of `client`.
///
/// # Errors
///
/// A [`ConfigError`](crate::ConfigError) naming `authority` if `scheme` is
/// neither `http` nor `https`.
///
/// ```
/// use tower_lb::discover;
/// let client = tower::service_fn(|_: ::http::Request<()>| async {
///     Ok::<_, std::io::Error>(::http::Response::new(()))
/// });
/// let mut make = discover::http_endpoints(client, "http")?;
/// let (origin, _svc) = make("10.0.0.1:8080".parse().unwrap()).unwrap();
/// assert_eq!(origin.as_str(), "http://10.0.0.1:8080");
/// # Ok::<_, tower_lb::ConfigError>(())
/// ```
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub fn http_endpoints<S: Clone>(
    client: S,
    scheme: &str,
) -> Result<
    impl FnMut(std::net::SocketAddr) -> Option<HttpEndpoint<S>> + use<S>,
    crate::error::ConfigError,
> {
    // Validate once, so that the per-address parse below cannot fail.
    Origin::from_socket_addr(scheme, std::net::SocketAddr::from(([127, 0, 0, 1], 1)))?;
    let scheme = scheme.to_owned();
    Ok(move |addr| {
        let origin = Origin::from_socket_addr(&scheme, addr).ok()?;
        Some((origin.clone(), SetOrigin::new(client.clone(), origin)))
    })
}
