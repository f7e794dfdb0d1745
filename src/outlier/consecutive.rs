//! The consecutive-failures rules (Envoy's `consecutive_5xx`,
//! `consecutive_gateway_failure` and `consecutive_local_origin_failure`),
//! applied on the response that trips them.

use super::rule::{DEFAULT_ENFORCING_PERCENT, check_percent};
use crate::error::ConfigError;

/// Consecutive failures that eject a host: 5 (Envoy's `consecutive_5xx`).
pub const DEFAULT_CONSECUTIVE_FAILURES: u32 = 5;
/// Consecutive gateway failures that eject a host: 5 (Envoy's
/// `consecutive_gateway_failure`).
pub const DEFAULT_CONSECUTIVE_GATEWAY_FAILURES: u32 = 5;

/// Consecutive local-origin failures (connect failures and timeouts: the
/// host gave no answer at all) that eject a host: 5 (Envoy's
/// `consecutive_local_origin_failure`). On by default, unlike Envoy's
/// (which needs `split_external_local_origin_errors`): a replica that
/// accepts connections and never answers shows only timeouts, and must be
/// ejected after a few of them rather than cost every caller a per-try
/// timeout.
pub const DEFAULT_CONSECUTIVE_LOCAL_ORIGIN_FAILURES: u32 = 5;

/// A consecutive-failures rule: eject a host after `threshold` failures in a
/// row (any success in between resets the count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Consecutive {
    pub(crate) threshold: u32,
    pub(crate) enforcing_percent: u32,
}

impl Consecutive {
    /// Ejects after `threshold` (≥ 1, checked in `build`) failures in a row.
    pub fn new(threshold: u32) -> Self {
        Self {
            threshold,
            enforcing_percent: DEFAULT_ENFORCING_PERCENT,
        }
    }

    /// Share of detections that eject (0..=100, default 100); 0 only counts.
    pub fn enforcing_percent(mut self, percent: u32) -> Self {
        self.enforcing_percent = percent;
        self
    }

    pub(crate) fn check(
        self,
        threshold: &'static str,
        enforcing: &'static str,
    ) -> Result<Self, ConfigError> {
        if self.threshold == 0 {
            return Err(ConfigError::new(
                threshold,
                self.threshold,
                "an integer >= 1",
            ));
        }
        check_percent(enforcing, self.enforcing_percent)?;
        Ok(self)
    }
}
