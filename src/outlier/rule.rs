//! What every outlier rule shares: the interval sample it judges and the
//! validation of its settings.

use crate::error::ConfigError;

/// Share of detections that actually eject: 100% (Envoy's `enforcing_*`).
pub const DEFAULT_ENFORCING_PERCENT: u32 = 100;

/// The counts one interval collected for one host (taken and reset by the
/// detector's evaluation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) successes: u64,
    pub(crate) failures: u64,
    pub(crate) latency_sum_ns: u64,
    pub(crate) latency_samples: u64,
}

/// One host's counts for the interval just ended, with its pool index: what
/// the interval rules judge.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) index: usize,
    pub(crate) counts: Counts,
}

impl Sample {
    /// Requests that count for the rates: successes and failures.
    pub(crate) fn volume(&self) -> u64 {
        self.counts.successes.saturating_add(self.counts.failures)
    }
}

pub(crate) fn check_percent(field: &'static str, p: u32) -> Result<u32, ConfigError> {
    if p <= 100 {
        Ok(p)
    } else {
        Err(ConfigError::new(field, p, "an integer in 0..=100"))
    }
}

pub(crate) fn check_min(
    field: &'static str,
    v: u32,
    min: u32,
    allowed: &'static str,
) -> Result<u32, ConfigError> {
    if v >= min {
        Ok(v)
    } else {
        Err(ConfigError::new(field, v, allowed))
    }
}
