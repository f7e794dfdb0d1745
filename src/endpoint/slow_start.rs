//! Slow start: a newly added endpoint's effective weight ramps up over a
//! window, using Envoy's formula
//! `weight · max(min_weight_percent, (t / window)^(1 / aggression))`.

use std::time::Duration;

use crate::error::{ConfigError, check_positive};

/// Envoy's default aggression: a linear ramp.
pub const DEFAULT_AGGRESSION: f64 = 1.0;
/// Envoy's default floor: a new endpoint starts at 10% of its weight.
pub const DEFAULT_MIN_WEIGHT_PERCENT: f64 = 10.0;

/// Slow-start configuration (off unless set on the builder).
///
/// Applies to endpoints inserted after the balancer was built; the initial
/// endpoints serve at full weight from the start. Each endpoint ramps on its
/// own clock, so one endpoint joining never restarts another's ramp.
///
/// ```
/// use std::time::Duration;
/// use tower_lb::SlowStart;
/// let ss = SlowStart::new(Duration::from_secs(30)).aggression(2.0);
/// assert!(ss.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowStart {
    pub(crate) window: Duration,
    pub(crate) aggression: f64,
    pub(crate) min_weight_percent: f64,
}

impl SlowStart {
    /// A ramp over `window` (> 0, at most one year) with Envoy's default
    /// aggression and floor. Setters never fail; `Balance::build` checks
    /// them (fields `slow_start.window`, `slow_start.aggression`,
    /// `slow_start.min_weight_percent`).
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            aggression: DEFAULT_AGGRESSION,
            min_weight_percent: DEFAULT_MIN_WEIGHT_PERCENT,
        }
    }

    /// How fast the ramp rises (finite, > 0): 1 is linear, larger rises
    /// faster early on.
    pub fn aggression(mut self, a: f64) -> Self {
        self.aggression = a;
        self
    }

    /// The weight a new endpoint starts at, in percent of its full weight
    /// (`0..=100`).
    pub fn min_weight_percent(mut self, p: f64) -> Self {
        self.min_weight_percent = p;
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `slow_start.window`, `slow_start.aggression`
    /// or `slow_start.min_weight_percent`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_positive("slow_start.window", self.window)?;
        let a = self.aggression;
        if !(a.is_finite() && a > 0.0) {
            return Err(ConfigError::new(
                "slow_start.aggression",
                a,
                "a finite number > 0",
            ));
        }
        let p = self.min_weight_percent;
        if !(p.is_finite() && (0.0..=100.0).contains(&p)) {
            return Err(ConfigError::new(
                "slow_start.min_weight_percent",
                p,
                "a number in 0..=100",
            ));
        }
        Ok(())
    }

    /// The weight factor in `[0, 1]` for an endpoint `elapsed_ns` into its ramp.
    #[inline]
    pub(crate) fn factor(&self, elapsed_ns: u64) -> f64 {
        let window = self.window.as_nanos() as f64;
        let t = elapsed_ns as f64;
        if t >= window {
            return 1.0;
        }
        let ramp = (t / window).powf(1.0 / self.aggression);
        ramp.max(self.min_weight_percent / 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_follows_envoy_formula() {
        let ss = SlowStart::new(Duration::from_secs(10));
        assert_eq!(ss.factor(0), 0.1);
        assert!((ss.factor(5_000_000_000) - 0.5).abs() < 1e-9);
        assert_eq!(ss.factor(10_000_000_000), 1.0);
        let ss = ss.aggression(2.0);
        assert!((ss.factor(2_500_000_000) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn bad_values_are_rejected() {
        let field = |s: SlowStart| s.validate().unwrap_err().field();
        assert_eq!(field(SlowStart::new(Duration::ZERO)), "slow_start.window");
        assert_eq!(field(SlowStart::new(Duration::MAX)), "slow_start.window");
        let ss = SlowStart::new(Duration::from_secs(1));
        assert_eq!(field(ss.aggression(0.0)), "slow_start.aggression");
        assert_eq!(field(ss.aggression(f64::NAN)), "slow_start.aggression");
        assert_eq!(
            field(ss.min_weight_percent(101.0)),
            "slow_start.min_weight_percent"
        );
    }
}
