//! xDS discovery (feature `xds`): keep a balancer's endpoints in step with
//! the `ClusterLoadAssignment`s an xDS control plane (Istio, any Envoy
//! control plane, proxyless gRPC's) serves over ADS.
//!
//! [`Xds`] opens one state-of-the-world ADS stream
//! (`envoy.service.discovery.v3.AggregatedDiscoveryService`) and subscribes
//! to EDS for its clusters. Each response is validated as a whole: if every
//! assignment in it applies, the merge of all clusters' endpoints is applied
//! through a [`Reconciler`](crate::discover::Reconciler) and the response is ACKed (its `version_info`
//! and `nonce`); otherwise nothing changes and it is NACKed (the last good
//! version, the nonce, and `error_detail` with code 3 INVALID_ARGUMENT and
//! the reason). A lost stream reconnects with exponential backoff and full
//! jitter ([`DEFAULT_RECONNECT_BASE`] up to [`DEFAULT_RECONNECT_CAP`]) and
//! resubscribes with the last accepted version; the last good set serves
//! meanwhile. Every NACK and every lost stream is counted in
//! [`Stats::errors`] and reported with [`Handle::report_discovery_error`]
//! as source `"xds"`.
//!
//! | `ClusterLoadAssignment` | endpoint in the balancer |
//! |---|---|
//! | `lb_endpoints[].endpoint.address.socket_address` (IP, `port_value`) | the address; anything else is NACKed |
//! | `lb_endpoints[].load_balancing_weight` (default 1; 0 is NACKed) | weight |
//! | `health_status` HEALTHY, UNKNOWN | serving |
//! | `health_status` DRAINING, DEGRADED | draining (DEGRADED: Envoy's fallback-only hosts) |
//! | `health_status` UNHEALTHY, TIMEOUT | absent |
//! | `endpoints[].locality` | [`Locality::new(region, zone, sub_zone)`](crate::endpoint::Locality::new) |
//! | `endpoints[].load_balancing_weight` (0 is NACKed) | [`locality_weight`](crate::endpoint::EndpointMeta::locality_weight) |
//! | `endpoints[].priority` (levels must not skip) | [`priority`](crate::endpoint::EndpointMeta::priority) |
//! | `cluster_name` | the label [`CLUSTER_LABEL`] |
//!
//! Not read: `policy` (drop overloads, overprovisioning factor),
//! `named_endpoints`, endpoint metadata and health-check config. The
//! incremental (delta) protocol is not spoken.
//!
//! ```no_run
//! use tower_lb::discover::{self, Source, xds::Xds};
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! # let client = tower::service_fn(|_: ::http::Request<()>| async {
//! #     Ok::<_, std::io::Error>(::http::Response::new(()))
//! # });
//! let lb = tower_lb::http::balance(client.clone(), Vec::<&str>::new())?.build()?;
//! let xds = Xds::builder("http://istiod.istio-system:15010")
//!     .cluster("outbound|8080||cart.shop.svc.cluster.local")
//!     .node_id("sidecar~10.0.0.9~checkout-7d9.shop~shop.svc.cluster.local")
//!     .build()?;
//! let driver = xds.spawn(lb.handle(), discover::http_endpoints(client, "http")?);
//! # drop(driver); Ok(()) }
//! ```

mod ads;
mod assignment;

use std::collections::BTreeMap;
use std::future::Future;
use std::hash::Hash;
use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use tonic::transport::Endpoint;

use super::{Source, Stats};
use crate::balance::Handle;
use crate::error::ConfigError;
use crate::model::Locality;
use crate::pick::Picker;
use crate::retry::Backoff;

pub use assignment::CLUSTER_LABEL;

/// The EDS resource type.
pub const CLUSTER_LOAD_ASSIGNMENT: &str =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

/// Default first reconnect delay bound: gRPC's connection backoff
/// `INITIAL_BACKOFF` (1 s).
pub const DEFAULT_RECONNECT_BASE: Duration = Duration::from_secs(1);

/// Default longest reconnect delay bound: gRPC's `MAX_BACKOFF` (120 s).
pub const DEFAULT_RECONNECT_CAP: Duration = Duration::from_secs(120);

/// Default time to establish the connection: gRPC's `MIN_CONNECT_TIMEOUT`
/// (20 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// Default node id when none is set.
pub const DEFAULT_NODE_ID: &str = "tower-lb";

/// The old name of [`Builder`].
#[deprecated(since = "0.1.0", note = "renamed `tower_lb::discover::xds::Builder`")]
pub type XdsBuilder = Builder;

/// Configures an [`Xds`] driver; see the [module docs](self).
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    server: String,
    clusters: Vec<String>,
    node: core::Node,
    metadata: BTreeMap<String, String>,
    backoff: Backoff,
    connect_timeout: Duration,
}

