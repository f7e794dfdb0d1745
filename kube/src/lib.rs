//! Kubernetes discovery for [tower-lb](tower_lb): keep a balancer's
//! endpoints in step with the EndpointSlices of one Service.
//!
//! A crate of its own (it was tower-lb's `kube` feature) because its API
//! names [`kube::Client`]: a kube or k8s-openapi release that breaks is a
//! release of this crate, and tower-lb's version does not move with it.
//! It is written against tower-lb's public discovery API only
//! ([`Source`], [`Reconciler`], [`Stats`], [`until_gone`]), as a source of
//! your own would be.
//!
//! [`Kube`] watches the `discovery.k8s.io/v1` EndpointSlices labelled
//! `kubernetes.io/service-name=<service>` in one namespace with kube's
//! runtime [`watcher`](kube::runtime::watcher()) (list, then watch from the
//! list's `resourceVersion`; a `410 Gone` re-lists; errors back off with
//! the watcher's default: 0.8 s doubling to 30 s with jitter). It keeps one
//! target list per slice and, on every change, applies the merge of all
//! slices through a [`Reconciler`]:
//!
//! | EndpointSlice | endpoint in the balancer |
//! |---|---|
//! | `ports[]` matching the [`Port`] (name or number) | the endpoint's port; a slice without it contributes nothing |
//! | `endpoints[].addresses[0]` (IPv4/IPv6 slices) | the endpoint's IP |
//! | `conditions.ready` true (or unset) | serving |
//! | `ready` false, `serving` and `terminating` true | draining: no new picks, calls in flight finish |
//! | otherwise (not ready, not serving) | absent |
//! | `zone` | [`Locality::in_zone`](tower_lb::endpoint::Locality::in_zone) |
//! | `hints.forZones` | the label [`HINTS_LABEL`] (until zone-aware routing reads it) |
//! | weight | 1 (slices carry none) |
//!
//! After a re-list the set is replaced only once the list is complete
//! (`InitDone`). Every watcher error keeps the last good set, is counted in
//! [`Stats::errors`] and reported with
//! [`Handle::report_discovery_error`] as source `"kube"`.
//!
//! The client comes from kube: `kube::Client::try_default()` reads the
//! in-cluster service account or your kubeconfig. The pod's service account
//! needs `get`, `list` and `watch` on `endpointslices` in `discovery.k8s.io`
//! (see `examples/kubernetes.rs` for the Role). kube's TLS is not enabled
//! by this crate: enable `kube`'s `rustls-tls` (or `openssl-tls`) feature
//! in your binary, and one k8s-openapi version feature (`latest`, or your
//! cluster's `v1_3x`), as kube asks of binaries.
//!
//! ```no_run
//! use tower_lb::discover::{self, Source};
//! use tower_lb_kube::Kube;
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! # let client = tower::service_fn(|_: ::http::Request<()>| async {
//! #     Ok::<_, std::io::Error>(::http::Response::new(()))
//! # });
//! let lb = tower_lb::http::balance(client.clone(), Vec::<&str>::new())?.build()?;
//! let kube = Kube::builder(kube::Client::try_default().await?, "shop", "cart", "http").build()?;
//! let driver = kube.spawn(lb.handle(), discover::http_endpoints(client, "http")?);
//! # drop(driver); Ok(()) }
//! ```

mod slice;

/// The crate's README, compiled with the doc tests so its example cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;

use std::collections::BTreeMap;
use std::future::Future;
use std::hash::Hash;
use std::net::SocketAddr;

use futures_util::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};

use tower_lb::discover::{Reconciler, Source, Stats, Target, until_gone};
use tower_lb::pick::Picker;
use tower_lb::{ConfigError, Handle};

pub use slice::{HINTS_LABEL, Port};

