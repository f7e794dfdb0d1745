//! `[fleet]`: the route step under test (one row per picker and variant),
//! the zones callers and backends run in, and what crossing a zone costs.

use std::time::Duration;

use serde::Deserialize;
use tower_lb::endpoint::{EndpointMeta, Locality};
use tower_lb::route::{Callers, Routing, Subset, ZoneAware};

use super::Scenario;
use super::backend::BackendSpec;
use super::random::{Rng, sub_seed};
use super::units::Dur;

/// `[fleet]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    /// The route step's variants: each picker runs once per variant.
    pub variants: Vec<Variant>,
    /// Endpoints per balancer for `subset` and `random_subset`.
    #[serde(default)]
    pub subset_size: Option<usize>,
    /// Added to a request whose client and backend are in the same zone.
    #[serde(default)]
    pub in_zone_rtt: Dur,
    /// Added to a request that crosses zones.
    #[serde(default)]
    pub cross_zone_rtt: Dur,
    /// `[[fleet.zone]]`: the zones, with the share of client balancers in
    /// each (clients are placed in order: the first zone's share first).
    #[serde(default, rename = "zone")]
    pub zones: Vec<ZoneSpec>,
}

/// `[[fleet.zone]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneSpec {
    /// The zone's name, as backends' `zone` names it.
    pub name: String,
    /// Share of the client balancers in this zone (any unit).
    pub callers: f64,
}

/// One variant of the route step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// The library's default: priorities honoured, no locality preference,
    /// every endpoint (a full mesh).
    Default,
    /// Zone-aware routing with the client's zone and the clients' spread.
    ZoneAware,
    /// Deterministic subsets of `subset_size` (client index, fleet size).
    Subset,
    /// Each client uses `subset_size` endpoints drawn at random (seeded):
    /// the baseline deterministic subsets improve on.
    RandomSubset,
}

impl Variant {
    /// The name in scenario files, the table and the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Default => "default",
            Variant::ZoneAware => "zone_aware",
            Variant::Subset => "subset",
            Variant::RandomSubset => "random_subset",
        }
    }
}

impl FleetSpec {
    /// Checks the section against the scenario's backends.
    pub fn validate(&self, backends: &[BackendSpec]) -> Result<(), (String, String)> {
        let err = |f: &str, p: String| Err((format!("fleet.{f}"), p));
        if self.variants.is_empty() {
            return err("variants", "list at least one variant".into());
        }
        let needs_subset = self
            .variants
            .iter()
            .any(|v| matches!(v, Variant::Subset | Variant::RandomSubset));
        if needs_subset && self.subset_size.is_none_or(|k| k == 0) {
            return err(
                "subset_size",
                "subset variants need a subset_size >= 1".into(),
            );
        }
        if self.variants.contains(&Variant::ZoneAware) && self.zones.len() < 2 {
            return err(
                "zone",
                "zone_aware needs at least two [[fleet.zone]]".into(),
            );
        }
        for (i, z) in self.zones.iter().enumerate() {
            if z.name.is_empty() || self.zones[..i].iter().any(|o| o.name == z.name) {
                return err(
                    &format!("zone[{i}].name"),
                    format!("{:?}: empty or repeated", z.name),
                );
            }
            if !(z.callers.is_finite() && z.callers >= 0.0) {
                return err(
                    &format!("zone[{i}].callers"),
                    format!("{} is not >= 0", z.callers),
                );
            }
        }
        if !self.zones.is_empty() && self.zones.iter().all(|z| z.callers == 0.0) {
            return err("zone", "some zone must have callers".into());
        }
        for (i, b) in backends.iter().enumerate() {
            if let Some(zone) = &b.zone
                && !self.zones.iter().any(|z| &z.name == zone)
            {
                return Err((
                    format!("backend[{i}].zone"),
                    format!("unknown zone {zone:?}: not in [[fleet.zone]]"),
                ));
            }
        }
        Ok(())
    }
}

