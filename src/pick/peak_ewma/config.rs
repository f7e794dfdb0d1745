//! Building a [`PeakEwma`]: its defaults, its settings, and the checks
//! `Balance::build` runs on them. Apart from the pick, so that the file a
//! request runs through is the pick alone.

use std::sync::Arc;
use std::time::Duration;

use super::{DEFAULT_CHOICES, DEFAULT_SPREAD_FACTOR, DEFAULT_UTILIZATION_FADE, PeakEwma};
use crate::error::{ConfigError, check_positive};
use crate::model::EndpointState;
use crate::pick::{MAX_CHOICES, Picker};

impl Default for PeakEwma {
    fn default() -> Self {
        Self {
            choices: DEFAULT_CHOICES,
            spread_factor: DEFAULT_SPREAD_FACTOR,
            learn_parallelism: true,
            utilization: false,
            fade: DEFAULT_UTILIZATION_FADE,
            fade_rate: 1.0 / DEFAULT_UTILIZATION_FADE.as_nanos() as f64,
        }
    }
}

impl PeakEwma {
    /// The default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Classic two-choice peak-EWMA (tower, Finagle): `choices = 2`, no
    /// spread term, no learned parallelism. Weights and the failure term
    /// still apply; see the type's docs for exactly how it differs.
    pub fn classic() -> Self {
        Self {
            choices: 2,
            spread_factor: 0.0,
            learn_parallelism: false,
            ..Self::default()
        }
    }

    /// Whether to divide the in-flight count by the endpoint's learned
    /// parallelism (default true) or treat every endpoint as serving one
    /// request at a time (Finagle's formula).
    pub fn learn_parallelism(mut self, on: bool) -> Self {
        self.learn_parallelism = on;
        self
    }

    /// Whether endpoints' reported utilization raises their cost (default
    /// false; see [Server-reported utilization](#server-reported-utilization)).
    pub fn utilization(mut self, on: bool) -> Self {
        self.utilization = on;
        self
    }

    /// How fast reported utilization fades with the report's age: the time
    /// constant of `e^(−age/fade)`, > 0 and at most a year (checked by
    /// `Balance::build`, field `utilization_fade`). Default 1 s.
    pub fn utilization_fade(mut self, fade: Duration) -> Self {
        self.fade = fade;
        self.fade_rate = 1.0 / fade.as_nanos().max(1) as f64;
        self
    }

    /// Candidates compared per pick, `1..=16` (checked by `Balance::build`,
    /// field `choices`). Pools no larger than this are scanned in full.
    pub fn choices(mut self, n: usize) -> Self {
        self.choices = n;
        self
    }

    /// Weight of the spread term, a finite number `>= 0` (checked by
    /// `Balance::build`, field `spread_factor`).
    pub fn spread_factor(mut self, k: f64) -> Self {
        self.spread_factor = k;
        self
    }
}

impl Picker for PeakEwma {
    type Table = ();
    fn name(&self) -> &'static str {
        if self.utilization {
            "peak_ewma_orca"
        } else if self.choices == 2 && self.spread_factor == 0.0 && !self.learn_parallelism {
            "p2c_peak_ewma"
        } else {
            "peak_ewma"
        }
    }
    fn table(&self, _: &[Arc<EndpointState>]) {}

    fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_CHOICES).contains(&self.choices) {
            return Err(ConfigError::new(
                "choices",
                self.choices,
                "an integer in 1..=16",
            ));
        }
        let k = self.spread_factor;
        if !(k.is_finite() && k >= 0.0) {
            return Err(ConfigError::new("spread_factor", k, "a finite number >= 0"));
        }
        check_positive("utilization_fade", self.fade)?;
        Ok(())
    }
}
