//! Time arithmetic that never panics: every `Instant + Duration` and every
//! duration-to-nanoseconds conversion in the crate goes through here, with
//! `Epoch`, which turns the clock's readings into nanoseconds since a
//! fixed instant on the request path, and `decay`, the weight `e^(−Δt/τ)`
//! every latency estimate applies over the time since its last sample.
//!
//! Configured durations are bounded when a builder validates them (see
//! [`MAX_DURATION`]); these helpers make the arithmetic safe anyway, so that
//! a clock near its end or a bound missed somewhere degrades to "very far in
//! the future" instead of a panic on the request path. Only the standard
//! library's public API is used: no reading of an `Instant`'s private
//! layout, whatever it would save.

use std::time::Duration;

use tokio::time::Instant;

/// The longest duration any setting of this crate accepts: one year. Longer
/// timeouts, waits and ejections mean "never" in a running service; the
/// bound keeps every deadline representable on every platform's clock.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// A duration in nanoseconds, saturating at `u64::MAX` (584 years).
///
/// Seconds and nanoseconds apart rather than `Duration::as_nanos`: no
/// 128-bit arithmetic on the request path, which converts two readings per
/// call.
#[inline(always)]
pub(crate) fn nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// `now + d`, or the latest instant the clock can represent near it when
/// that overflows (then `now + MAX_DURATION`, else `now`).
#[inline]
pub(crate) fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(MAX_DURATION))
        .unwrap_or(now)
}

/// A fixed instant, and the readings of the clock after it as nanoseconds
/// since it: what the endpoint model and the breakers store their times as
/// (one word, in an atomic).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Epoch {
    at: Instant,
}

impl Epoch {
    /// The epoch `at`.
    pub(crate) fn new(at: Instant) -> Self {
        Self { at }
    }

    /// The epoch itself.
    #[cfg(test)]
    pub(crate) fn instant(&self) -> Instant {
        self.at
    }

    /// The instant `ns` nanoseconds after the epoch (saturating): the
    /// inverse of [`nanos`](Self::nanos) for instants after the epoch.
    pub(crate) fn at(&self, ns: u64) -> Instant {
        after(self.at, Duration::from_nanos(ns))
    }

    /// Nanoseconds from the epoch to `t` (0 before it; saturating).
    #[inline(always)]
    pub(crate) fn nanos(&self, t: Instant) -> u64 {
        nanos(t.saturating_duration_since(self.at))
    }
}

/// `now - start`, or zero when `start` is later: the retry layer measures
/// every attempt with it.
#[inline]
pub(crate) fn elapsed(start: Instant, now: Instant) -> Duration {
    now.saturating_duration_since(start)
}

/// Weight of the old estimate after `dt_ns` with time constant τ, given as
/// `inv_tau_ns = 1/τ` (a multiplication instead of a division): `exp(−Δt/τ)`.
///
/// Busy endpoints are read and written every few microseconds against a τ of
/// seconds, so Δt/τ is tiny on the hot path; there a cubic Taylor polynomial
/// (below 1/64, error under 3e-9) replaces the libm call. One polynomial for
/// the whole range, not a linear case below 1/4096 beside it: which of the
/// two applied depended on how long ago each candidate was last sampled, a
/// branch the CPU could not predict (measured: see docs/performance.md).
#[inline(always)]
pub(crate) fn decay(dt_ns: u64, inv_tau_ns: f64) -> f64 {
    // Through i64: one instruction on x86-64, where u64 → f64 takes several.
    // Δt never comes near 2^63 ns (292 years).
    let x = dt_ns as i64 as f64 * inv_tau_ns;
    if x < 1.0 / 64.0 {
        1.0 - x * (1.0 - x * (0.5 - x * (1.0 / 6.0)))
    } else {
        exp_neg(x)
    }
}

