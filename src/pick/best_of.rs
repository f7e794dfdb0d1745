//! The sampling core the latency- and load-aware pickers share: the best
//! of `k` distinct weighted-random candidates.

use super::Pool;

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
    let k = k.min(MAX_CHOICES);
    let uniform = cx.is_uniform() && n < 1 << 16;
    'sampled: {
        // Unavailable candidates get an infinite cost.
        let (mut best, mut best_num, mut best_den) = (usize::MAX, f64::INFINITY, 1.0);
        let mut consider = |i: usize| {
            let (num, den) = if cx.is_available(i) {
                score(i)
            } else {
                (f64::INFINITY, 1.0)
            };
            if num * best_den < best_num * den {
                (best, best_num, best_den) = (i, num, den);
            }
        };
        if uniform {
            // Equal weights: k distinct indices without rejection. The j-th
            // draw is uniform over the n − j indices not drawn yet, mapped
            // past the earlier ones (kept sorted).
            let mut draw = Draws::new(cx);
            let mut taken = [0usize; MAX_CHOICES];
            for j in 0..k {
                let mut i = draw.below(cx, n - j);
                let mut pos = 0;
                while pos < j && taken[pos] <= i {
                    i += 1;
                    pos += 1;
                }
                taken.copy_within(pos..j, pos + 1);
                taken[pos] = i;
                consider(i);
            }
        } else {
            let mut seen = [0usize; MAX_CHOICES];
            let mut drawn = 0;
            // Duplicates are redrawn a bounded number of times: heavy
            // weights make them likely, and a repeated candidate adds nothing.
            for _ in 0..2 * k + 2 {
                if drawn == k {
                    break;
                }
                let i = cx.sample();
                if seen[..drawn].contains(&i) {
                    continue;
                }
                seen[drawn] = i;
                drawn += 1;
                consider(i);
            }
        }
        if best == usize::MAX {
            break 'sampled;
        }
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
    if cx.is_uniform() && n < 1 << 16 {
        let mut draw = Draws::new(cx);
        let mut taken = [0usize; MAX_CHOICES];
        for (j, slot) in out.iter_mut().enumerate().take(k) {
            let mut i = draw.below(cx, n - j);
            let mut pos = 0;
            while pos < j && taken[pos] <= i {
                i += 1;
                pos += 1;
            }
            taken.copy_within(pos..j, pos + 1);
            taken[pos] = i;
            *slot = i;
        }
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
