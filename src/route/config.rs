//! What a user writes: [`Routing`], [`ZoneAware`], [`Callers`], checked by
//! `Balance::build`.

use std::sync::Arc;

use super::subset::Subset;
use super::zone::DEFAULT_MIN_CLUSTER_SIZE;
use crate::error::ConfigError;

/// Envoy's default overprovisioning factor: a priority level (or a
/// locality) counts as fully available until fewer than `1/1.4 ≈ 71.4%` of
/// its endpoints are healthy, so losing a few endpoints moves no traffic.
pub const DEFAULT_OVERPROVISIONING_FACTOR: f64 = 1.4;

/// The largest overprovisioning factor accepted: 100 (a level counts as
/// fully available while one endpoint in a hundred is healthy).
pub const MAX_OVERPROVISIONING_FACTOR: f64 = 100.0;

/// The route step's settings; see the [module docs](super) for the rules.
///
/// The default honours priorities with Envoy's factor 1.4, keeps no
/// locality preference and uses every endpoint. Setters never fail;
/// [`Balance::build`](crate::balance::Builder::build) checks the values and
/// names a bad field (`routing.overprovisioning_factor`,
/// `routing.zone_aware.local_zone`, `routing.subset.size`, ...).
///
/// ```
/// use tower_lb::route::{Callers, Routing, Subset, ZoneAware};
/// let routing = Routing::new()
///     .zone_aware(ZoneAware::new(
///         "eu-west-1a",
///         Callers::new([("eu-west-1a", 5.0), ("eu-west-1b", 3.0), ("eu-west-1c", 2.0)]),
///     ))
///     .subset(Subset::new(7, 1_000, 20));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Routing {
    pub(crate) factor: f64,
    pub(crate) zone_aware: Option<ZoneAware>,
    pub(crate) locality_weighted: bool,
    pub(crate) subset: Option<Subset>,
}

impl Default for Routing {
    fn default() -> Self {
        Self {
            factor: DEFAULT_OVERPROVISIONING_FACTOR,
            zone_aware: None,
            locality_weighted: false,
            subset: None,
        }
    }
}

impl Routing {
    /// Priorities with the default factor, no locality preference, no
    /// subset.
    pub fn new() -> Self {
        Self::default()
    }

    /// The overprovisioning factor of priority levels and localities,
    /// finite and in `1..=100` (default 1.4), used in whole percent as
    /// Envoy does (1.4 is 140%).
    pub fn overprovisioning_factor(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }

    /// Prefers the caller's own zone by Envoy's zone-aware rule. Exclusive
    /// with [`locality_weighted`](Self::locality_weighted).
    pub fn zone_aware(mut self, zone_aware: ZoneAware) -> Self {
        self.zone_aware = Some(zone_aware);
        self
    }

    /// Splits each level between its localities by their weights
    /// ([`EndpointMeta::locality_weight`](crate::endpoint::EndpointMeta::locality_weight),
    /// 1 when absent) times their availability: Envoy's locality-weighted
    /// load balancing. Exclusive with [`zone_aware`](Self::zone_aware).
    pub fn locality_weighted(mut self) -> Self {
        self.locality_weighted = true;
        self
    }

    /// Uses only this balancer's deterministic subset of the endpoints.
    pub fn subset(mut self, subset: Subset) -> Self {
        self.subset = Some(subset);
        self
    }

    /// The factor in whole percent, as the rules use it.
    pub(crate) fn factor_percent(&self) -> u64 {
        (self.factor * 100.0).round() as u64
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let f = self.factor;
        if !(f.is_finite() && (1.0..=MAX_OVERPROVISIONING_FACTOR).contains(&f)) {
            return Err(ConfigError::new(
                "routing.overprovisioning_factor",
                f,
                "a finite number in 1..=100",
            ));
        }
        if let Some(z) = &self.zone_aware {
            if self.locality_weighted {
                return Err(ConfigError::new(
                    "routing.locality_weighted",
                    true,
                    "off when zone_aware is set (Envoy makes them exclusive)",
                ));
            }
            z.callers.check_local(&z.local)?;
        }
        if let Some(s) = &self.subset {
            s.validate()?;
        }
        Ok(())
    }
}

/// Zone-aware routing: the caller's own zone and how the callers of this
/// service spread over zones.
///
/// ```
/// use tower_lb::route::{Callers, ZoneAware};
/// let z = ZoneAware::new("a", Callers::new([("a", 50.0), ("b", 30.0), ("c", 20.0)]))
///     .min_cluster_size(10);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneAware {
    pub(crate) local: Arc<str>,
    pub(crate) callers: Callers,
    pub(crate) min_cluster_size: usize,
}

impl ZoneAware {
    /// The caller runs in `local_zone`; `callers` is where the callers run
    /// (the caller's zone must be in it with a share > 0). Update the
    /// distribution at run time with
    /// [`Handle::set_callers`](crate::Handle::set_callers).
    pub fn new(local_zone: &str, callers: Callers) -> Self {
        Self {
            local: local_zone.into(),
            callers,
            min_cluster_size: DEFAULT_MIN_CLUSTER_SIZE,
        }
    }

    /// Below this many healthy endpoints in a level, the level is not
    /// split by zone (default 6, Envoy's `min_cluster_size`).
    pub fn min_cluster_size(mut self, n: usize) -> Self {
        self.min_cluster_size = n;
        self
    }