impl Builder {
    /// Subscribes to the assignment of `cluster` (call once per cluster;
    /// their endpoints are merged into one set).
    pub fn cluster(mut self, cluster: impl Into<String>) -> Self {
        self.clusters.push(cluster.into());
        self
    }

    /// The node id the control plane knows this client by (default
    /// [`DEFAULT_NODE_ID`]).
    pub fn node_id(mut self, id: impl Into<String>) -> Self {
        self.node.id = id.into();
        self
    }

    /// The node's cluster (the calling service's name).
    pub fn node_cluster(mut self, cluster: impl Into<String>) -> Self {
        self.node.cluster = cluster.into();
        self
    }

    /// Adds a string to the node's metadata (Istio reads e.g. `NAMESPACE`).
    pub fn node_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// The node's locality.
    pub fn node_locality(mut self, locality: &Locality) -> Self {
        self.node.locality = Some(core::Locality {
            region: locality.region().to_owned(),
            zone: locality.zone().to_owned(),
            sub_zone: locality.sub_zone().to_owned(),
        });
        self
    }

    /// The delays between reconnects (default [`DEFAULT_RECONNECT_BASE`]
    /// doubling up to [`DEFAULT_RECONNECT_CAP`], full jitter); reset by
    /// every response received.
    pub fn reconnect_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How long connecting may take (> 0; default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Validates the configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `xds.server` (not an `http://` or
    /// `https://` URI), `xds.clusters` (none, or an empty name),
    /// `xds.node_id` (empty), `xds.connect_timeout` (zero or over a year)
    /// or `xds.reconnect_backoff` (see [`Backoff::validate`]).
    pub fn build(mut self) -> Result<Xds, ConfigError> {
        let endpoint = Endpoint::from_shared(self.server.clone())
            .ok()
            .filter(|e| matches!(e.uri().scheme_str(), Some("http" | "https")))
            .ok_or_else(|| {
                ConfigError::new("xds.server", &self.server, "an http:// or https:// URI")
            })?;
        if self.clusters.is_empty() || self.clusters.iter().any(String::is_empty) {
            return Err(ConfigError::new(
                "xds.clusters",
                &self.clusters,
                "one or more non-empty cluster names",
            ));
        }
        if self.node.id.is_empty() {
            return Err(ConfigError::new("xds.node_id", "", "a non-empty node id"));
        }
        let timeout = crate::error::check_positive("xds.connect_timeout", self.connect_timeout)?;
        self.backoff
            .validate()
            .map_err(|e| ConfigError::new("xds.reconnect_backoff", e.value(), e.allowed()))?;
        if !self.metadata.is_empty() {
            let fields = std::mem::take(&mut self.metadata)
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        Value {
                            kind: Some(Kind::StringValue(v)),
                        },
                    )
                })
                .collect();
            self.node.metadata = Some(Struct { fields });
        }
        Ok(Xds {
            endpoint: endpoint.connect_timeout(timeout),
            clusters: self.clusters,
            node: self.node,
            backoff: self.backoff,
            stats: Stats::default(),
        })
    }
}

/// An ADS client for the assignments of one or more clusters; see the
/// [module docs](self).
#[derive(Debug)]
pub struct Xds {
    endpoint: Endpoint,
    clusters: Vec<String>,
    node: core::Node,
    backoff: Backoff,
    stats: Stats,
}

impl Xds {
    /// A builder for the management server at `server`
    /// (`http://host:port`; `https://` needs tonic's TLS features).
    pub fn builder(server: impl Into<String>) -> Builder {
        Builder {
            server: server.into(),
            clusters: Vec::new(),
            node: core::Node {
                id: DEFAULT_NODE_ID.to_owned(),
                user_agent_name: "tower-lb".to_owned(),
                user_agent_version_type: Some(core::node::UserAgentVersionType::UserAgentVersion(
                    env!("CARGO_PKG_VERSION").to_owned(),
                )),
                ..Default::default()
            },
            metadata: BTreeMap::new(),
            // Both within Backoff's range, so this cannot fail.
            backoff: Backoff::new(DEFAULT_RECONNECT_BASE, DEFAULT_RECONNECT_CAP),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// Keeps `handle`'s balancer in step with the clusters' assignments
    /// until every `Balance` and other `Handle` of it is dropped (checked
    /// every second) or the future is dropped. `make` turns a new address
    /// into the endpoint's key and service.
    async fn drive<K, S, P, C, F>(self, handle: Handle<K, S, P, C>, make: F)
    where
        K: Hash + Eq + Clone,
        P: Picker,
        F: FnMut(SocketAddr) -> Option<(K, S)>,
    {
        ads::Client::new(self, make).run(handle).await;
    }
}

impl Source for Xds {
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
