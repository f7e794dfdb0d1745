//! Priority levels: Envoy's priority load and its per-level panic rule, in
//! whole percent as Envoy computes them.

/// One level's endpoints: how many, and how many are healthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Count {
    pub(crate) healthy: usize,
    pub(crate) total: usize,
}

impl Count {
    /// The healthy share in percent (0 for an empty level).
    pub(crate) fn healthy_percent(self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            100.0 * self.healthy as f64 / self.total as f64
        }
    }

    /// Envoy's health score: `min(100, ⌊factor% · healthy / total⌋)`.
    pub(crate) fn score(self, factor_percent: u64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let scaled = u128::from(factor_percent) * self.healthy as u128 / self.total as u128;
        scaled.min(100) as u64
    }
}

/// The share of traffic each level takes, and whether it is in panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loads {
    /// Whole percent per level; they sum to 100 (for at least one level).
    pub(crate) load: Vec<u32>,
    /// Per level: picks in it ignore ejection and failing checks.
    pub(crate) panic: Vec<bool>,
}

/// Envoy's priority load over `levels` (highest priority first), with the
/// overprovisioning factor in percent (140 for 1.4) and the panic
/// threshold in percent. See the [module docs](super) for the rule.
pub(crate) fn loads(levels: &[Count], factor_percent: u64, threshold: f64) -> Loads {
    let n = levels.len();
    let mut out = Loads {
        load: vec![0; n],
        panic: vec![false; n],
    };
    if n == 0 {
        return out;
    }
    let scores: Vec<u64> = levels.iter().map(|c| c.score(factor_percent)).collect();
    let normalized = scores.iter().sum::<u64>().min(100);
    if threshold <= 0.0 && normalized == 0 {
        // Nothing is healthy and panic is off: P0 takes the traffic (and
        // finds no endpoint to take it).
        out.load[0] = 100;
        return out;
    }
    // With enough healthy endpoints over all levels, no level panics (a
    // single level has no other to lean on: the census rule).
    let short = n == 1 || normalized < 100;
    for (p, c) in out.panic.iter_mut().zip(levels) {
        *p = short && c.healthy_percent() < threshold;
    }
    if out.panic.iter().all(|&p| p) {
        // Total panic: by endpoint counts, whatever their health.
        let total: usize = levels.iter().map(|c| c.total).sum();
        spread(&mut out.load, |i| {
            (100 * levels[i].total as u128 / total.max(1) as u128) as u64
        });
        return out;
    }
    spread(&mut out.load, |i| scores[i] * 100 / normalized);
    out
}

/// Gives each level `min(left, want(i))` in order, and what rounding left
/// over to the first level that wanted any (Envoy's `distributeLoad`).
fn spread(load: &mut [u32], want: impl Fn(usize) -> u64) {
    let mut left = 100u64;
    let mut first = None;
    for (i, l) in load.iter_mut().enumerate() {
        let w = want(i);
        if first.is_none() && w > 0 {
            first = Some(i);
        }
        let take = w.min(left);
        *l = take as u32;
        left -= take;
    }
    if let Some(f) = first.or(Some(0)).filter(|_| left > 0) {
        load[f] += left as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(healthy: usize, total: usize) -> Count {
        Count { healthy, total }
    }

    /// Loads for levels given as healthy percent of 100 endpoints each,
    /// with the panic threshold at 50% (Envoy's panic-threshold tables).
    fn at(healthy: &[usize]) -> Loads {
        at_threshold(healthy, 50.0)
    }

    fn at_threshold(healthy: &[usize], threshold: f64) -> Loads {
        let levels: Vec<Count> = healthy.iter().map(|&h| level(h, 100)).collect();
        loads(&levels, 140, threshold)
    }

    #[test]
    fn envoy_two_levels_p1_fully_healthy() {
        // Envoy's priority-levels table (P=1 100% healthy).
        for (p0, want) in [
            (100, [100, 0]),
            (72, [100, 0]),
            (71, [99, 1]),
            (50, [70, 30]),
            (25, [35, 65]),
            (0, [0, 100]),
        ] {
            let l = at(&[p0, 100]);
            assert_eq!(l.load, want, "P0 {p0}% healthy");
            assert_eq!(l.panic, [false, false], "P0 {p0}%: total health is 100");
        }
    }

    #[test]
    fn envoy_two_degraded_levels_normalize() {
        for (h, want, panic) in [
            ([100, 100], [100, 0], [false, false]),
            ([72, 72], [100, 0], [false, false]),
            ([71, 71], [99, 1], [false, false]),
            ([50, 60], [70, 30], [false, false]),
            ([25, 100], [35, 65], [false, false]),
            // {35, 35} normalized by 70: 50/50; both under 50% healthy.
            ([25, 25], [50, 50], [true, true]),
            // {7, 91} normalized by 98: 7/92 plus the rounding to P0.
            ([5, 65], [8, 92], [true, false]),
        ] {
            let l = at(&h);
            assert_eq!(l.load, want, "{h:?}");
            assert_eq!(l.panic, panic, "{h:?}");
        }
    }

    #[test]
    fn envoy_three_levels_without_panic() {
        // Envoy's priority-levels tables leave panic aside: threshold 0.
        for (h, want) in [
            ([100, 100, 100], [100, 0, 0]),
            ([72, 72, 100], [100, 0, 0]),
            ([71, 71, 100], [99, 1, 0]),
            ([50, 50, 100], [70, 30, 0]),
            ([25, 100, 100], [35, 65, 0]),
            ([25, 25, 100], [35, 35, 30]),
            // {35, 35, 28} normalized by 98: 35/35/28, rounding to P0.
            ([25, 25, 20], [37, 35, 28]),
        ] {
            assert_eq!(at_threshold(&h, 0.0).load, want, "{h:?}");
        }
        // With the default threshold every level of the last row panics:
        // total panic splits by endpoint counts.
        let l = at(&[25, 25, 20]);
        assert_eq!((l.load, l.panic), (vec![34, 33, 33], vec![true; 3]));
    }

    #[test]
    fn everything_down() {
        // Panic on: total panic, by endpoint counts.
        let l = loads(&[level(0, 3), level(0, 1)], 140, 50.0);
        assert_eq!((l.load, l.panic), (vec![75, 25], vec![true, true]));
        // Panic off: P0 takes it all, nothing panics.
        let l = loads(&[level(0, 3), level(0, 1)], 140, 0.0);
        assert_eq!((l.load, l.panic), (vec![100, 0], vec![false, false]));
    }

    #[test]
    fn one_level_panics_below_the_threshold() {
        assert_eq!(loads(&[level(4, 10)], 140, 50.0).panic, [true]);
        assert_eq!(loads(&[level(5, 10)], 140, 50.0).panic, [false]);
        // The census rule, also above 100/factor %.
        assert_eq!(loads(&[level(3, 4)], 140, 80.0).panic, [true]);
        assert_eq!(loads(&[level(4, 4)], 140, 100.0).panic, [false]);
    }

    #[test]
    fn levels_with_enough_health_between_them_never_panic() {
        // P0 10% healthy, P1 fully healthy: P1 absorbs, nobody panics.
        let l = loads(&[level(1, 10), level(10, 10)], 140, 50.0);
        assert_eq!((l.load, l.panic), (vec![14, 86], vec![false, false]));
    }

    #[test]
    fn loads_always_sum_to_100() {
        for a in 0..=10 {
            for b in 0..=4 {
                let l = loads(&[level(a, 10), level(b, 4)], 140, 50.0);
                assert_eq!(l.load.iter().sum::<u32>(), 100, "{a}/10, {b}/4");
            }
        }
    }
}
