//! [`Source`]: what every discovery source does, written down once.

use std::future::Future;
use std::hash::Hash;
use std::net::SocketAddr;

use super::{Driver, Stats};
use crate::balance::Handle;
use crate::pick::Picker;

/// A discovery source: it learns where a service's replicas are (DNS,
/// Kubernetes EndpointSlices, an xDS control plane) and keeps a balancer's
/// endpoints in step through its [`Handle`], as the [module docs](super)
/// describe. Build one with its builder (`Dns::builder`, `Xds::builder`,
/// `tower_lb_kube::Kube::builder`), take its [`stats`](Source::stats), then
/// [`spawn`](Source::spawn) it (or await [`run`](Source::run) yourself).
///
/// ```
/// # #[cfg(feature = "dns")]
/// # async fn demo() -> Result<(), tower_lb::ConfigError> {
/// use tower_lb::discover::{self, Source, dns::Dns};
///
/// let client = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::io::Error>(http::Response::new(()))
/// });
/// let lb = tower_lb::Balance::builder().build()?;
/// let dns = Dns::builder("users.internal", 8080).build()?;
/// let stats = dns.stats();
/// let driver = dns.spawn(lb.handle(), discover::http_endpoints(client, "http")?);
/// // ... `lb` serves; dropping `driver` (or every clone of `lb`) stops it.
/// # drop((driver, stats)); Ok(()) }
/// ```
pub trait Source: Sized + Send + 'static {
    /// The source's counters, shared with the running source: take them
    /// before [`run`](Self::run) or [`spawn`](Self::spawn) consume it.
    fn stats(&self) -> Stats;

    /// Keeps `handle`'s balancer in step with what the platform says until
    /// every `Balance` and other `Handle` of it is dropped, or the future
    /// is. `make` turns a new address into the endpoint's key and service
    /// (`None` skips the address); the key is what the source later
    /// removes, so it replaces and then owns an endpoint with the same key.
    fn run<K, S, P, C, F>(
        self,
        handle: Handle<K, S, P, C>,
        make: F,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        S: Send + Sync + 'static,
        P: Picker,
        C: Send + Sync + 'static,
        F: FnMut(SocketAddr) -> Option<(K, S)> + Send + 'static;

    /// Spawns [`run`](Self::run) on the current tokio runtime; dropping the
    /// returned [`Driver`] stops it.
    fn spawn<K, S, P, C, F>(self, handle: Handle<K, S, P, C>, make: F) -> Driver
    where
        K: Hash + Eq + Clone + Send + Sync + 'static,
        S: Send + Sync + 'static,
        P: Picker,
        C: Send + Sync + 'static,
        F: FnMut(SocketAddr) -> Option<(K, S)> + Send + 'static,
    {
        Driver::spawn(self.run(handle, make))
    }
}
