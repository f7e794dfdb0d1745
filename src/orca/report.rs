//! [`LoadReport`]: one report's values, each checked against its range.

use super::NamedMetrics;

/// One ORCA load report from an endpoint: the values it carried that were
/// well formed and in range, a bounded set of named metrics, and how many
/// values were left out.
///
/// Build one by parsing ([`parse`](Self::parse), [`decode`](Self::decode),
/// `from_headers`) or, for a custom transport, with the setters, which apply
/// the same checks (an out-of-range value is left out and counted).
///
/// ```
/// use tower_lb::orca::LoadReport;
/// let r = LoadReport::new()
///     .with_cpu_utilization(0.5)
///     .with_rps_fractional(200.0)
///     .with_eps(f64::NAN);
/// assert_eq!(r.utilization(), Some(0.5));
/// assert_eq!(r.rejected(), 1);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoadReport {
    cpu: Option<f64>,
    mem: Option<f64>,
    app: Option<f64>,
    rps: Option<f64>,
    eps: Option<f64>,
    named: NamedMetrics,
    rejected: u32,
}

/// The report's fields, by their names in every form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    Cpu,
    Mem,
    App,
    Rps,
    Eps,
}

impl Field {
    /// The field named `key` (proto field name or proto3 JSON name).
    pub(super) fn named(key: &str) -> Option<Field> {
        Some(match key {
            "cpu_utilization" | "cpuUtilization" => Field::Cpu,
            "mem_utilization" | "memUtilization" => Field::Mem,
            "application_utilization" | "applicationUtilization" => Field::App,
            "rps_fractional" | "rpsFractional" => Field::Rps,
            "eps" => Field::Eps,
            _ => return None,
        })
    }

    /// The ranges of `xds.data.orca.v3.OrcaLoadReport`: every value finite
    /// and `>= 0`, memory utilization also `<= 1` (CPU and application
    /// utilization may exceed 1 past a soft limit).
    fn accepts(self, v: f64) -> bool {
        v.is_finite() && v >= 0.0 && (self != Field::Mem || v <= 1.0)
    }
}

impl LoadReport {
    /// An empty report.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets CPU utilization (finite, `>= 0`; above 1 past a soft limit).
    pub fn with_cpu_utilization(mut self, v: f64) -> Self {
        self.set(Field::Cpu, v);
        self
    }

    /// Sets memory utilization (in `0..=1`).
    pub fn with_mem_utilization(mut self, v: f64) -> Self {
        self.set(Field::Mem, v);
        self
    }

    /// Sets application utilization (finite, `>= 0`).
    pub fn with_application_utilization(mut self, v: f64) -> Self {
        self.set(Field::App, v);
        self
    }

    /// Sets the requests per second the endpoint serves (finite, `>= 0`).
    pub fn with_rps_fractional(mut self, v: f64) -> Self {
        self.set(Field::Rps, v);
        self
    }

    /// Sets the errors per second the endpoint serves (finite, `>= 0`).
    pub fn with_eps(mut self, v: f64) -> Self {
        self.set(Field::Eps, v);
        self
    }

    /// Adds a named metric (finite; see [`NamedMetrics`] for the bounds).
    pub fn with_named_metric(mut self, name: &str, v: f64) -> Self {
        self.set_named(name, v);
        self
    }

    /// Stores `v` in `field` if it is in range and the field is not set yet;
    /// counts it as rejected otherwise.
    pub(super) fn set(&mut self, field: Field, v: f64) {
        let slot = match field {
            Field::Cpu => &mut self.cpu,
            Field::Mem => &mut self.mem,
            Field::App => &mut self.app,
            Field::Rps => &mut self.rps,
            Field::Eps => &mut self.eps,
        };
        if slot.is_none() && field.accepts(v) {
            *slot = Some(v);
        } else {
            self.reject();
        }
    }

    /// Keeps a named metric, or counts it as rejected.
    pub(super) fn set_named(&mut self, name: &str, v: f64) {
        if !(v.is_finite() && self.named.insert(name, v)) {
            self.reject();
        }
    }

    /// Counts one value left out.
    pub(super) fn reject(&mut self) {
        self.rejected = self.rejected.saturating_add(1);
    }

    /// The reported CPU utilization.
    pub fn cpu_utilization(&self) -> Option<f64> {
        self.cpu
    }

    /// The reported memory utilization.
    pub fn mem_utilization(&self) -> Option<f64> {
        self.mem
    }

    /// The reported application utilization.
    pub fn application_utilization(&self) -> Option<f64> {
        self.app
    }

    /// The reported requests per second.
    pub fn rps_fractional(&self) -> Option<f64> {
        self.rps
    }

    /// The reported errors per second.
    pub fn eps(&self) -> Option<f64> {
        self.eps
    }

    /// The utilization a balancer weighs by (A58): application utilization
    /// when it is reported and above 0, else CPU utilization.
    pub fn utilization(&self) -> Option<f64> {
        self.app.filter(|&u| u > 0.0).or(self.cpu)
    }

    /// The value of named metric `name`, if reported and kept.
    pub fn named_metric(&self, name: &str) -> Option<f64> {
        self.named.get(name)
    }

    /// The named metrics kept.
    pub fn named_metrics(&self) -> &NamedMetrics {
        &self.named
    }

    /// Values left out as malformed, non-finite, out of range, duplicated,
    /// unknown or past the named-metric bound.
    pub fn rejected(&self) -> u32 {
        self.rejected
    }

    /// True when the report carries no value at all.
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none()
            && self.mem.is_none()
            && self.app.is_none()
            && self.rps.is_none()
            && self.eps.is_none()
            && self.named.is_empty()
    }
}
