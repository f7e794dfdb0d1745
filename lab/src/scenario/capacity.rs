//! `[capacity]`: how `--find-capacity` raises the load (users in a closed
//! loop, arrivals per second in an open one) and when a step fails.
//!
//! The defaults are the example SLO of k6's thresholds guide
//! (grafana.com/docs/k6/latest/using-k6/thresholds): "less than 1% of
//! requests return an error" and "99% of requests have a response time
//! below 400ms".

use std::time::Duration;

use serde::Deserialize;

use super::units::Dur;

/// Default p99 target (k6's thresholds guide: p(99) < 400 ms).
pub const DEFAULT_P99: Duration = Duration::from_millis(400);
/// Default error limit (k6's thresholds guide: `http_req_failed` rate < 1%).
pub const DEFAULT_ERRORS: f64 = 0.01;
/// Default coarse steps before giving up (the load reaches `start +
/// 19 · step`).
pub const DEFAULT_MAX_STEPS: u32 = 20;
/// Default bisection rounds between the last good and the first bad step:
/// three halve the step to an eighth.
pub const DEFAULT_BISECT: u32 = 3;
/// The most coarse steps.
pub const MAX_STEPS: u32 = 100;
/// The most bisection rounds (2^-10 of a step is finer than a run measures).
pub const MAX_BISECT: u32 = 10;

/// `[capacity]`; every field has a default, so `--find-capacity` works on
/// any scenario.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacitySpec {
    /// A step holds while its p99 stays at or below this (default 400 ms).
    #[serde(default)]
    pub p99: Option<Dur>,
    /// ... and its error rate at or below this share (default 0.01).
    #[serde(default)]
    pub errors: Option<f64>,
    /// The first load: users (closed loop) or arrivals per second (open
    /// loop). Default: the step.
    #[serde(default)]
    pub start: Option<f64>,
    /// The coarse step, in the same unit. Default: a quarter of the
    /// scenario's own load (its most users, or its arrival rate), rounded
    /// to a whole number (at least 1).
    #[serde(default)]
    pub step: Option<f64>,
    /// Coarse steps at most (1..=100, default 20).
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// Bisection rounds after the first failing step (0..=10, default 3).
    #[serde(default)]
    pub bisect: Option<u32>,
}

/// `[capacity]` resolved against the scenario's load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// p99 target.
    pub p99: Duration,
    /// Error limit (a share).
    pub errors: f64,
    /// First load.
    pub start: f64,
    /// Coarse step.
    pub step: f64,
    /// Coarse steps at most.
    pub max_steps: u32,
    /// Bisection rounds.
    pub bisect: u32,
    /// Users (closed loop): loads are rounded to whole users.
    pub users: bool,
}

impl CapacitySpec {
    /// The search for a scenario whose own load is `load` (users, or
    /// arrivals per second when `!users`). Errors name the field.
    pub fn resolve(&self, load: f64, users: bool) -> Result<Capacity, (String, String)> {
        let f = |x: &str| format!("capacity.{x}");
        let p99 = self.p99.map_or(DEFAULT_P99, |d| d.0);
        if p99.is_zero() {
            return Err((f("p99"), "must be > 0".into()));
        }
        let errors = self.errors.unwrap_or(DEFAULT_ERRORS);
        if !(errors.is_finite() && (0.0..1.0).contains(&errors)) {
            return Err((f("errors"), format!("{errors} is not a share in [0, 1)")));
        }
        // Whole users, or whole arrivals per second: loads read as counts.
        let step = self.step.unwrap_or((load / 4.0).round().max(1.0));
        let start = self.start.unwrap_or(step);
        let max = if users { 100_000.0 } else { 1e7 };
        for (name, v) in [("step", step), ("start", start)] {
            if !(v.is_finite() && v > 0.0 && v <= max) {
                return Err((f(name), format!("{v} is not a load in (0, {max}]")));
            }
        }
        if users && (step.fract() != 0.0 || start.fract() != 0.0) {
            return Err((f("step"), "a closed loop steps in whole users".into()));
        }
        let max_steps = self.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
        if !(1..=MAX_STEPS).contains(&max_steps) {
            return Err((
                f("max_steps"),
                format!("{max_steps} is not in 1..={MAX_STEPS}"),
            ));
        }
        if start + step * f64::from(max_steps - 1) > max {
            return Err((f("max_steps"), format!("the last step's load passes {max}")));
        }
        let bisect = self.bisect.unwrap_or(DEFAULT_BISECT);
        if bisect > MAX_BISECT {
            return Err((f("bisect"), format!("{bisect} is not in 0..={MAX_BISECT}")));
        }
        Ok(Capacity {
            p99,
            errors,
            start,
            step,
            max_steps,
            bisect,
            users,
        })
    }
}
