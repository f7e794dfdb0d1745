//! Exponential backoff with full jitter.

use std::time::Duration;

use crate::error::{ConfigError, check_positive};

/// Default base of the backoff: 25 ms, Envoy's `retry_back_off.base_interval`.
pub const DEFAULT_BASE: Duration = Duration::from_millis(25);

/// Default cap of the backoff: 250 ms, Envoy's default max interval (10 ×
/// base): long enough to let a blip pass, short enough for an RPC deadline.
pub const DEFAULT_CAP: Duration = Duration::from_millis(250);

/// Exponential backoff with AWS's "full jitter": before retry `n` (0 for the
/// first retry) sleep a uniformly random time in `[0, min(cap, base · 2ⁿ)]`.
///
/// Full jitter spreads a burst of clients that failed together over the
/// whole interval, which beats both no jitter and "equal jitter" at
/// de-synchronising them (Brooker, "Exponential Backoff And Jitter", 2015).
///
/// ```
/// use std::time::Duration;
/// use tower_lb::retry::Backoff;
///
/// # fn main() -> Result<(), tower_lb::ConfigError> {
/// let b = Backoff::new(Duration::from_millis(25), Duration::from_millis(250));
/// b.validate()?;
/// assert_eq!(b.max_delay(0), Duration::from_millis(25));
/// assert_eq!(b.max_delay(3), Duration::from_millis(200));
/// assert_eq!(b.max_delay(4), Duration::from_millis(250));
/// assert!(b.delay(2) <= Duration::from_millis(100));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
}

impl Default for Backoff {
    /// [`DEFAULT_BASE`] and [`DEFAULT_CAP`].
    fn default() -> Self {
        Self {
            base: DEFAULT_BASE,
            cap: DEFAULT_CAP,
        }
    }
}

impl Backoff {
    /// Backoff growing from `base`, doubling per retry, never above `cap`.
    /// The retry layer's `build` checks it (see [`validate`](Self::validate)).
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self { base, cap }
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// `backoff.base` must be > 0; `backoff.cap` must be ≥ base and at most
    /// one hour.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_positive("backoff.base", self.base)?;
        if self.cap < self.base || self.cap > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "backoff.cap",
                self.cap,
                "a duration ≥ backoff.base and at most one hour",
            ));
        }
        Ok(())
    }

    /// The upper end of the draw before retry `retry`: `min(cap, base · 2ⁿ)`.
    pub fn max_delay(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A random delay before retry `retry`, uniform in `[0, max_delay(retry)]`.
    pub fn delay(&self, retry: u32) -> Duration {
        self.delay_from(retry, fastrand::u64(..))
    }

    /// The delay for retry `retry` given a random `u64` (uniform draws give a
    /// uniform delay): deterministic, for simulations and tests.
    pub fn delay_from(&self, retry: u32, random: u64) -> Duration {
        let max = crate::time::nanos(self.max_delay(retry));
        // Multiply-shift maps 0..2^64 onto 0..=max without bias worth noting.
        let ns = (u128::from(random) * (u128::from(max) + 1)) >> 64;
        Duration::from_nanos(ns as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn draws_stay_within_full_jitter_range(
            base_ms in 1u64..1_000,
            extra_ms in 0u64..10_000,
            retry in 0u32..100,
            random in any::<u64>(),
        ) {
            let base = Duration::from_millis(base_ms);
            let cap = base + Duration::from_millis(extra_ms);
            let b = Backoff::new(base, cap);
            let exp = base.saturating_mul(2u32.saturating_pow(retry));
            let max = cap.min(exp);
            prop_assert_eq!(b.max_delay(retry), max);
            prop_assert!(b.delay_from(retry, random) <= max);
            prop_assert!(b.delay(retry) <= max);
        }
    }

    #[test]
    fn draw_extremes_reach_both_ends() {
        let b = Backoff::default();
        assert_eq!(b.delay_from(0, 0), Duration::ZERO);
        assert_eq!(b.delay_from(0, u64::MAX), DEFAULT_BASE);
        assert_eq!(b.delay_from(10, u64::MAX), DEFAULT_CAP);
    }

    #[test]
    fn config_errors() {
        let ms = Duration::from_millis;
        assert_eq!(
            Backoff::new(Duration::ZERO, ms(1))
                .validate()
                .unwrap_err()
                .field(),
            "backoff.base"
        );
        assert_eq!(
            Backoff::new(ms(10), ms(9)).validate().unwrap_err().field(),
            "backoff.cap"
        );
        assert_eq!(
            Backoff::new(ms(10), Duration::from_secs(3601))
                .validate()
                .unwrap_err()
                .field(),
            "backoff.cap"
        );
    }
}
