//! The sampling core the latency- and load-aware pickers share: weighted
//! draws in O(1) (an alias table per snapshot), `k` distinct
//! weighted-random candidates, and the best of them.

use super::Pool;
use crate::rng::{below, unit};

/// Most candidates a sampling picker may draw per pick.
pub const MAX_CHOICES: usize = 16;

/// The available endpoint with the lowest score among `k` distinct
/// weighted-random candidates; a full scan when the pool has at most `k`
/// endpoints or when no candidate drawn was available. Scores are fractions
/// `num / den` (`den > 0`), compared by cross-multiplication, so a sampled
/// pick divides nothing.
#[inline]
pub(crate) fn best_of_fraction<T>(
    cx: &Pool<'_, T>,
    k: usize,
    mut score: impl FnMut(usize) -> (f64, f64),
) -> Option<usize> {
    let n = cx.len();
    if n <= k {
        return cx.min_by_score(|i| {
            let (num, den) = score(i);
            num / den
        });
    }
    let mut idx = [0usize; MAX_CHOICES];
    let drawn = draw(cx, k, &mut idx);
    // Unavailable candidates get an infinite cost.
    let (mut best, mut best_num, mut best_den) = (usize::MAX, f64::INFINITY, 1.0);
    for &i in &idx[..drawn] {
        let (num, den) = if cx.is_available(i) {
            score(i)
        } else {
            (f64::INFINITY, 1.0)
        };
        if num * best_den < best_num * den {
            (best, best_num, best_den) = (i, num, den);
        }
    }
    if best != usize::MAX {
        return Some(best);
    }
    // No candidate drawn was available: look at every endpoint.
    cx.min_by_score(|i| {
        let (num, den) = score(i);
        num / den
    })
}

/// The candidates of one sampled pick, into `out`: every endpoint when the
/// pool has at most `k`, else `k` distinct weighted-random ones (uniform
/// draws without rejection for equal weights; for unequal weights, alias
/// draws with a bounded number of redraws of duplicates, so fewer than
/// `k` may come back). Returns how many.
#[inline]
pub(crate) fn draw<T>(cx: &Pool<'_, T>, k: usize, out: &mut [usize; MAX_CHOICES]) -> usize {
    let n = cx.len();
    let k = k.min(MAX_CHOICES);
    if n <= k {
        // Every endpoint, from a random one on: ties (equal costs) go to
        // the first, which must not always be the same endpoint.
        let first = if n > 1 { cx.random_index() } else { 0 };
        for (j, slot) in out.iter_mut().enumerate().take(n) {
            *slot = (first + j) % n;
        }
        return n;
    }
    if draws_uniformly(cx, k) {
        draw_uniform(cx, &mut out[..k]);
        return k;
    }
    let mut drawn = 0;
    for _ in 0..2 * k + 2 {
        if drawn == k {
            break;
        }
        let i = cx.sample();
        if out[..drawn].contains(&i) {
            continue;
        }
        out[drawn] = i;
        drawn += 1;
    }
    drawn
}

/// Whether a pick of `k` candidates from `cx` draws them by
/// [`draw_uniform`]: more than `k` endpoints, of equal weights (and few
/// enough for its 21-bit draws).
#[inline(always)]
pub(crate) fn draws_uniformly<T>(cx: &Pool<'_, T>, k: usize) -> bool {
    let n = cx.len();
    n > k && cx.is_uniform() && n < 1 << 16
}

/// `out.len()` distinct uniform-random endpoints of `cx`, which has more
/// (see [`draws_uniformly`]). A caller whose `out` is an array of a
/// constant length gets these loops unrolled.
#[inline(always)]
pub(crate) fn draw_uniform<T>(cx: &Pool<'_, T>, out: &mut [usize]) {
    let n = cx.len();
    let mut draw = Draws::new(cx);
    // The draws so far, ascending. Without a branch on the drawn
    // values, which the CPU cannot predict: the j-th draw steps over
    // every earlier one at or below it (in ascending order, so once
    // one is above, all later ones are), then sinks into place by
    // compare-exchanges.
    let mut taken = [0usize; MAX_CHOICES];
    for (j, slot) in out.iter_mut().enumerate() {
        let mut i = draw.below(cx, n - j);
        for &t in &taken[..j] {
            i += usize::from(t <= i);
        }
        taken[j] = i;
        for q in (0..j).rev() {
            let (a, b) = (taken[q], taken[q + 1]);
            (taken[q], taken[q + 1]) = (a.min(b), a.max(b));
        }
        *slot = i;
    }
}

