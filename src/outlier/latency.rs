//! The latency-outlier rule (ours; no Envoy or gRPC equivalent).

use super::rule::{Gate, GateFields, Sample, check_min, gate_setters, worst_first};
use crate::error::ConfigError;

/// A host is a latency outlier when its mean latency over an interval
/// exceeds 3 × the pool's median host mean. Ours (neither Envoy nor gRPC has
/// the rule): replicas on mixed hardware commonly differ by up to 2×; a 3×
/// gap is a sick host (bad disk, GC storm, noisy neighbour), not variance.
pub const DEFAULT_LATENCY_FACTOR: f64 = 3.0;
/// Hosts with enough latency samples needed before the latency rule runs: 3.
/// The median ignores one slow host of three (its breakdown point is 50%),
/// unlike the mean and σ of the success-rate rule, which need 5 hosts; and
/// small pools are where one slow replica hurts most.
pub const DEFAULT_LATENCY_MINIMUM_HOSTS: u32 = 3;
/// Latency samples per interval a host needs to be judged: 50, as Envoy's
/// failure-percentage volume. Load-aware pickers send a slow host less
/// traffic, so this is kept lower than the success-rate volume.
pub const DEFAULT_LATENCY_REQUEST_VOLUME: u32 = 50;
/// Intervals in a row a host must be a latency outlier before ejection: 3
/// (30 s at the default interval), so one GC pause or burst does not eject.
pub const DEFAULT_LATENCY_CONSECUTIVE_INTERVALS: u32 = 3;

/// The latency-outlier rule (ours; Envoy has had the request open since
/// 2016): among hosts with at least `request_volume` latency samples in the
/// interval — when there are at least `minimum_hosts` of them — a host whose
/// mean latency exceeds `factor ×` the median of the hosts' means is an
/// outlier; one that is an outlier for `consecutive_intervals` intervals in a
/// row is ejected.
///
/// Latency samples are the calls that came back: `Success` and
/// `Failure(Slow)`. Hard failures are left to the failure rules (a host that
/// fails fast would otherwise look fast).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyOutlier {
    pub(crate) factor: f64,
    pub(crate) gate: Gate,
    pub(crate) consecutive_intervals: u32,
}

impl Default for LatencyOutlier {
    fn default() -> Self {
        Self {
            factor: DEFAULT_LATENCY_FACTOR,
            gate: Gate::new(
                DEFAULT_LATENCY_MINIMUM_HOSTS,
                DEFAULT_LATENCY_REQUEST_VOLUME,
            ),
            consecutive_intervals: DEFAULT_LATENCY_CONSECUTIVE_INTERVALS,
        }
    }
}

gate_setters!(
    LatencyOutlier,
    hosts: "Hosts with enough samples needed to judge (≥ 3: a median of two is dragged by either; default 3).",
    volume: "Latency samples in the interval a host needs to be judged (≥ 1; default 50)."
);

impl LatencyOutlier {
    /// How many times the pool median a host's mean must exceed (finite,
    /// > 1; default 3).
    pub fn factor(mut self, k: f64) -> Self {
        self.factor = k;
        self
    }
    /// Intervals in a row a host must be an outlier (≥ 1; default 3).
    pub fn consecutive_intervals(mut self, n: u32) -> Self {
        self.consecutive_intervals = n;
        self
    }

    pub(crate) fn check(self) -> Result<Self, ConfigError> {
        if !(self.factor.is_finite() && self.factor > 1.0) {
            return Err(ConfigError::new(
                "outlier.latency.factor",
                self.factor,
                "a finite number > 1",
            ));
        }
        self.gate.check(&GateFields {
            minimum_hosts: "outlier.latency.minimum_hosts",
            request_volume: "outlier.latency.request_volume",
            enforcing_percent: "outlier.latency.enforcing_percent",
            least_hosts: 3,
            least_hosts_allowed: "an integer >= 3",
        })?;
        check_min(
            "outlier.latency.consecutive_intervals",
            self.consecutive_intervals,
            1,
            "an integer >= 1",
        )?;
        Ok(self)
    }

    /// Latency outliers for this interval: over hosts with at least
    /// `request_volume` latency samples, if there are at least `minimum_hosts`,
    /// those whose mean latency exceeds `factor ×` the median of the hosts'
    /// means, slowest first. `None` when the rule could not judge the pool.
    ///
    /// The median, not the mean, is the reference: the slow host cannot drag
    /// it up, and a pool that is slow as a whole has no outlier.
    pub(crate) fn outliers(&self, samples: &[Sample]) -> Option<Vec<usize>> {
        let judged = self.gate.judged(samples, |s| s.counts.latency_samples)?;
        let means: Vec<(usize, f64)> = judged
            .into_iter()
            .map(|s| {
                (
                    s.index,
                    s.counts.latency_sum_ns as f64 / s.counts.latency_samples as f64,
                )
            })
            .collect();
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
        let limit = self.factor * median;
        let out: Vec<(usize, f64)> = means.into_iter().filter(|&(_, m)| m > limit).collect();
        Some(worst_first(out, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outlier::rule::Counts;

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
        assert_eq!(LatencyOutlier::default().outliers(&v), Some(vec![3]));
        assert_eq!(LatencyOutlier::default().outliers(&v[..2]), None);
    }
}
