//! O(1) weighted sampling (Walker/Vose alias method), rebuilt with each
//! endpoint-set snapshot. Equal weights skip the table entirely.

use crate::rng::{below, unit};

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