/// A cost's bits with the candidate's slot in the low 4 bits (a relative
/// change below 1e-14): non-negative floats order like their bits, so an
/// integer `min` (a conditional move) picks the cheapest.
#[inline(always)]
pub(crate) fn cost_key(cost: f64, slot: usize) -> u64 {
    (cost.to_bits() & !15) | slot as u64
}

/// The candidate with the smallest key, unless it cost infinity (or NaN):
/// then none was available.
#[inline(always)]
pub(crate) fn key_winner(best: u64, candidates: &[usize]) -> Option<usize> {
    (best >> 52 < 0x7FF).then(|| candidates[(best & 15) as usize])
}

/// Bits of one random number used per uniform draw: three draws per `u64`,
/// with a bias of at most `n / 2^21` (0.05% at 1,024 endpoints).
const LANE_BITS: u32 = 21;

/// Uniform candidate indices for one pick: three come from each random
/// number.
struct Draws {
    bits: u64,
    lanes: u32,
}

impl Draws {
    fn new<T>(_: &Pool<'_, T>) -> Self {
        Self { bits: 0, lanes: 0 }
    }

    /// A uniform index in `0..n` (`n < 2^16`).
    #[inline(always)]
    fn below<T>(&mut self, cx: &Pool<'_, T>, n: usize) -> usize {
        if self.lanes == 0 {
            self.bits = cx.random();
            self.lanes = 64 / LANE_BITS;
        }
        let lane = self.bits & ((1 << LANE_BITS) - 1);
        self.bits >>= LANE_BITS;
        self.lanes -= 1;
        ((lane * n as u64) >> LANE_BITS) as usize
    }
}

/// O(1) weighted sampling (Walker/Vose alias method), rebuilt with each
/// endpoint-set snapshot. Equal weights skip the table entirely.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    /// Empty when all weights are equal: sample uniformly.
    prob: Box<[f64]>,
    alias: Box<[u32]>,
}

impl Sampler {
    pub(crate) fn new(weights: &[f64]) -> Self {
        let n = weights.len();
        let uniform = weights.windows(2).all(|w| w[0] == w[1]);
        if n == 0 || uniform {
            return Self::default();
        }
        let total: f64 = weights.iter().sum();
        let mut prob: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut alias = vec![0u32; n];
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| prob[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            alias[s] = l as u32;
            prob[l] -= 1.0 - prob[s];
            if prob[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // Leftovers are 1 up to rounding.
        for i in small.into_iter().chain(large) {
            prob[i] = 1.0;
        }
        Self {
            prob: prob.into(),
            alias: alias.into(),
        }
    }

    /// True when every weight is equal (draws are uniform).
    #[inline]
    pub(crate) fn is_uniform(&self) -> bool {
        self.prob.is_empty()
    }

    /// One index in `0..n`, drawn with probability proportional to its weight.
    #[inline]
    pub(crate) fn sample(&self, n: usize, r: u64) -> usize {
        let i = below(r, n);
        if self.prob.is_empty() {
            return i;
        }
        // The low bits picked the column; reuse the rest for the coin flip.
        if unit(r.rotate_left(32)) < self.prob[i] {
            i
        } else {
            self.alias[i] as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngSource;

    #[test]
    fn shares_follow_weights() {
        let w = [6.0, 3.0, 2.0, 1.0];
        let s = Sampler::new(&w);
        let rng = RngSource::new(Some(7));
        let mut counts = [0usize; 4];
        let n = 200_000;
        for _ in 0..n {
            counts[s.sample(4, rng.next_u64())] += 1;
        }
        for (c, w) in counts.iter().zip(w) {
            let share = *c as f64 / n as f64;
            assert!((share - w / 12.0).abs() < 0.01, "{counts:?}");
        }
    }
}
