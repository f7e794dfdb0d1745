//! Scenario files: what a lab run sets up (backends, load, pickers, resilience).
//!
//! Parsed from TOML with `deny_unknown_fields` everywhere, then validated, so
//! a typo or an out-of-range value is reported with the file, the line and
//! the field instead of being silently ignored.

use std::path::Path;

use serde::Deserialize;

use super::error::LabError;

mod backend;
mod capacity;
mod fleet;
mod load;
pub mod membership;
mod picker;
pub mod proxy;
pub mod random;
mod resilience;
mod resource;
mod rows;
mod slowdown;
mod streams;
pub mod tuning;
mod units;

pub use backend::{BackendSpec, EventSpec};
pub use capacity::{
    Capacity, CapacitySpec, DEFAULT_BISECT, DEFAULT_ERRORS, DEFAULT_MAX_STEPS, DEFAULT_P99,
    MAX_BISECT, MAX_STEPS,
};
pub use fleet::{FleetSpec, Variant};
pub use load::{
    Arrivals, ClientIps, Connections, DEFAULT_DRAIN, Load, MAX_BODY, Method, OpenLoop, Stage,
    capacity, check_utilization,
};
pub use picker::{PickerName, Rival, known_pickers};
pub use resilience::{Resilience, RetrySpec, SlowStartSpec};
pub use resource::{DEFAULT_STATUS, MAX_SLOTS, ResourceSpec};
pub use rows::RowSpec;
pub use slowdown::{Slowdown, SlowdownSpec, schedules};
pub use streams::{Streams, Tracking};
pub use tuning::{SetFlag, Tuning};
pub use units::{DelaySpec, Dur, parse_duration};

/// The scenarios shipped with the lab, by name (the files are compiled in, so
/// `--scenario NAME` works from any directory).
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "seed-steady",
        include_str!("../../scenarios/seed-steady.toml"),
    ),
    (
        "steady-capacity",
        include_str!("../../scenarios/steady-capacity.toml"),
    ),
    (
        "many-clients",
        include_str!("../../scenarios/many-clients.toml"),
    ),
    ("burst", include_str!("../../scenarios/burst.toml")),
    ("failover", include_str!("../../scenarios/failover.toml")),
    (
        "fast-failure",
        include_str!("../../scenarios/fast-failure.toml"),
    ),
    ("lognormal", include_str!("../../scenarios/lognormal.toml")),
    (
        "failover-ejection",
        include_str!("../../scenarios/failover-ejection.toml"),
    ),
    ("hop", include_str!("../../scenarios/hop.toml")),
    ("streaming", include_str!("../../scenarios/streaming.toml")),
    ("zones", include_str!("../../scenarios/zones.toml")),
    ("fleet", include_str!("../../scenarios/fleet.toml")),
    (
        "priority-failover",
        include_str!("../../scenarios/priority-failover.toml"),
    ),
    (
        "orca-many-clients",
        include_str!("../../scenarios/orca-many-clients.toml"),
    ),
    ("overload", include_str!("../../scenarios/overload.toml")),
    (
        "noisy-fleet",
        include_str!("../../scenarios/noisy-fleet.toml"),
    ),
    (
        "steady-fleet",
        include_str!("../../scenarios/steady-fleet.toml"),
    ),
    ("scale-out", include_str!("../../scenarios/scale-out.toml")),
    (
        "connection-hash",
        include_str!("../../scenarios/connection-hash.toml"),
    ),
    (
        "shared-bottleneck",
        include_str!("../../scenarios/shared-bottleneck.toml"),
    ),
];

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in the table and the JSON.
    pub name: String,
    /// One line saying what the scenario shows.
    #[serde(default)]
    pub description: String,
    /// How long each picker runs.
    pub duration: Dur,
    /// Pickers to compare, in table order.
    pub pickers: Vec<PickerName>,
    /// Pickers that see the backends' weights; the others see weight 1
    /// everywhere. Absent: every picker sees the weights.
    #[serde(default)]
    pub weights_for: Option<Vec<PickerName>>,
    /// Seed for every random number of a sim run (`--seed` overrides).
    #[serde(default)]
    pub seed: Option<u64>,
    /// The virtual users.
    pub load: Load,
    /// The backends (`[[backend]]` tables), at least one.
    #[serde(rename = "backend")]
    pub backends: Vec<BackendSpec>,
    /// Layers put above the balancer.
    #[serde(default)]
    pub resilience: Resilience,
    /// Central proxies run in front of the same backends after the pickers
    /// (http mode only; `--peers` overrides).
    #[serde(default)]
    pub peers: Vec<proxy::PeerSpec>,
    /// Requests whose body streams for a while (`[streams]`).
    #[serde(default)]
    pub streams: Option<Streams>,
    /// `[fleet]`: route-step variants, zones and their round trips.
    #[serde(default)]
    pub fleet: Option<FleetSpec>,
    /// `[[resource]]`: what backends share (a database's pool).
    #[serde(default, rename = "resource")]
    pub resources: Vec<ResourceSpec>,
    /// `[capacity]`: how `--find-capacity` searches.
    #[serde(default)]
    pub capacity: Option<CapacitySpec>,
    /// `[picker.NAME]`: a picker's settings; several (from `--set
    /// NAME.FIELD=A,B`) make one row each.
    #[serde(default, rename = "picker", deserialize_with = "tuning::one_each")]
    pub tuning: std::collections::BTreeMap<String, Vec<Tuning>>,
}