/// `e^-x` for `x ≥ 0`, within a relative 3e-7: `2^-y` with `y = x·log2 e`,
/// the nearest integer of `y` into the exponent bits and the rest (|t| ≤
/// ln2/2) through a degree-6 Taylor polynomial. An idle endpoint's decay is
/// read on every pick that draws it, where libm's `exp` was a large share
/// of the pick.
///
/// The polynomial is evaluated by Estrin's scheme (pairs of terms, then
/// powers of `t²`), four dependent steps instead of Horner's twelve, with
/// every coefficient a multiplication: where a third of the candidates are
/// idle endpoints (starved by a latency spike for up to a minute), Horner's
/// chain and its one division were a large share of the pick.
#[inline]
pub(crate) fn exp_neg(x: f64) -> f64 {
    let y = x * std::f64::consts::LOG2_E;
    if y >= 1022.0 {
        return 0.0;
    }
    // Truncation of y + 0.5 rounds (y ≥ 0) without a libm call.
    let n = (y + 0.5) as i64;
    let t = (y - n as f64) * std::f64::consts::LN_2;
    // e^-t = Σ (-t)^k / k!, k = 0..=6.
    let t2 = t * t;
    let t4 = t2 * t2;
    let low = (1.0 - t) + t2 * (0.5 - t * (1.0 / 6.0));
    let high = (1.0 / 24.0 - t * (1.0 / 120.0)) + t2 * (1.0 / 720.0);
    let p = low + t4 * high;
    p * f64::from_bits(((1023 - n) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_nanoseconds_agree_with_the_standard_library() {
        let at = Instant::now();
        let epoch = Epoch::new(at);
        for ns in [
            0,
            1,
            999_999_999,
            1_000_000_000,
            1_234_567_891,
            86_400_000_000_123,
        ] {
            let t = at + Duration::from_nanos(ns);
            assert_eq!(epoch.nanos(t), ns);
            assert_eq!(epoch.nanos(t), nanos(t.saturating_duration_since(at)));
        }
        // Before the epoch: zero, as `saturating_duration_since`.
        let later = Epoch::new(at + Duration::from_secs(3));
        assert_eq!(later.nanos(at), 0);
        // A year on: still exact.
        let far = after(at, MAX_DURATION);
        assert_eq!(epoch.nanos(far), nanos(MAX_DURATION));
        assert_eq!(epoch.at(epoch.nanos(far)), far);
    }

    proptest::proptest! {
        /// `nanos` is `as_nanos` wherever that fits a `u64`, and saturates
        /// where it does not.
        #[test]
        fn nanos_is_as_nanos_saturated(secs in proptest::num::u64::ANY, sub in 0u32..1_000_000_000) {
            let d = Duration::new(secs, sub);
            let want = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            proptest::prop_assert_eq!(nanos(d), want);
        }
    }

    proptest::proptest! {
        /// `elapsed` is `saturating_duration_since`, in either order, also
        /// for instants too far for nanoseconds in a `u64`.
        #[test]
        fn elapsed_is_the_standard_librarys_difference(
            a in 0u64..1 << 62,
            b in 0u64..1 << 62,
            far in proptest::bool::ANY,
        ) {
            let at = Instant::now();
            let (start, now) = (at + Duration::from_nanos(a), at + Duration::from_nanos(b));
            // 600 years on: past the nanoseconds a `u64` holds (584 years).
            let now = if far { after(now, MAX_DURATION * 600) } else { now };
            proptest::prop_assert_eq!(elapsed(start, now), now.saturating_duration_since(start));
            proptest::prop_assert_eq!(elapsed(now, start), start.saturating_duration_since(now));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_epoch_follows_a_paused_clock() {
        let epoch = Epoch::new(Instant::now());
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(epoch.nanos(Instant::now()), 1_500_000_000);
    }

    #[test]
    fn decay_matches_exp_on_both_paths() {
        const TAU: f64 = 10e9;
        for x in [
            0.0,
            1e-9,
            1e-4,
            0.01,
            0.015,
            1.0 / 64.0,
            0.02,
            0.5,
            1.0,
            5.0,
            50.0,
        ] {
            let got = decay((x * TAU) as u64, 1.0 / TAU);
            let want = (-x).exp();
            assert!(
                (got - want).abs() <= 3e-7 * want + 1e-9,
                "x={x}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn exp_neg_is_close_everywhere() {
        let mut x = 0.0f64;
        while x < 800.0 {
            let (got, want) = (exp_neg(x), (-x).exp());
            assert!(
                (got - want).abs() <= 3e-7 * want + 1e-300,
                "x={x}: {got} vs {want}"
            );
            x = x * 1.01 + 0.001;
        }
        assert_eq!(exp_neg(1e6), 0.0);
    }

    #[test]
    fn saturates_instead_of_panicking() {
        assert_eq!(nanos(Duration::MAX), u64::MAX);
        assert_eq!(nanos(Duration::from_nanos(7)), 7);
        let now = Instant::now();
        assert!(after(now, Duration::MAX) >= now);
        assert_eq!(
            after(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }
}
