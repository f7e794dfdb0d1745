//! The success-rate rule (Envoy, gRPC A50), plus an ejection threshold.

use super::rule::{Gate, GateFields, Sample, gate_setters, worst_first};
use crate::error::ConfigError;

/// A host is a success-rate outlier below `mean − 1.9 σ` of the pool
/// (Envoy's `success_rate_stdev_factor` 1900 / 1000, gRPC A50).
pub const DEFAULT_SUCCESS_RATE_STDEV_FACTOR: f64 = 1.9;
/// Hosts with enough volume needed before success rate is judged: 5 (Envoy).
pub const DEFAULT_SUCCESS_RATE_MINIMUM_HOSTS: u32 = 5;
/// Requests per interval a host needs to be judged on success rate: 100 (Envoy).
pub const DEFAULT_SUCCESS_RATE_REQUEST_VOLUME: u32 = 100;
/// A host at or above this success rate (percent) is never a success-rate
/// outlier: 99%. Ours (Envoy users asked for it in envoy#18752 and #37723):
/// when the other hosts are nearly perfect, σ is tiny, and with 5 hosts a
/// single host that differs at all sits exactly 2 σ below the mean — past
/// Envoy's 1.9 — so one stray failure in 100 requests would eject a healthy
/// host. 1% is one failure at the default volume, the resolution of the
/// rule; set 100 for Envoy's behaviour, higher nines for high-volume
/// services that must catch 0.1% error rates.
pub const DEFAULT_SUCCESS_RATE_EJECTION_THRESHOLD: f64 = 99.0;

/// The success-rate rule (Envoy, gRPC A50): among hosts with at least
/// `request_volume` requests in the interval — when there are at least
/// `minimum_hosts` of them — eject those whose success rate is below
/// `mean − stdev_factor · σ` and below `ejection_threshold`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuccessRate {
    pub(crate) stdev_factor: f64,
    pub(crate) ejection_threshold: f64,
    pub(crate) gate: Gate,
}

impl Default for SuccessRate {
    fn default() -> Self {
        Self {
            stdev_factor: DEFAULT_SUCCESS_RATE_STDEV_FACTOR,
            ejection_threshold: DEFAULT_SUCCESS_RATE_EJECTION_THRESHOLD,
            gate: Gate::new(
                DEFAULT_SUCCESS_RATE_MINIMUM_HOSTS,
                DEFAULT_SUCCESS_RATE_REQUEST_VOLUME,
            ),
        }
    }
}

gate_setters!(
    SuccessRate,
    hosts: "Hosts with enough volume needed to judge (≥ 2; default 5).",
    volume: "Requests in the interval a host needs to be judged (≥ 1; default 100)."
);

impl SuccessRate {
    /// How many σ below the mean a host must fall (finite, > 0; default 1.9).
    pub fn stdev_factor(mut self, k: f64) -> Self {
        self.stdev_factor = k;
        self
    }
    /// Success rate in percent at or above which a host is never ejected
    /// by this rule (in `(0, 100]`; default 99; 100 is Envoy's behaviour).
    pub fn ejection_threshold(mut self, percent: f64) -> Self {
        self.ejection_threshold = percent;
        self
    }

    pub(crate) fn check(self) -> Result<Self, ConfigError> {
        if !(self.stdev_factor.is_finite() && self.stdev_factor > 0.0) {
            return Err(ConfigError::new(
                "outlier.success_rate.stdev_factor",
                self.stdev_factor,
                "a finite number > 0",
            ));
        }
        let t = self.ejection_threshold;
        if !(t.is_finite() && t > 0.0 && t <= 100.0) {
            return Err(ConfigError::new(
                "outlier.success_rate.ejection_threshold",
                t,
                "a number in (0, 100]",
            ));
        }
        self.gate.check(&GateFields {
            minimum_hosts: "outlier.success_rate.minimum_hosts",
            request_volume: "outlier.success_rate.request_volume",
            enforcing_percent: "outlier.success_rate.enforcing_percent",
            least_hosts: 2,
            least_hosts_allowed: "an integer >= 2",
        })?;
        Ok(self)
    }

    /// Success-rate outliers (Envoy / gRPC A50): over hosts with at least
    /// `request_volume` requests, if there are at least `minimum_hosts`, those
    /// whose success rate is below `mean − stdev_factor · σ` (σ the population
    /// standard deviation) and below `ejection_threshold`, lowest rate first.
    pub(crate) fn outliers(&self, samples: &[Sample]) -> Vec<usize> {
        let Some(judged) = self.gate.judged(samples, Sample::volume) else {
            return Vec::new();
        };
        let rated: Vec<(usize, f64)> = judged
            .into_iter()
            .map(|s| {
                (
                    s.index,
                    100.0 * s.counts.successes as f64 / s.volume() as f64,
                )
            })
            .collect();
        let n = rated.len() as f64;
        let mean = rated.iter().map(|&(_, r)| r).sum::<f64>() / n;
        let var = rated
            .iter()
            .map(|&(_, r)| (r - mean) * (r - mean))
            .sum::<f64>()
            / n;
        let threshold = (mean - self.stdev_factor * var.sqrt()).min(self.ejection_threshold);
        let out: Vec<(usize, f64)> = rated.into_iter().filter(|&(_, r)| r < threshold).collect();
        worst_first(out, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(index: usize, successes: u64, failures: u64) -> Sample {
        Sample::of(index, successes, failures)
    }

    #[test]
    fn success_rate_orders_worst_first_and_spares_the_mean() {
        let mut v: Vec<Sample> = (0..8).map(|i| s(i, 100, 0)).collect();
        v.push(s(8, 50, 50));
        v.push(s(9, 20, 80));
        let out = SuccessRate::default().outliers(&v);
        assert_eq!(out, vec![9]);
        // Equal rates: σ = 0, nobody is below the mean.
        let v: Vec<Sample> = (0..6).map(|i| s(i, 70, 30)).collect();
        assert!(SuccessRate::default().outliers(&v).is_empty());
    }
}