    /// The caller's zone.
    pub fn local_zone(&self) -> &str {
        &self.local
    }
}

/// How the callers of a service spread over zones: a share per zone, in
/// any unit (counts of replicas, percentages), normalised to sum 1.
///
/// ```
/// use tower_lb::route::Callers;
/// let c = Callers::new([("a", 5.0), ("b", 3.0), ("c", 2.0)]);
/// assert_eq!(c.share("b"), Some(0.3));
/// assert_eq!(c.share("d"), None);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Callers {
    zones: Box<[(Arc<str>, f64)]>,
}

impl Callers {
    /// A distribution from `(zone, share)` pairs. Checked where it is used
    /// (`Balance::build`, `Handle::set_callers`): names non-empty and
    /// unique, shares finite and `>= 0`, their sum `> 0`.
    pub fn new<'a>(zones: impl IntoIterator<Item = (&'a str, f64)>) -> Self {
        Self {
            zones: zones.into_iter().map(|(z, s)| (Arc::from(z), s)).collect(),
        }
    }

    /// The share of `zone`, normalised (`None` for a zone not listed or a
    /// distribution that does not sum to a finite number > 0).
    pub fn share(&self, zone: &str) -> Option<f64> {
        let total = self.total()?;
        self.zones
            .iter()
            .find(|(z, _)| &**z == zone)
            .map(|(_, s)| s / total)
    }

    /// Zones with callers (share > 0).
    pub(crate) fn populated(&self) -> usize {
        self.zones.iter().filter(|(_, s)| *s > 0.0).count()
    }

    fn total(&self) -> Option<f64> {
        let t: f64 = self.zones.iter().map(|(_, s)| s).sum();
        (t.is_finite() && t > 0.0).then_some(t)
    }

    /// Checks the distribution and that `local` is in it with callers.
    pub(crate) fn check_local(&self, local: &str) -> Result<(), ConfigError> {
        for (i, (zone, share)) in self.zones.iter().enumerate() {
            if zone.is_empty() {
                return Err(ConfigError::new(
                    "routing.zone_aware.callers",
                    "an empty zone name",
                    "non-empty zone names",
                ));
            }
            if self.zones[..i].iter().any(|(z, _)| z == zone) {
                return Err(ConfigError::new(
                    "routing.zone_aware.callers",
                    format_args!("zone {zone:?} twice"),
                    "each zone once",
                ));
            }
            if !(share.is_finite() && *share >= 0.0) {
                return Err(ConfigError::new(
                    "routing.zone_aware.callers",
                    share,
                    "shares that are finite numbers >= 0",
                ));
            }
        }
        if self.total().is_none() {
            return Err(ConfigError::new(
                "routing.zone_aware.callers",
                self.zones.len(),
                "shares that sum to more than 0",
            ));
        }
        if !self.share(local).is_some_and(|s| s > 0.0) {
            return Err(ConfigError::new(
                "routing.zone_aware.local_zone",
                local,
                "a zone of the callers' distribution with a share > 0",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone_aware(local: &str, callers: &[(&str, f64)]) -> Routing {
        Routing::new().zone_aware(ZoneAware::new(local, Callers::new(callers.iter().copied())))
    }

    fn field(r: Routing) -> &'static str {
        r.validate().map_or_else(|e| e.field(), |()| "accepted")
    }

    #[test]
    fn bad_values_name_their_field() {
        for f in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -1.4,
            0.99,
            100.5,
        ] {
            let r = Routing::new().overprovisioning_factor(f);
            assert_eq!(field(r), "routing.overprovisioning_factor", "{f}");
        }
        assert_eq!(
            field(Routing::new().overprovisioning_factor(1.0)),
            "accepted"
        );
        let ok = [("a", 1.0), ("b", 1.0)];
        assert_eq!(field(zone_aware("a", &ok)), "accepted");
        assert_eq!(field(zone_aware("z", &ok)), "routing.zone_aware.local_zone");
        assert_eq!(field(zone_aware("", &ok)), "routing.zone_aware.local_zone");
        assert_eq!(
            field(zone_aware("a", &[("a", 1.0), ("b", 0.0)])),
            "accepted"
        );
        assert_eq!(
            field(zone_aware("b", &[("a", 1.0), ("b", 0.0)])),
            "routing.zone_aware.local_zone"
        );
        for bad in [
            &[("a", 1.0), ("a", 1.0)][..],
            &[("a", 1.0), ("", 1.0)],
            &[("a", f64::NAN)],
            &[("a", f64::INFINITY)],
            &[("a", -1.0)],
            &[("a", 0.0)],
            &[("a", f64::MAX), ("b", f64::MAX)],
            &[],
        ] {
            assert_eq!(
                field(zone_aware("a", bad)),
                "routing.zone_aware.callers",
                "{bad:?}"
            );
        }
        let both = zone_aware("a", &ok).locality_weighted();
        assert_eq!(field(both), "routing.locality_weighted");
        assert_eq!(
            field(Routing::new().subset(Subset::new(3, 3, 1))),
            "routing.subset.index"
        );
    }

    #[test]
    fn factor_is_used_in_whole_percent() {
        assert_eq!(Routing::new().factor_percent(), 140);
        assert_eq!(
            Routing::new()
                .overprovisioning_factor(1.234)
                .factor_percent(),
            123
        );
    }
}
