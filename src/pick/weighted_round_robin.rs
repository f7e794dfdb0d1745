use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Pick, Picker, Pool};
use crate::model::EndpointState;

/// Weights are quantised to integers with this resolution relative to the
/// largest weight (0.1%), which keeps every share within 0.1 percentage points.
const RESOLUTION: f64 = 1000.0;
/// Upper bound on the schedule length, so huge pools with uneven weights stay
/// at a few MiB.
const MAX_SCHEDULE: u64 = 1 << 20;

/// Smooth weighted round robin.
///
/// Nginx's smooth WRR interleaves endpoints so that none receives a burst
/// longer than its weight requires, but it needs a lock and an O(n) pass per
/// pick. This picker computes the same kind of interleaved schedule once per
/// endpoint-set snapshot (stride scheduling: each endpoint advances by
/// `1/weight`, the smallest virtual time goes next) and then picks with one
/// atomic increment: O(1), lock-free.
///
/// Slow start: a ramping endpoint's turn stands with probability equal to
/// its ramp factor and passes to the next turn otherwise, so its share
/// follows `weight · factor` (see [`SlowStart`](crate::SlowStart)).
#[derive(Debug, Default)]
pub struct WeightedRoundRobin {
    next: AtomicUsize,
}

/// A clone starts its own rotation (the cursor is not shared).
impl Clone for WeightedRoundRobin {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl WeightedRoundRobin {
    /// A new weighted round robin.
    pub fn new() -> Self {
        Self::default()
    }
}

/// The precomputed schedule: a sequence of endpoint indices.
#[derive(Debug)]
pub struct Schedule(Box<[u32]>);

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Schedule {
    fn build(weights: &[f64]) -> Self {
        let max = weights.iter().copied().fold(0.0, f64::max);
        if weights.is_empty() || max <= 0.0 {
            return Schedule(Box::default());
        }
        let total_units = weights.len() as f64 * RESOLUTION;
        let res = if total_units > MAX_SCHEDULE as f64 {
            (MAX_SCHEDULE as f64 / weights.len() as f64).max(1.0)
        } else {
            RESOLUTION
        };
        let mut units: Vec<u64> = weights
            .iter()
            .map(|w| ((w / max) * res).round().max(1.0) as u64)
            .collect();
        let g = units.iter().copied().fold(0, gcd).max(1);
        units.iter_mut().for_each(|u| *u /= g);
        let len: u64 = units.iter().sum();
        // Endpoint i's k-th turn is due at virtual time (k + φ_i) / units[i]:
        // each endpoint's turns are evenly spaced, and merging them by due
        // time interleaves the endpoints. The phases φ_i are spread by the
        // golden ratio so that light endpoints do not all fall due at once
        // (which would bunch the heavy one's turns into a long burst).
        // Times are fixed point; ties go to the lower index.
        let mut order: Vec<(u128, usize)> = Vec::with_capacity(len as usize);
        const SCALE: f64 = (1u64 << 52) as f64;
        for (i, &u) in units.iter().enumerate() {
            let phase = (0.5 + i as f64 * 0.618_033_988_749_895).fract();
            for k in 0..u {
                let t = ((k as f64 + phase) / u as f64 * SCALE) as u128;
                order.push((t, i));
            }
        }
        order.sort_unstable();
        Schedule(order.into_iter().map(|(_, i)| i as u32).collect())
    }

    /// The schedule's length.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the schedule is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Picker for WeightedRoundRobin {
    type Table = Schedule;
    fn name(&self) -> &'static str {
        "weighted_round_robin"
    }
    fn table(&self, endpoints: &[Arc<EndpointState>]) -> Schedule {
        let w: Vec<f64> = endpoints.iter().map(|e| e.weight()).collect();
        Schedule::build(&w)
    }
}

impl<Req> Pick<Req> for WeightedRoundRobin {
    fn pick(&self, _: &Req, cx: &Pool<'_, Schedule>) -> Option<usize> {
        let seq = &cx.table().0;
        if seq.is_empty() || cx.is_empty() {
            return None;
        }
        // Follow the schedule past unavailable endpoints for a while, then
        // fall back to any available endpoint. A ramping endpoint's turn
        // stands with probability its ramp factor; a refused turn is used
        // up (the next pick's position is taken), so the others keep their
        // proportions.
        let mut slot = self.next.fetch_add(1, Ordering::Relaxed);
        let mut refused = None;
        for _ in 0..seq.len().min(2 * cx.len() + 8) {
            let i = seq[slot % seq.len()] as usize;
            if i < cx.len() && cx.is_available(i) {
                if cx.ramp_admits(i) {
                    return Some(i);
                }
                refused.get_or_insert(i);
                slot = self.next.fetch_add(1, Ordering::Relaxed);
            } else {
                slot = slot.wrapping_add(1);
            }
        }
        if refused.is_some() {
            return refused;
        }
        cx.next_available(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::testing::Fixture;

    fn longest_run(seq: &[usize], who: usize) -> usize {
        let (mut best, mut run) = (0, 0);
        for &s in seq.iter().chain(seq.iter()) {
            run = if s == who { run + 1 } else { 0 };
            best = best.max(run);
        }
        best
    }

    #[test]
    fn shares_within_one_percent_over_10k() {
        let w = [6.0, 3.0, 2.0, 1.0];
        let f = Fixture::new(&w);
        let counts = f.counts(&WeightedRoundRobin::new(), 10_000);
        for (c, w) in counts.iter().zip(w) {
            let share = *c as f64 / 10_000.0;
            assert!((share - w / 12.0).abs() <= 0.01, "{counts:?}");
        }
    }

    #[test]
    fn no_burst_longer_than_weights_require() {
        // 6/3/2/1: the heaviest has half the traffic, so it never needs two
        // in a row... except where the stride schedule lines up; allow the
        // bound ceil(w_max / (total - w_max)) + 1.
        let w = [6.0, 3.0, 2.0, 1.0];
        let f = Fixture::new(&w);
        let p = WeightedRoundRobin::new();
        let table = <WeightedRoundRobin as Picker>::table(&p, &f.states);
        let seq: Vec<usize> = (0..table.len())
            .map(|_| Pick::<()>::pick(&p, &(), &f.cx(&table)).unwrap())
            .collect();
        assert!(longest_run(&seq, 0) <= 2, "{seq:?}");
        for who in 1..4 {
            assert_eq!(longest_run(&seq, who), 1, "{seq:?}");
        }
        // 5/1/1 (nginx's example) needs runs of at most 3.
        let f = Fixture::new(&[5.0, 1.0, 1.0]);
        let table = <WeightedRoundRobin as Picker>::table(&p, &f.states);
        let seq: Vec<usize> = table.0.iter().map(|&i| i as usize).collect();
        assert!(longest_run(&seq, 0) <= 3, "{seq:?}");
    }
}
