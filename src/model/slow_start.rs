//! Slow start: a newly added endpoint's effective weight ramps up over a
//! window, using Envoy's formula
//! `weight · max(min_weight_percent, (t / window)^(1 / aggression))`.

use std::time::Duration;

use crate::error::{ConfigError, check_positive};

/// Envoy's default aggression: a linear ramp.
pub const DEFAULT_AGGRESSION: f64 = 1.0;
/// Envoy's default floor: a new endpoint starts at 10% of its weight.
pub const DEFAULT_MIN_WEIGHT_PERCENT: f64 = 10.0;

/// The longest [`SlowStart::memory`]: one year.
pub const MAX_MEMORY: Duration = Duration::from_secs(365 * 24 * 3600);

/// Slow-start configuration (off unless set on the builder).
///
/// Applies to endpoints inserted after the balancer was built; the initial
/// endpoints serve at full weight from the start. Each endpoint ramps on its
/// own clock, so one endpoint joining never restarts another's ramp.
///
/// **Memory.** An endpoint removed and inserted again under the same key
/// within [`memory`](Self::memory) (default: the window) resumes its ramp
/// where it left it: one that had reached full weight comes back at full
/// weight, one removed 3 s into a 10 s ramp comes back 3 s into it. So an
/// endpoint that flaps (a DNS answer that drops and re-adds it, a readiness
/// probe that flickers) still reaches full weight, and one that is really
/// new, or gone for longer than the memory, ramps from the start. Keys are
/// remembered by their hash (64-bit XXH3 of the key).
///
/// **Which pickers ramp.** The ramp scales the weight each picker reads:
/// `WeightedRoundRobin` and `Random` skip a ramping endpoint's turn or draw
/// with probability `1 − factor`, so its share follows
/// `weight · factor` (Envoy's rule for round robin); `LeastInFlight`,
/// `P2cLeastInFlight`, `PeakEwma` and `LeastResponseTime` divide their
/// score by the ramped weight (Envoy's least-request rule: a new endpoint
/// looks `1/factor` times as loaded); the hash pickers' fallback ramps as
/// the picker it is. Plain `RoundRobin` takes no weights (use
/// `WeightedRoundRobin` to ramp), and the hash pickers' rings and tables
/// keep every endpoint's full weight: ramping them would move keys between
/// endpoints at every step of the ramp, the affinity they exist for.
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
    /// How long a removed endpoint's ramp position is kept; `None`: the
    /// window.
    pub(crate) memory: Option<Duration>,
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
            memory: None,
        }
    }

    /// How long a removed endpoint's ramp position is remembered (default:
    /// the window; zero forgets at once, so every insertion ramps from the
    /// start; at most one year).
    pub fn memory(mut self, memory: Duration) -> Self {
        self.memory = Some(memory);
        self
    }

    /// The memory in effect.
    pub(crate) fn memory_ns(&self) -> u64 {
        crate::time::nanos(self.memory.unwrap_or(self.window))
    }

    /// The window in nanoseconds.
    pub(crate) fn window_ns(&self) -> u64 {
        crate::time::nanos(self.window)
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
        if let Some(m) = self.memory
            && m > MAX_MEMORY
        {
            return Err(ConfigError::new("slow_start.memory", m, "at most one year"));
        }
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

/// Ramp positions of removed endpoints, by key hash, for [`SlowStart::memory`].
#[derive(Debug, Default)]
pub(crate) struct RampMemory {
    /// key hash → (how far into its ramp it was, when it was removed), ns.
    removed: std::collections::HashMap<u64, (u64, u64)>,
}

impl RampMemory {
    /// Remembers that the endpoint with `key_hash` left `elapsed_ns` into
    /// its ramp at `now_ns`.
    pub(crate) fn forget_old_and_remember(
        &mut self,
        ss: &SlowStart,
        key_hash: u64,
        elapsed_ns: u64,
        now_ns: u64,
    ) {
        self.forget_old(ss, now_ns);
        if ss.memory_ns() > 0 {
            self.removed.insert(key_hash, (elapsed_ns, now_ns));
        }
    }

    /// Where the ramp of an endpoint inserted at `now_ns` starts: resumed
    /// when its key left within the memory, else now.
    pub(crate) fn ramp_start(&mut self, ss: &SlowStart, key_hash: u64, now_ns: u64) -> u64 {
        self.forget_old(ss, now_ns);
        match self.removed.remove(&key_hash) {
            Some((elapsed, _)) => now_ns.saturating_sub(elapsed),
            None => now_ns,
        }
    }

    fn forget_old(&mut self, ss: &SlowStart, now_ns: u64) {
        let memory = ss.memory_ns();
        self.removed
            .retain(|_, &mut (_, at)| now_ns.saturating_sub(at) <= memory);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.removed.len()
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
    fn memory_resumes_a_ramp_and_forgets_after_its_time() {
        let ss = SlowStart::new(Duration::from_secs(10));
        let s = 1_000_000_000u64;
        let mut m = RampMemory::default();
        // Left 3 s into its ramp at t = 20 s; back at 25 s: resumes at 3 s.
        m.forget_old_and_remember(&ss, 7, 3 * s, 20 * s);
        assert_eq!(m.ramp_start(&ss, 7, 25 * s), 22 * s);
        // Taken: a second insertion starts afresh.
        assert_eq!(m.ramp_start(&ss, 7, 26 * s), 26 * s);
        // Gone for longer than the memory (the window): starts afresh.
        m.forget_old_and_remember(&ss, 8, 10 * s, 30 * s);
        assert_eq!(m.ramp_start(&ss, 8, 41 * s), 41 * s);
        assert_eq!(m.len(), 0);
        // No memory at all.
        let none = ss.memory(Duration::ZERO);
        m.forget_old_and_remember(&none, 9, 5 * s, 50 * s);
        assert_eq!(m.ramp_start(&none, 9, 50 * s), 50 * s);
    }

    #[test]
    fn bad_values_are_rejected() {
        let field = |s: SlowStart| s.validate().unwrap_err().field();
        assert_eq!(field(SlowStart::new(Duration::ZERO)), "slow_start.window");
        assert_eq!(field(SlowStart::new(Duration::MAX)), "slow_start.window");
        let ss = SlowStart::new(Duration::from_secs(1));
        assert_eq!(field(ss.aggression(0.0)), "slow_start.aggression");
        assert_eq!(field(ss.memory(Duration::MAX)), "slow_start.memory");
        assert!(ss.memory(Duration::ZERO).validate().is_ok());
        assert_eq!(field(ss.aggression(f64::NAN)), "slow_start.aggression");
        assert_eq!(
            field(ss.min_weight_percent(101.0)),
            "slow_start.min_weight_percent"
        );
    }
}