impl Scenario {
    /// The zone of client `c` of `clients` (by the zones' caller shares),
    /// if the scenario has zones.
    pub fn client_zone(&self, c: u32, clients: u32) -> Option<&str> {
        let zones = &self.fleet.as_ref()?.zones;
        let total: f64 = zones.iter().map(|z| z.callers).sum();
        let at = (f64::from(c) + 0.5) / f64::from(clients.max(1)) * total;
        let mut sum = 0.0;
        for z in zones {
            sum += z.callers;
            if at < sum {
                return Some(&z.name);
            }
        }
        zones.last().map(|z| z.name.as_str())
    }

    /// What a request from client `c` to backend `b` spends in the network.
    pub fn rtt(&self, c: u32, b: usize) -> Duration {
        let (Some(f), Some(here)) = (&self.fleet, self.client_zone(c, self.load.clients)) else {
            return Duration::ZERO;
        };
        match self.backends.get(b).and_then(|b| b.zone.as_deref()) {
            Some(there) if there == here => f.in_zone_rtt.0,
            Some(_) => f.cross_zone_rtt.0,
            None => Duration::ZERO,
        }
    }

    /// The metadata backend `b` is given: its zone and priority.
    pub fn meta(&self, b: usize) -> EndpointMeta {
        let Some(spec) = self.backends.get(b) else {
            return EndpointMeta::new();
        };
        let meta = EndpointMeta::new().with_priority(spec.priority);
        match &spec.zone {
            Some(z) => meta.with_locality(Locality::in_zone(z)),
            None => meta,
        }
    }

    /// The route step of client `c` in `variant`.
    pub fn routing(&self, variant: Option<Variant>, c: u32) -> Routing {
        let clients = self.load.clients as usize;
        let k = self.fleet.as_ref().and_then(|f| f.subset_size).unwrap_or(1);
        match variant {
            Some(Variant::ZoneAware) => {
                let zones = self.fleet.as_ref().map_or(&[][..], |f| &f.zones[..]);
                let callers = Callers::new(zones.iter().map(|z| (z.name.as_str(), z.callers)));
                let here = self.client_zone(c, self.load.clients).unwrap_or("");
                Routing::new().zone_aware(ZoneAware::new(here, callers))
            }
            Some(Variant::Subset) => Routing::new().subset(Subset::new(c as usize, clients, k)),
            _ => Routing::new(),
        }
    }

    /// Which backends client `c` is given at all: every one, except in
    /// `random_subset`, where each client draws its own `subset_size`.
    pub fn given(&self, variant: Option<Variant>, seed: u64, c: u32) -> Vec<bool> {
        let n = self.backends.len();
        if variant != Some(Variant::RandomSubset) {
            return vec![true; n];
        }
        let k = self
            .fleet
            .as_ref()
            .and_then(|f| f.subset_size)
            .unwrap_or(n)
            .min(n);
        // A seeded partial Fisher-Yates shuffle: the first k of a random order.
        let mut order: Vec<usize> = (0..n).collect();
        let mut rng = Rng::new(sub_seed(seed, 5000 + u64::from(c)));
        for i in 0..k {
            let j = i + (rng.next_u64() % (n - i) as u64) as usize;
            order.swap(i, j);
        }
        let mut given = vec![false; n];
        for &b in &order[..k] {
            given[b] = true;
        }
        given
    }

    /// The variants each picker runs: `[None]` without `[fleet]`.
    pub fn variants(&self) -> Vec<Option<Variant>> {
        match &self.fleet {
            Some(f) => f.variants.iter().copied().map(Some).collect(),
            None => vec![None],
        }
    }
}

/// Replaces every backend with `count = n` by `n` copies named
/// `{name}-1` to `{name}-{n}`.
pub fn expand(backends: &mut Vec<BackendSpec>) {
    let mut out = Vec::with_capacity(backends.len());
    for b in backends.drain(..) {
        match b.count {
            Some(n) if n > 1 => out.extend((1..=n).map(|i| BackendSpec {
                name: format!("{}-{i}", b.name),
                count: None,
                ..b.clone()
            })),
            _ => out.push(b),
        }
    }
    *backends = out;
}
