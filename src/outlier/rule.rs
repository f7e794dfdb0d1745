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

/// Host indices of `scored`, worst first: the highest score first when
/// `high_is_bad`, else the lowest (the order rules eject in, while the
/// pool is under its limit).
pub(crate) fn worst_first(mut scored: Vec<(usize, f64)>, high_is_bad: bool) -> Vec<usize> {
    scored.sort_by(|a, b| {
        if high_is_bad {
            b.1.total_cmp(&a.1)
        } else {
            a.1.total_cmp(&b.1)
        }
    });
    scored.into_iter().map(|(i, _)| i).collect()
}

#[cfg(test)]
impl Sample {
    /// A host's interval with `successes` (1 µs each) and `failures`.
    pub(crate) fn of(index: usize, successes: u64, failures: u64) -> Self {
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
}

/// What every interval rule shares: which hosts it judges (those with at
/// least `request_volume` calls in the interval, when there are at least
/// `minimum_hosts` of them) and how many of its detections eject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gate {
    pub(crate) minimum_hosts: u32,
    pub(crate) request_volume: u32,
    pub(crate) enforcing_percent: u32,
}

/// How a rule names its gate's fields in errors, and its smallest
/// `minimum_hosts`.
pub(crate) struct GateFields {
    pub(crate) minimum_hosts: &'static str,
    pub(crate) request_volume: &'static str,
    pub(crate) enforcing_percent: &'static str,
    pub(crate) least_hosts: u32,
    pub(crate) least_hosts_allowed: &'static str,
}

impl Gate {
    pub(crate) const fn new(minimum_hosts: u32, request_volume: u32) -> Self {
        Self {
            minimum_hosts,
            request_volume,
            enforcing_percent: DEFAULT_ENFORCING_PERCENT,
        }
    }

    pub(crate) fn check(&self, f: &GateFields) -> Result<(), ConfigError> {
        check_min(
            f.minimum_hosts,
            self.minimum_hosts,
            f.least_hosts,
            f.least_hosts_allowed,
        )?;
        check_min(f.request_volume, self.request_volume, 1, "an integer >= 1")?;
        check_percent(f.enforcing_percent, self.enforcing_percent)?;
        Ok(())
    }

    /// The samples a rule judges: those whose `volume` reaches the request
    /// volume, in order; `None` when fewer than `minimum_hosts` do.
    pub(crate) fn judged<'s>(
        &self,
        samples: &'s [Sample],
        volume: impl Fn(&Sample) -> u64,
    ) -> Option<Vec<&'s Sample>> {
        let judged: Vec<&Sample> = samples
            .iter()
            .filter(|s| volume(s) >= u64::from(self.request_volume))
            .collect();
        (judged.len() >= self.minimum_hosts as usize).then_some(judged)
    }
}

/// The gate's three setters on an interval rule (a `gate` field), with the
/// rule's own bounds and defaults in their docs.
macro_rules! gate_setters {
    ($rule:ident, hosts: $hosts:literal, volume: $volume:literal) => {
        impl $rule {
            #[doc = $hosts]
            pub fn minimum_hosts(mut self, n: u32) -> Self {
                self.gate.minimum_hosts = n;
                self
            }
            #[doc = $volume]
            pub fn request_volume(mut self, n: u32) -> Self {
                self.gate.request_volume = n;
                self
            }
            /// Share of detections that eject (0..=100, default 100).
            pub fn enforcing_percent(mut self, percent: u32) -> Self {
                self.gate.enforcing_percent = percent;
                self
            }
        }
    };
}

pub(crate) use gate_setters;
