//! `[resilience]`: the layers a scenario puts above and inside its
//! balancers (retry, breakers, ejection, panic threshold).

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

use super::units::{Dur, parse_duration};

/// `[resilience]`: layers above the balancer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resilience {
    /// `[resilience.retry]`: the retry layer.
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// `[resilience.breaker]`: a circuit breaker per endpoint, inside each
    /// balancer.
    #[serde(default)]
    pub breaker: Option<BreakerSpec>,
    /// `[resilience.outlier]`: outlier ejection inside each balancer.
    #[serde(default)]
    pub outlier: Option<OutlierSpec>,
    /// Below this percentage of healthy endpoints the balancer routes over
    /// all of them (library default 50).
    #[serde(default)]
    pub panic_threshold: Option<f64>,
    /// `[resilience.adaptive_concurrency]`: adaptive per-endpoint limits
    /// inside each balancer.
    #[serde(default)]
    pub adaptive_concurrency: Option<AdaptiveSpec>,
    /// `[resilience.slow_start]`: endpoints that join ramp up their weight.
    #[serde(default)]
    pub slow_start: Option<SlowStartSpec>,
}

/// `[resilience.slow_start]`: the library's `SlowStart` (Envoy's ramp);
/// fields absent keep its defaults.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowStartSpec {
    /// The ramp's length.
    pub window: Dur,
    /// How fast the ramp rises (1: linear).
    #[serde(default)]
    pub aggression: Option<f64>,
    /// Where it starts, in percent of the full weight.
    #[serde(default)]
    pub min_weight_percent: Option<f64>,
    /// Run every picker twice, without slow start and with it
    /// (`name+slow_start`); `false`: with it only.
    #[serde(default)]
    pub compare: bool,
}

impl SlowStartSpec {
    /// The library configuration, checked as `Balance::build` checks it.
    pub fn config(&self) -> Result<tower_lb::SlowStart, (String, String)> {
        let mut s = tower_lb::SlowStart::new(self.window.0);
        if let Some(a) = self.aggression {
            s = s.aggression(a);
        }
        if let Some(p) = self.min_weight_percent {
            s = s.min_weight_percent(p);
        }
        s.validate().map_err(|e| {
            let field = e.field().trim_start_matches("slow_start.");
            (
                format!("resilience.slow_start.{field}"),
                format!("{}: must be {}", e.value(), e.allowed()),
            )
        })?;
        Ok(s)
    }
}

/// `[resilience.adaptive_concurrency]`: each field absent keeps the
/// library's default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdaptiveSpec {
    /// Latency over the floor still counted as unqueued (a factor).
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// Relative growth per update while latency stays near the floor.
    #[serde(default)]
    pub growth: Option<f64>,
    /// How far each update moves the limit toward its target.
    #[serde(default)]
    pub smoothing: Option<f64>,
    /// A new endpoint's limit.
    #[serde(default)]
    pub initial_limit: Option<usize>,
    /// The lowest limit.
    #[serde(default)]
    pub min_limit: Option<usize>,
    /// The highest limit.
    #[serde(default)]
    pub max_limit: Option<usize>,
    /// Run every picker twice, without limits and with them (`name+limits`).
    #[serde(default)]
    pub compare: bool,
}

impl AdaptiveSpec {
    /// The library configuration.
    pub fn config(&self) -> Result<tower_lb::endpoint::AdaptiveConcurrency, (String, String)> {
        let mut c = tower_lb::endpoint::AdaptiveConcurrency::new();
        if let Some(x) = self.tolerance {
            c = c.tolerance(x);
        }
        if let Some(x) = self.growth {
            c = c.growth(x);
        }
        if let Some(x) = self.smoothing {
            c = c.smoothing(x);
        }
        if let Some(x) = self.initial_limit {
            c = c.initial_limit(x);
        }
        if let Some(x) = self.min_limit {
            c = c.min_limit(x);
        }
        if let Some(x) = self.max_limit {
            c = c.max_limit(x);
        }
        c.validate().map_err(|e| {
            let field = e.field().trim_start_matches("adaptive_concurrency.");
            config_error("resilience.adaptive_concurrency", &[(e.field(), field)], &e)
        })?;
        Ok(c)
    }
}

/// `[resilience.breaker]`: each field absent keeps the library's default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerSpec {
    /// Failure rate (percent of the window) at which the breaker opens.
    #[serde(default)]
    pub failure_rate: Option<f64>,
    /// Calls the window must hold before the rate counts.
    #[serde(default)]
    pub minimum_calls: Option<u32>,
    /// The sliding window: a number of calls (`20`) or a time (`"10s"`).
    #[serde(default)]
    pub window: Option<WindowSpec>,
    /// First (shortest) open wait.
    #[serde(default)]
    pub open_wait: Option<Dur>,
    /// Longest open wait (each reopening doubles the wait up to this).
    #[serde(default)]
    pub open_wait_cap: Option<Dur>,
    /// Probe calls admitted while half-open.
    #[serde(default)]
    pub half_open_probes: Option<u32>,
}

/// A breaker window: the last `n` calls or the calls of the last `d`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WindowSpec {
    /// Count window.
    Calls(i64),
    /// Time window.
    Time(Duration),
}

