//! `e^(−Δt/τ)`, fast: the weight every read and sample computes.

/// Weight of the old estimate after `dt_ns` with time constant τ, given as
/// `inv_tau_ns = 1/τ` (a multiplication instead of a division): `exp(−Δt/τ)`.
///
/// Busy endpoints are read and written every few microseconds against a τ of
/// seconds, so Δt/τ is tiny on the hot path; there a cubic Taylor polynomial
/// (below 1/64, error under 3e-9) replaces the libm call, which cost about a
/// fifth of a pick. One polynomial for the whole range, not a linear case
/// below 1/4096 beside it: which of the two applied depended on how long
/// ago each candidate was last sampled, a branch the CPU could not predict
/// (the default `Balance` went from 165-170 to 154 ns per request when it
/// went).
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
/// read on every pick that draws it; libm's `exp` cost a third of the pick.
///
/// The polynomial is evaluated by Estrin's scheme (pairs of terms, then
/// powers of `t²`), four dependent steps instead of Horner's twelve, with
/// every coefficient a multiplication: in a benchmark where a third of the
/// candidates are idle endpoints (starved by a latency spike for up to a
/// minute), Horner's chain and its one division were a quarter of the pick.
#[inline]
pub(super) fn exp_neg(x: f64) -> f64 {
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
