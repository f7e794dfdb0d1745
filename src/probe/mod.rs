//! Load probes for the [`Prequal`](crate::pick::Prequal) picker: a driver
//! task that sends the probes the balancer's picks owe, through each
//! endpoint's own service, and files the answers in the picker's pool.
//!
//! [`spawn`] starts one driver per balancer. Each pick of a probing picker
//! owes a number of probes; the driver wakes when a whole one is owed and
//! sends them to distinct endpoints drawn at random from the balancer's
//! set, never more than the picker's bounds allow in flight or per second,
//! nor more at once than there are endpoints (what it does not send it
//! counts as dropped). A probe is a [`Prober`]:
//! [`http::LoadProbe`](crate::http::LoadProbe) for HTTP servers and gRPC
//! servers (with [`server::ServerLoad`](crate::server::ServerLoad) in
//! front, which answers it), or any closure `Fn(&K, S) -> impl Future<Output
//! = Result<LoadReport, E>>`. An answer must carry the named metric
//! [`rif`](crate::orca::RIF_METRIC), and may carry
//! [`latency_ms`](crate::orca::LATENCY_METRIC); one without, an error, or
//! no answer within the picker's `probe_timeout` is a failed probe, and the
//! endpoint's answers are forgotten.
//!
//! The driver stops when the returned [`Probes`] is dropped (with every
//! probe in flight), or when the balancer and all its handles are gone.
//!
//! ```
//! use std::convert::Infallible;
//! use tower::util::BoxCloneSyncService;
//! use tower::{Service, ServiceExt, service_fn};
//! use tower_lb::orca::LoadReport;
//! use tower_lb::{Balance, pick::Prequal, probe};
//!
//! type Svc = BoxCloneSyncService<String, String, Infallible>;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Requests are strings; a probe is the request "probe", answered with a
//! // report (a real server answers with `tower_lb::server`).
//! let replica = |rif: u32| Svc::new(service_fn(move |req: String| async move {
//!     Ok(if req == "probe" { format!("TEXT named_metrics.rif={rif}") } else { req })
//! }));
//! let mut lb = Balance::builder()
//!     .picker(Prequal::new())
//!     .endpoint("a", replica(9))
//!     .endpoint("b", replica(0))
//!     .build()?;
//! let probes = probe::spawn(&lb, |_key: &&str, svc: Svc| async move {
//!     let text = svc.oneshot("probe".to_string()).await?;
//!     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(LoadReport::parse(&text)?)
//! })?;
//! // The first pick owes three probes; later picks choose from the answers.
//! lb.ready().await?.call("hello".to_string()).await?;
//! tokio::task::yield_now().await;
//! // Three owed, two endpoints: one probe each, the third is dropped.
//! assert_eq!((probes.counts().sent, probes.counts().dropped), (2, 1));
//! # Ok(()) }
//! ```

mod driver;

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;

pub use driver::{Probes, spawn};

use crate::orca::LoadReport;

/// A probe's answer: the endpoint's load report, or what went wrong.
pub type ProberFuture = Pin<Box<dyn Future<Output = Result<LoadReport, String>> + Send>>;

/// Probes one endpoint, given its key and a clone of its service, for its
/// load report.
///
/// Implemented for closures `Fn(&K, S) -> Fut` where `Fut` resolves to
/// `Result<LoadReport, E: Display>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot probe endpoints keyed `{K}` with services `{S}` for their load",
    note = "use `tower_lb::http::LoadProbe` for HTTP and gRPC endpoints, or a closure `|key: &K, svc: S| async move {{ ... Ok::<LoadReport, E>(report) }}`"
)]
pub trait Prober<K, S>: Send + Sync + 'static {
    /// Starts one probe.
    fn probe(&self, key: &K, service: S) -> ProberFuture;
}

impl<K, S, F, Fut, E> Prober<K, S> for F
where
    F: Fn(&K, S) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<LoadReport, E>> + Send + 'static,
    E: Display,
{
    fn probe(&self, key: &K, service: S) -> ProberFuture {
        let fut = self(key, service);
        Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
    }
}
