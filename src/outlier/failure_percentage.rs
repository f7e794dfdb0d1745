//! The failure-percentage rule (Envoy, gRPC A50).

use super::rule::Sample;
use super::rule::{DEFAULT_ENFORCING_PERCENT, check_min, check_percent};
use crate::error::ConfigError;

/// Failure percentage above which a host is ejected: 85% (Envoy's
/// `failure_percentage_threshold`, gRPC A50).
pub const DEFAULT_FAILURE_PERCENTAGE_THRESHOLD: u32 = 85;
/// Hosts with enough volume needed before failure percentage is judged: 5 (Envoy).
pub const DEFAULT_FAILURE_PERCENTAGE_MINIMUM_HOSTS: u32 = 5;
/// Requests per interval a host needs to be judged on failure percentage: 50 (Envoy).
pub const DEFAULT_FAILURE_PERCENTAGE_REQUEST_VOLUME: u32 = 50;

/// The failure-percentage rule (Envoy, gRPC A50): among hosts with at least
/// `request_volume` requests in the interval — when there are at least
/// `minimum_hosts` of them — eject those whose failure percentage is above
/// `threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailurePercentage {
    pub(crate) threshold: u32,
    pub(crate) minimum_hosts: u32,
    pub(crate) request_volume: u32,
    pub(crate) enforcing_percent: u32,
}

impl Default for FailurePercentage {
    fn default() -> Self {
        Self {
            threshold: DEFAULT_FAILURE_PERCENTAGE_THRESHOLD,
            minimum_hosts: DEFAULT_FAILURE_PERCENTAGE_MINIMUM_HOSTS,
            request_volume: DEFAULT_FAILURE_PERCENTAGE_REQUEST_VOLUME,
            enforcing_percent: DEFAULT_ENFORCING_PERCENT,
        }
    }
}

impl FailurePercentage {
    /// Failure percentage a host must exceed (0..=100; default 85).
    pub fn threshold(mut self, percent: u32) -> Self {
        self.threshold = percent;
        self
    }
    /// Hosts with enough volume needed to judge (≥ 1; default 5).
    pub fn minimum_hosts(mut self, n: u32) -> Self {
        self.minimum_hosts = n;
        self
    }
    /// Requests in the interval a host needs to be judged (≥ 1; default 50).
    pub fn request_volume(mut self, n: u32) -> Self {
        self.request_volume = n;
        self
    }
    /// Share of detections that eject (0..=100, default 100).
    pub fn enforcing_percent(mut self, percent: u32) -> Self {
        self.enforcing_percent = percent;
        self
    }

    pub(crate) fn check(self) -> Result<Self, ConfigError> {
        check_percent("outlier.failure_percentage.threshold", self.threshold)?;
        check_min(
            "outlier.failure_percentage.minimum_hosts",
            self.minimum_hosts,
            1,
            "an integer >= 1",
        )?;
        check_min(
            "outlier.failure_percentage.request_volume",
            self.request_volume,
            1,
            "an integer >= 1",
        )?;
        check_percent(
            "outlier.failure_percentage.enforcing_percent",
            self.enforcing_percent,
        )?;
        Ok(self)
    }

    /// Failure-percentage outliers (Envoy / gRPC A50): over hosts with at least
    /// `request_volume` requests, if there are at least `minimum_hosts`, those
    /// whose failure percentage is above `threshold`, highest first.
    pub(crate) fn outliers(&self, samples: &[Sample]) -> Vec<usize> {
        let qualified: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.volume() >= u64::from(self.request_volume))
            .collect();
        if qualified.len() < self.minimum_hosts as usize {
            return Vec::new();
        }
        let mut out: Vec<(usize, f64)> = qualified
            .into_iter()
            .filter(|s| {
                u128::from(s.counts.failures) * 100
                    > u128::from(self.threshold) * u128::from(s.volume())
            })
            .map(|s| (s.index, s.counts.failures as f64 / s.volume() as f64))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out.into_iter().map(|(i, _)| i).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outlier::rule::Counts;

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
    fn failure_percentage_is_strictly_above_threshold() {
        let mut v: Vec<Sample> = (0..4).map(|i| s(i, 100, 0)).collect();
        v.push(s(4, 15, 85)); // exactly 85%: not above
        v.push(s(5, 14, 86));
        assert_eq!(FailurePercentage::default().outliers(&v), vec![5]);
    }
}
