//! The interval rules as pure functions over one interval's counts: which
//! hosts are outliers, worst first. The detector decides what to eject.

use super::config::{FailurePercentage, LatencyOutlier, SuccessRate};
use super::host::Counts;

/// One host's counts for the interval just ended, with its pool index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) index: usize,
    pub(crate) counts: Counts,
}

impl Sample {
    fn volume(&self) -> u64 {
        self.counts.successes.saturating_add(self.counts.failures)
    }
}

/// Success-rate outliers (Envoy / gRPC A50): over hosts with at least
/// `request_volume` requests, if there are at least `minimum_hosts`, those
/// whose success rate is below `mean − stdev_factor · σ` (σ the population
/// standard deviation) and below `ejection_threshold`, lowest rate first.
pub(crate) fn success_rate(rule: &SuccessRate, samples: &[Sample]) -> Vec<usize> {
    let rated: Vec<(usize, f64)> = samples
        .iter()
        .filter(|s| s.volume() >= u64::from(rule.request_volume))
        .map(|s| {
            (
                s.index,
                100.0 * s.counts.successes as f64 / s.volume() as f64,
            )
        })
        .collect();
    if rated.len() < rule.minimum_hosts as usize {
        return Vec::new();
    }
    let n = rated.len() as f64;
    let mean = rated.iter().map(|&(_, r)| r).sum::<f64>() / n;
    let var = rated
        .iter()
        .map(|&(_, r)| (r - mean) * (r - mean))
        .sum::<f64>()
        / n;
    let threshold = (mean - rule.stdev_factor * var.sqrt()).min(rule.ejection_threshold);
    let mut out: Vec<(usize, f64)> = rated.into_iter().filter(|&(_, r)| r < threshold).collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    out.into_iter().map(|(i, _)| i).collect()
}

/// Failure-percentage outliers (Envoy / gRPC A50): over hosts with at least
/// `request_volume` requests, if there are at least `minimum_hosts`, those
/// whose failure percentage is above `threshold`, highest first.
pub(crate) fn failure_percentage(rule: &FailurePercentage, samples: &[Sample]) -> Vec<usize> {
    let qualified: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.volume() >= u64::from(rule.request_volume))
        .collect();
    if qualified.len() < rule.minimum_hosts as usize {
        return Vec::new();
    }
    let mut out: Vec<(usize, f64)> = qualified
        .into_iter()
        .filter(|s| {
            u128::from(s.counts.failures) * 100
                > u128::from(rule.threshold) * u128::from(s.volume())
        })
        .map(|s| (s.index, s.counts.failures as f64 / s.volume() as f64))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out.into_iter().map(|(i, _)| i).collect()
}

/// Latency outliers for this interval: over hosts with at least
/// `request_volume` latency samples, if there are at least `minimum_hosts`,
/// those whose mean latency exceeds `factor ×` the median of the hosts'
/// means, slowest first. `None` when the rule could not judge the pool.
///
/// The median, not the mean, is the reference: the slow host cannot drag
/// it up, and a pool that is slow as a whole has no outlier.
pub(crate) fn latency(rule: &LatencyOutlier, samples: &[Sample]) -> Option<Vec<usize>> {
    let means: Vec<(usize, f64)> = samples
        .iter()
        .filter(|s| s.counts.latency_samples >= u64::from(rule.request_volume))
        .map(|s| {
            (
                s.index,
                s.counts.latency_sum_ns as f64 / s.counts.latency_samples as f64,
            )
        })
        .collect();
    if means.len() < rule.minimum_hosts as usize {
        return None;
    }
    let mut sorted: Vec<f64> = means.iter().map(|&(_, m)| m).collect();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median = if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    };
    if median <= 0.0 {
        return Some(Vec::new());
    }
    let limit = rule.factor * median;
    let mut out: Vec<(usize, f64)> = means.into_iter().filter(|&(_, m)| m > limit).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    Some(out.into_iter().map(|(i, _)| i).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(index: usize, successes: u64, failures: u64) -> Sample {
        Sample {
            index,
            counts: Counts {
                successes,
                failures,
                latency_sum_ns: successes * 1_000,
                latency_samples: successes,
            },
        }
    }

    #[test]
    fn success_rate_orders_worst_first_and_spares_the_mean() {
        let mut v: Vec<Sample> = (0..8).map(|i| s(i, 100, 0)).collect();
        v.push(s(8, 50, 50));
        v.push(s(9, 20, 80));
        let out = success_rate(&SuccessRate::default(), &v);
        assert_eq!(out, vec![9]);
        // Equal rates: σ = 0, nobody is below the mean.
        let v: Vec<Sample> = (0..6).map(|i| s(i, 70, 30)).collect();
        assert!(success_rate(&SuccessRate::default(), &v).is_empty());
    }

    #[test]
    fn failure_percentage_is_strictly_above_threshold() {
        let mut v: Vec<Sample> = (0..4).map(|i| s(i, 100, 0)).collect();
        v.push(s(4, 15, 85)); // exactly 85%: not above
        v.push(s(5, 14, 86));
        assert_eq!(
            failure_percentage(&FailurePercentage::default(), &v),
            vec![5]
        );
    }

    #[test]
    fn latency_median_of_even_pool_is_the_middle_pair_average() {
        let lat = |index, mean: u64| Sample {
            index,
            counts: Counts {
                successes: 100,
                failures: 0,
                latency_sum_ns: mean * 100,
                latency_samples: 100,
            },
        };
        // Means 10, 10, 20, 100: median 15, limit 45.
        let v = vec![lat(0, 10), lat(1, 10), lat(2, 20), lat(3, 100)];
        assert_eq!(latency(&LatencyOutlier::default(), &v), Some(vec![3]));
        assert_eq!(latency(&LatencyOutlier::default(), &v[..2]), None);
    }
}
