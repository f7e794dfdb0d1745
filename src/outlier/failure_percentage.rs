//! The failure-percentage rule (Envoy, gRPC A50).

use super::rule::{Gate, GateFields, Sample, check_percent, gate_setters, worst_first};
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
    pub(crate) gate: Gate,
}

impl Default for FailurePercentage {
    fn default() -> Self {
        Self {
            threshold: DEFAULT_FAILURE_PERCENTAGE_THRESHOLD,
            gate: Gate::new(
                DEFAULT_FAILURE_PERCENTAGE_MINIMUM_HOSTS,
                DEFAULT_FAILURE_PERCENTAGE_REQUEST_VOLUME,
            ),
        }
    }
}

gate_setters!(
    FailurePercentage,
    hosts: "Hosts with enough volume needed to judge (≥ 1; default 5).",
    volume: "Requests in the interval a host needs to be judged (≥ 1; default 50)."
);

impl FailurePercentage {
    /// Failure percentage a host must exceed (0..=100; default 85).
    pub fn threshold(mut self, percent: u32) -> Self {
        self.threshold = percent;
        self
    }

    pub(crate) fn check(self) -> Result<Self, ConfigError> {
        check_percent("outlier.failure_percentage.threshold", self.threshold)?;
        self.gate.check(&GateFields {
            minimum_hosts: "outlier.failure_percentage.minimum_hosts",
            request_volume: "outlier.failure_percentage.request_volume",
            enforcing_percent: "outlier.failure_percentage.enforcing_percent",
            least_hosts: 1,
            least_hosts_allowed: "an integer >= 1",
        })?;
        Ok(self)
    }

    /// Failure-percentage outliers (Envoy / gRPC A50): over hosts with at least
    /// `request_volume` requests, if there are at least `minimum_hosts`, those
    /// whose failure percentage is above `threshold`, highest first.
    pub(crate) fn outliers(&self, samples: &[Sample]) -> Vec<usize> {
        let Some(qualified) = self.gate.judged(samples, Sample::volume) else {
            return Vec::new();
        };
        let out: Vec<(usize, f64)> = qualified
            .into_iter()
            .filter(|s| {
                u128::from(s.counts.failures) * 100
                    > u128::from(self.threshold) * u128::from(s.volume())
            })
            .map(|s| (s.index, s.counts.failures as f64 / s.volume() as f64))
            .collect();
        worst_first(out, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(index: usize, successes: u64, failures: u64) -> Sample {
        Sample::of(index, successes, failures)
    }

    #[test]
    fn failure_percentage_is_strictly_above_threshold() {
        let mut v: Vec<Sample> = (0..4).map(|i| s(i, 100, 0)).collect();
        v.push(s(4, 15, 85)); // exactly 85%: not above
        v.push(s(5, 14, 86));
        assert_eq!(FailurePercentage::default().outliers(&v), vec![5]);
    }
}
