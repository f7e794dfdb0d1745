//! The open wait: exponential backoff with jitter between a base and a cap.

use std::time::Duration;

use super::config::Jitter;
use crate::rng::unit;

/// The wait of the `k`-th consecutive open (`k = 0` first), given a random
/// `r`. See [`Jitter`] for the rule; the result always lies in
/// `[base, cap]` (the builder guarantees `0 < base ≤ cap`).
pub(crate) fn open_wait(base: Duration, cap: Duration, jitter: Jitter, k: u32, r: u64) -> Duration {
    let base_ns = base.as_nanos() as f64;
    let cap_ns = cap.as_nanos() as f64;
    // 2^k overflows to +inf for large k; `min` then gives the cap.
    let ceiling = |e: u32| (base_ns * 2f64.powi(e.min(2048) as i32)).min(cap_ns);
    let ns = match jitter {
        Jitter::None => ceiling(k),
        Jitter::Full | Jitter::Equal => {
            let hi = ceiling(k.saturating_add(1));
            let lo = match jitter {
                Jitter::Equal => (hi / 2.0).max(base_ns),
                _ => base_ns,
            };
            lo + (hi - lo) * unit(r)
        }
    };
    // `as` saturates; clamp again so rounding never leaves the bounds.
    Duration::from_nanos(ns as u64).clamp(base, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn no_jitter_doubles_up_to_the_cap() {
        let waits: Vec<u64> = (0..8)
            .map(|k| open_wait(S, 20 * S, Jitter::None, k, 0).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 20, 20, 20]);
        assert_eq!(open_wait(S, 20 * S, Jitter::None, u32::MAX, 0), 20 * S);
    }

    #[test]
    fn jitter_stays_within_its_band() {
        for k in 0..10 {
            let hi = (S * 2u32.pow(k + 1)).min(100 * S);
            for r in [0, u64::MAX / 3, u64::MAX / 2, u64::MAX] {
                let full = open_wait(S, 100 * S, Jitter::Full, k, r);
                assert!(full >= S && full <= hi, "k={k} full={full:?}");
                let equal = open_wait(S, 100 * S, Jitter::Equal, k, r);
                assert!(
                    equal >= (hi / 2).max(S) && equal <= hi,
                    "k={k} equal={equal:?}"
                );
            }
        }
        // r = 0 lands on the lower bound, r = MAX on (about) the upper one.
        assert_eq!(open_wait(S, 100 * S, Jitter::Equal, 3, 0), 8 * S);
        assert_eq!(open_wait(S, 100 * S, Jitter::Full, 3, 0), S);
    }

    proptest::proptest! {
        /// For any base ≤ cap, attempt and random draw, the wait lies in
        /// `[base, cap]`, and without jitter it never shrinks as `k` grows.
        #[test]
        fn waits_stay_between_base_and_cap(
            base_ms in 1u64..100_000,
            extra_ms in 0u64..1_000_000,
            k in 0u32..200,
            r: u64,
        ) {
            let base = Duration::from_millis(base_ms);
            let cap = base + Duration::from_millis(extra_ms);
            for jitter in [Jitter::None, Jitter::Full, Jitter::Equal] {
                let w = open_wait(base, cap, jitter, k, r);
                proptest::prop_assert!(w >= base && w <= cap, "{jitter:?}: {w:?}");
            }
            let (a, b) = (open_wait(base, cap, Jitter::None, k, r), open_wait(base, cap, Jitter::None, k + 1, r));
            proptest::prop_assert!(a <= b);
        }
    }
}