impl Scenario {
    /// Loads a shipped scenario by name, or a file by path.
    pub fn load(name_or_path: &str) -> Result<Scenario, LabError> {
        if let Some((name, text)) = SHIPPED.iter().find(|(n, _)| *n == name_or_path) {
            return Scenario::parse(text, &format!("scenarios/{name}.toml"));
        }
        let path = Path::new(name_or_path);
        let looks_like_path = name_or_path.contains('/')
            || name_or_path.contains('\\')
            || name_or_path.ends_with(".toml");
        if !looks_like_path && !path.exists() {
            let names: Vec<&str> = SHIPPED.iter().map(|(n, _)| *n).collect();
            return Err(LabError::input(format!(
                "--scenario: unknown scenario \"{name_or_path}\": give a file path or one of {}",
                names.join(", ")
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| LabError::input(format!("{name_or_path}: cannot read: {e}")))?;
        Scenario::parse(&text, name_or_path)
    }

    /// Parses and validates scenario text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Scenario, LabError> {
        let mut s: Scenario =
            toml::from_str(text).map_err(|e| LabError::input(format!("{file}: {e}")))?;
        if let Some(i) = s.backends.iter().position(|b| b.count == Some(0)) {
            return Err(LabError::input(format!(
                "{file}: `backend[{i}].count`: must be >= 1"
            )));
        }
        fleet::expand(&mut s.backends);
        s.validate()
            .map_err(|(field, problem)| LabError::input(format!("{file}: `{field}`: {problem}")))?;
        for b in &mut s.backends {
            b.events.sort_by_key(|e| e.at);
        }
        s.load.stages.sort_by_key(|st| st.at);
        Ok(s)
    }

    /// The command line's changes: `--clients` (client balancers), `--set`
    /// (picker settings, one row per value) and `--vary` (rows beside the
    /// picker's own, one per value), checked as the file's own fields are.
    pub fn adjust(&mut self, clients: Option<u32>, set: &[SetFlag]) -> Result<(), LabError> {
        if let Some(n) = clients {
            self.load.clients = n;
        }
        // Every --set first; each --vary then varies the settings they
        // made (not another --vary's).
        let (beside, own): (Vec<&SetFlag>, Vec<&SetFlag>) = set.iter().partition(|f| f.beside);
        let bad = |f: &SetFlag, e: String| {
            let flag = if f.beside { "--vary" } else { "--set" };
            LabError::input(format!("{flag}: {}.{e}", f.picker))
        };
        for f in own {
            let list = self.tuning.entry(f.picker.clone()).or_default();
            *list = tuning::vary(list, &f.field, &f.values).map_err(|e| bad(f, e))?;
        }
        let bases = self.tuning.clone();
        for f in beside {
            let base = bases.get(&f.picker).cloned().unwrap_or_default();
            let extra = tuning::vary(&base, &f.field, &f.values).map_err(|e| bad(f, e))?;
            let list = self.tuning.entry(f.picker.clone()).or_default();
            if list.is_empty() {
                list.push(Tuning::default());
            }
            list.extend(extra);
        }
        self.validate().map_err(|(field, problem)| {
            let flag = if field.starts_with("picker.") {
                "--set/--vary"
            } else {
                "--clients"
            };
            LabError::input(format!("{flag}: `{field}`: {problem}"))
        })
    }

    fn validate(&self) -> Result<(), (String, String)> {
        let err = |f: &str, p: String| Err((f.to_string(), p));
        if self.duration.0.is_zero() {
            return err("duration", "must be > 0".into());
        }
        if self.pickers.is_empty() {
            return err(
                "pickers",
                format!("list at least one of: {}", known_pickers()),
            );
        }
        if self.backends.is_empty() {
            return err("backend", "define at least one [[backend]]".into());
        }
        self.load.validate(&self.backends)?;
        let max_vus = self.max_vus();
        if self.load.clients == 0 || (!self.load.is_open() && self.load.clients > max_vus) {
            return err(
                "load.clients",
                format!("must be between 1 and the number of users ({max_vus})"),
            );
        }
        if self.load.clients > 10_000 {
            return err("load.clients", "at most 10000".into());
        }
        backend::validate(&self.backends)?;
        if let Some(r) = &self.resilience.retry {
            let max = tower_lb::retry::MAX_ATTEMPTS;
            if !(1..=max).contains(&r.max_attempts) {
                return err(
                    "resilience.retry.max_attempts",
                    format!("{} is not in 1..={max}", r.max_attempts),
                );
            }
            if r.per_try_timeout.is_some_and(|d| d.0.is_zero()) {
                return err("resilience.retry.per_try_timeout", "must be > 0".into());
            }
        }
        if let Some(b) = &self.resilience.breaker {
            b.config(0)?;
        }
        if let Some(o) = &self.resilience.outlier {
            o.config()?;
        }
        if let Some(st) = &self.streams {
            st.validate()?;
        }
        if let Some(f) = &self.fleet {
            f.validate(&self.backends)?;
        }
        if let Some(a) = &self.resilience.adaptive_concurrency {
            a.config()?;
        }
        if let Some(s) = &self.resilience.slow_start {
            s.config()?;
        }
        resource::validate(&self.resources, &self.backends)?;
        membership::validate(&self.backends)?;
        if let Some(c) = &self.capacity {
            c.resolve(self.own_load(), !self.load.is_open())?;
        }
        self.validate_tuning()?;
        if let Some(p) = self.resilience.panic_threshold
            && !(0.0..=100.0).contains(&p)
        {
            return err(
                "resilience.panic_threshold",
                format!("{p} is not a percentage in 0..=100 (0 turns panic routing off)"),
            );
        }
        Ok(())
    }

    /// Checks every `[picker.NAME]`: a known picker, fields it reads,
    /// values the library takes.
    pub fn validate_tuning(&self) -> Result<(), (String, String)> {
        for (name, list) in &self.tuning {
            let p: PickerName = name.parse().map_err(|e| (format!("picker.{name}"), e))?;
            for t in list {
                t.validate(p)?;
            }
        }
        Ok(())
    }

    /// The most users active at any time.
    pub fn max_vus(&self) -> u32 {
        self.load
            .stages
            .iter()
            .map(|s| s.vus)
            .fold(self.load.vus, u32::max)
    }

    /// The scenario's own load, as `--find-capacity` steps it: its most
    /// users (closed loop), or its arrivals per second (open loop; 0 when
    /// a utilization cannot be resolved).
    pub fn own_load(&self) -> f64 {
        match self.load.open(&self.backends, None) {
            Ok(Some(o)) => o.rate,
            Ok(None) => f64::from(self.max_vus()),
            Err(_) => 0.0,
        }
    }

    /// Whether `picker` sees the backends' weights.
    pub fn weighted(&self, picker: PickerName) -> bool {
        self.weights_for
            .as_ref()
            .is_none_or(|list| list.contains(&picker))
    }

    /// The tracking modes each picker runs with.
    pub fn tracking(&self) -> Vec<Tracking> {
        self.streams
            .as_ref()
            .map_or_else(Streams::default_tracking, |s| s.tracking.clone())
    }

    /// Whether anything changes during a run (events, stages or
    /// slowdowns): then the chart draws latency over time.
    pub fn has_events(&self) -> bool {
        !self.load.stages.is_empty()
            || self.backends.iter().any(|b| {
                !b.events.is_empty()
                    || b.slowdown.is_some()
                    || b.join.is_some()
                    || b.leave.is_some()
            })
    }
}