/// The label Kubernetes puts on a Service's EndpointSlices.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Configures a [`Kube`] driver; see the [module docs](self).
#[must_use]
pub struct Builder {
    client: kube::Client,
    namespace: String,
    service: String,
    port: Port,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("namespace", &self.namespace)
            .field("service", &self.service)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// Validates the configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `kube.namespace` or `kube.service` (empty),
    /// or `kube.port` (number 0).
    pub fn build(self) -> Result<Kube, ConfigError> {
        if self.namespace.is_empty() {
            return Err(ConfigError::new("kube.namespace", "", "a namespace name"));
        }
        if self.service.is_empty() {
            return Err(ConfigError::new("kube.service", "", "a Service name"));
        }
        if self.port == Port::Number(0) {
            return Err(ConfigError::new(
                "kube.port",
                0,
                "a port name or a number in 1..=65535",
            ));
        }
        Ok(Kube {
            builder: self,
            stats: Stats::default(),
        })
    }
}

/// A Kubernetes EndpointSlice driver for one Service; see the
/// [module docs](self).
#[derive(Debug)]
pub struct Kube {
    builder: Builder,
    stats: Stats,
}

impl Kube {
    /// A builder watching Service `service` in `namespace` through
    /// `client`, dialling the slices' `port` (a name or a number).
    pub fn builder(
        client: kube::Client,
        namespace: impl Into<String>,
        service: impl Into<String>,
        port: impl Into<Port>,
    ) -> Builder {
        Builder {
            client,
            namespace: namespace.into(),
            service: service.into(),
            port: port.into(),
        }
    }

    /// Keeps `handle`'s balancer in step with the Service's slices until
    /// every `Balance` and other `Handle` of it is dropped (checked every
    /// second) or the future is dropped. `make` turns a new address into
    /// the endpoint's key and service, as for [`Source::run`].
    async fn drive<K, S, P, C, F>(self, handle: Handle<K, S, P, C>, make: F)
    where
        K: Hash + Eq + Clone,
        P: Picker,
        F: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        let b = &self.builder;
        let api: Api<EndpointSlice> = Api::namespaced(b.client.clone(), &b.namespace);
        let config =
            watcher::Config::default().labels(&format!("{SERVICE_NAME_LABEL}={}", b.service));
        let events = watcher::watcher(api, config).default_backoff();
        let mut events = std::pin::pin!(events);
        let mut sync = Reconciler::new(make);
        let mut slices: BTreeMap<String, Vec<Target<SocketAddr>>> = BTreeMap::new();
        // Filled between `Init` and `InitDone` of a (re-)list.
        let mut listing: Option<BTreeMap<String, Vec<Target<SocketAddr>>>> = None;
        let gone = until_gone(&handle);
        let mut gone = std::pin::pin!(gone);
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                () = &mut gone => return,
            };
            let changed = match event {
                None => return,
                Some(Err(error)) => {
                    self.stats.error(&handle, "kube", &error);
                    false
                }
                Some(Ok(Event::Init)) => {
                    listing = Some(BTreeMap::new());
                    false
                }
                Some(Ok(Event::InitApply(s))) => {
                    let targets = slice::targets(&s, &b.port);
                    listing
                        .get_or_insert_default()
                        .insert(s.name_any(), targets);
                    false
                }
                Some(Ok(Event::InitDone)) => {
                    slices = listing.take().unwrap_or_default();
                    true
                }
                Some(Ok(Event::Apply(s))) => {
                    slices.insert(s.name_any(), slice::targets(&s, &b.port));
                    true
                }
                Some(Ok(Event::Delete(s))) => slices.remove(&s.name_any()).is_some(),
            };
            if changed {
                self.stats
                    .applied(&sync.apply(&handle, &slice::merge(&slices)));
            }
        }
    }
}

impl Source for Kube {
    fn stats(&self) -> Stats {
        self.stats.clone()
    }

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
        F: FnMut(SocketAddr) -> Option<(K, S)> + Send + 'static,
    {
        self.drive(handle, make)
    }
}
