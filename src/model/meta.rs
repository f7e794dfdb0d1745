//! Where an endpoint runs and how it ranks: locality, priority and labels.
//!
//! Set through [`Builder::endpoint_with`](crate::balance::Builder::endpoint_with),
//! the [`Handle`](crate::Handle) and the discovery sources; read with
//! [`EndpointState::meta`](super::EndpointState::meta). Changing an endpoint's
//! metadata keeps its load and latency model.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Where an endpoint runs, as Envoy and Kubernetes name it: region, zone
/// and sub-zone. Empty strings mean "unknown".
///
/// ```
/// use tower_lb::endpoint::Locality;
/// let here = Locality::in_zone("eu-west-1a");
/// assert_eq!(here.zone(), "eu-west-1a");
/// assert!(here.region().is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Locality {
    region: Arc<str>,
    zone: Arc<str>,
    sub_zone: Arc<str>,
}

impl Locality {
    /// A locality with all three parts.
    pub fn new(region: &str, zone: &str, sub_zone: &str) -> Self {
        Self {
            region: region.into(),
            zone: zone.into(),
            sub_zone: sub_zone.into(),
        }
    }

    /// A locality known only by its zone (Kubernetes'
    /// `topology.kubernetes.io/zone`).
    pub fn in_zone(zone: &str) -> Self {
        Self::new("", zone, "")
    }

    /// The region, or `""`.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The zone, or `""`.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The sub-zone, or `""`.
    pub fn sub_zone(&self) -> &str {
        &self.sub_zone
    }

    /// True when region, zone and sub-zone are all unknown.
    pub fn is_unknown(&self) -> bool {
        self.region.is_empty() && self.zone.is_empty() && self.sub_zone.is_empty()
    }
}

/// An endpoint's placement and ranking, besides its weight.
///
/// * `locality` — where it runs (zone-aware routing reads it);
/// * `priority` — 0 is the highest; lower priorities take traffic only as
///   higher ones lose health (Envoy's priority levels);
/// * `locality_weight` — the weight of its locality, for locality-weighted
///   routing (xDS `LocalityLbEndpoints.load_balancing_weight`), if the source
///   gives one;
/// * `labels` — free-form `key=value` pairs from discovery. They are never
///   used as metric attributes (unbounded); zone and priority are.
///
/// ```
/// use tower_lb::endpoint::{EndpointMeta, Locality};
/// let meta = EndpointMeta::new()
///     .with_locality(Locality::in_zone("us-east-1b"))
///     .with_priority(1)
///     .with_label("version", "v2");
/// assert_eq!(meta.priority(), 1);
/// assert_eq!(meta.labels()["version"], "v2");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointMeta {
    locality: Locality,
    priority: u32,
    locality_weight: Option<u32>,
    labels: BTreeMap<String, String>,
}

impl EndpointMeta {
    /// Unknown locality, priority 0, no labels.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the locality.
    pub fn with_locality(mut self, locality: Locality) -> Self {
        self.locality = locality;
        self
    }

    /// Sets the priority (0 is the highest).
    pub fn with_priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the weight of the endpoint's locality.
    pub fn with_locality_weight(mut self, weight: u32) -> Self {
        self.locality_weight = Some(weight);
        self
    }

    /// Adds (or replaces) one label.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The locality.
    pub fn locality(&self) -> &Locality {
        &self.locality
    }

    /// The priority (0 is the highest).
    pub fn priority(&self) -> u32 {
        self.priority
    }

    /// The locality's weight, if the source gave one.
    pub fn locality_weight(&self) -> Option<u32> {
        self.locality_weight
    }

    /// The labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }
}