impl<'de> Deserialize<'de> for WindowSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = WindowSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number of calls (20) or a duration (\"10s\")")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<WindowSpec, E> {
                Ok(WindowSpec::Calls(n))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<WindowSpec, E> {
                parse_duration(s).map(WindowSpec::Time).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// `[resilience.outlier]`: each field absent keeps the library's default
/// (the other ejection rules keep theirs too).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutlierSpec {
    /// Eject after this many hard failures in a row.
    #[serde(default)]
    pub consecutive_failures: Option<u32>,
    /// Length of a first ejection (later ones grow).
    #[serde(default)]
    pub base_ejection_time: Option<Dur>,
    /// Most of the pool ejected at once, in percent.
    #[serde(default)]
    pub max_ejection_percent: Option<u32>,
    /// How often the interval rules run.
    #[serde(default)]
    pub interval: Option<Dur>,
}

/// Library field names and the scenario fields they come from.
const BREAKER_FIELDS: &[(&str, &str)] = &[
    ("failure_rate_threshold", "failure_rate"),
    ("count_window", "window"),
    ("time_window", "window"),
    ("minimum_calls", "minimum_calls"),
    ("open_wait", "open_wait"),
    ("open_wait_cap", "open_wait_cap"),
    ("half_open_probes", "half_open_probes"),
];

const OUTLIER_FIELDS: &[(&str, &str)] = &[
    (
        "outlier.consecutive_failures.threshold",
        "consecutive_failures",
    ),
    ("outlier.base_ejection_time", "base_ejection_time"),
    ("outlier.max_ejection_time", "base_ejection_time"),
    ("outlier.max_ejection_percent", "max_ejection_percent"),
    ("outlier.interval", "interval"),
];

/// A library [`ConfigError`](tower_lb::ConfigError) as the lab's
/// `(field, problem)`, the field named as in the scenario file.
fn config_error(
    section: &str,
    names: &[(&str, &str)],
    e: &tower_lb::ConfigError,
) -> (String, String) {
    let field = names
        .iter()
        .find(|(lib, _)| *lib == e.field())
        .map_or(e.field(), |(_, ours)| ours);
    (
        format!("{section}.{field}"),
        format!("{}: must be {}", e.value(), e.allowed()),
    )
}

impl BreakerSpec {
    /// The library configuration, jitter seeded with `seed`.
    pub fn config(
        &self,
        seed: u64,
    ) -> Result<tower_lb::breaker::CircuitBreakerConfig, (String, String)> {
        let mut b = tower_lb::breaker::CircuitBreakerConfig::builder().seed(seed);
        if let Some(x) = self.failure_rate {
            b = b.failure_rate_threshold(x);
        }
        match self.window {
            Some(WindowSpec::Calls(n)) => {
                let n = usize::try_from(n).map_err(|_| {
                    (
                        "resilience.breaker.window".to_string(),
                        format!("{n} is not a number of calls >= 1"),
                    )
                })?;
                b = b.count_window(n);
            }
            Some(WindowSpec::Time(d)) => b = b.time_window(d),
            None => {}
        }
        if let Some(x) = self.minimum_calls {
            b = b.minimum_calls(x);
        }
        if let Some(x) = self.open_wait {
            b = b.open_wait(x.0);
            if self.open_wait_cap.is_none()
                && x.0 > tower_lb::breaker::config::DEFAULT_OPEN_WAIT_CAP
            {
                b = b.open_wait_cap(x.0);
            }
        }
        if let Some(x) = self.open_wait_cap {
            b = b.open_wait_cap(x.0);
        }
        if let Some(x) = self.half_open_probes {
            b = b.half_open_probes(x);
        }
        b.build()
            .map_err(|e| config_error("resilience.breaker", BREAKER_FIELDS, &e))
    }
}

impl OutlierSpec {
    /// The library configuration.
    pub fn config(&self) -> Result<tower_lb::outlier::OutlierDetection, (String, String)> {
        let mut b = tower_lb::outlier::OutlierDetection::builder();
        if let Some(n) = self.consecutive_failures {
            b = b.consecutive_failures(Some(tower_lb::outlier::Consecutive::new(n)));
        }
        if let Some(d) = self.base_ejection_time {
            b = b.base_ejection_time(d.0);
            if d.0 > tower_lb::outlier::DEFAULT_MAX_EJECTION_TIME {
                b = b.max_ejection_time(d.0);
            }
        }
        if let Some(p) = self.max_ejection_percent {
            b = b.max_ejection_percent(p);
        }
        if let Some(d) = self.interval {
            b = b.interval(d.0);
        }
        b.build()
            .map_err(|e| config_error("resilience.outlier", OUTLIER_FIELDS, &e))
    }
}

/// `[resilience.retry]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Attempts including the first (default 3).
    #[serde(default = "three")]
    pub max_attempts: u32,
    /// Timeout of each attempt.
    #[serde(default)]
    pub per_try_timeout: Option<Dur>,
    /// Replays non-idempotent requests (POST) too
    /// (`retry::Builder::retry_non_idempotent`); default off, as the
    /// library's.
    #[serde(default)]
    pub non_idempotent: bool,
}

fn three() -> u32 {
    3
}
