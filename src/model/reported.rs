//! What an endpoint reported about its own load (ORCA), as the model keeps
//! it: the last report, and A58's inputs with the start of their stream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::EndpointState;
use crate::orca::{LoadReport, MAX_UTILIZATION, ParseError};

/// "Never": no report yet.
const NEVER: u64 = u64::MAX;

/// An endpoint's last report, as [`EndpointState::reported_load`] gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ReportedLoad {
    /// CPU utilization, if reported.
    pub cpu_utilization: Option<f64>,
    /// Memory utilization, if reported.
    pub mem_utilization: Option<f64>,
    /// Application utilization, if reported.
    pub application_utilization: Option<f64>,
    /// Requests per second, if reported.
    pub rps_fractional: Option<f64>,
    /// Errors per second, if reported.
    pub eps: Option<f64>,
    /// How long ago it arrived.
    pub age: Duration,
}

impl ReportedLoad {
    /// The utilization pickers weigh by: application if above 0, else CPU.
    pub fn utilization(&self) -> Option<f64> {
        self.application_utilization
            .filter(|&u| u > 0.0)
            .or(self.cpu_utilization)
    }
}

/// Lock-free storage of the last report. Values are `f64` bits, NaN for
/// "not in the report"; a reader racing a writer may mix two consecutive
/// reports' values, which costs nothing a heuristic cares about.
#[derive(Debug)]
pub(crate) struct Reported {
    /// cpu, mem, application, rps, eps of the last report.
    values: [AtomicU64; 5],
    /// When the last report arrived (ns since the epoch).
    at_ns: AtomicU64,
    /// A58's inputs, from the last report with utilization and rps above 0:
    /// rps, utilization, eps.
    weight_inputs: [AtomicU64; 3],
    /// When that report arrived (A58's `last_updated`).
    weighted_ns: AtomicU64,
    /// Since when the endpoint has reported weights without a gap as long
    /// as the expiry (A58's `non_empty_since`).
    since_ns: AtomicU64,
    reports: AtomicU64,
    rejected: AtomicU64,
    /// Report headers that were not reports at all.
    malformed: AtomicU64,
}

fn store(slot: &AtomicU64, v: Option<f64>) {
    slot.store(v.unwrap_or(f64::NAN).to_bits(), Ordering::Relaxed);
}

fn load(slot: &AtomicU64) -> Option<f64> {
    let v = f64::from_bits(slot.load(Ordering::Relaxed));
    (!v.is_nan()).then_some(v)
}

impl Reported {
    pub(crate) fn new() -> Self {
        let none = || AtomicU64::new(f64::NAN.to_bits());
        Self {
            values: [none(), none(), none(), none(), none()],
            at_ns: AtomicU64::new(NEVER),
            weight_inputs: [none(), none(), none()],
            weighted_ns: AtomicU64::new(NEVER),
            since_ns: AtomicU64::new(NEVER),
            reports: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
        }
    }

    /// Age of a stamp at `now_ns`, if it is younger than `expiry_ns`.
    fn fresh(stamp: u64, now_ns: u64, expiry_ns: u64) -> Option<u64> {
        let age = now_ns.saturating_sub(stamp);
        (stamp != NEVER && age < expiry_ns).then_some(age)
    }
}

impl EndpointState {
    /// Feeds one load report into this endpoint's model at `now_ns` (ns
    /// since the balancer's epoch): the report every reader sees until the
    /// next one or the expiry, and A58's weight inputs when it has
    /// utilization and rps above 0. Values the parser left out are counted.
    pub(crate) fn record_load(&self, report: &LoadReport, now_ns: u64) {
        let r = &self.reported;
        r.reports.fetch_add(1, Ordering::Relaxed);
        let (cpu, app) = (
            trusted(report.cpu_utilization()),
            trusted(report.application_utilization()),
        );
        let untrusted = u64::from(cpu.is_err()) + u64::from(app.is_err());
        r.rejected
            .fetch_add(u64::from(report.rejected()) + untrusted, Ordering::Relaxed);
        let (cpu, app) = (cpu.unwrap_or(None), app.unwrap_or(None));
        let values = [
            cpu,
            report.mem_utilization(),
            app,
            report.rps_fractional(),
            report.eps(),
        ];
        // Nothing left (named metrics are not kept): the last report stands.
        if values.iter().all(Option::is_none) && report.named_metrics().is_empty() {
            return;
        }
        for (slot, v) in r.values.iter().zip(values) {
            store(slot, v);
        }
        r.at_ns.store(now_ns, Ordering::Relaxed);
        let u = app.filter(|&u| u > 0.0).or(cpu);
        let (Some(u), Some(rps)) = (u, report.rps_fractional()) else {
            return;
        };
        if !(u > 0.0 && rps > 0.0) {
            return;
        }
        let expiry = self.model.report_expiry_ns;
        if Reported::fresh(r.weighted_ns.load(Ordering::Relaxed), now_ns, expiry).is_none() {
            r.since_ns.store(now_ns, Ordering::Relaxed);
        }
        let inputs = [Some(rps), Some(u), Some(report.eps().unwrap_or(0.0))];
        for (slot, v) in r.weight_inputs.iter().zip(inputs) {
            store(slot, v);
        }
        r.weighted_ns.store(now_ns, Ordering::Relaxed);
    }

    /// What a response's report header held, at `now_ns`: a report, fed
    /// into the model, or a value that is no report, counted.
    pub(crate) fn take_report(&self, found: Result<LoadReport, ParseError>, now_ns: u64) {
        match found {
            Ok(report) => self.record_load(&report, now_ns),
            Err(_) => {
                self.reported.malformed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Feeds a load report from this endpoint into its model, now (for a
    /// transport of your own; see
    /// [`Handle::report_load`](crate::Handle::report_load)).
    pub fn report_load(&self, report: &LoadReport) {
        self.record_load(report, self.model.clock.now_ns());
    }

    /// The last report, unless it is older than the balancer's
    /// [report expiry](crate::balance::Builder::load_report_expiry).
    pub fn reported_load(&self, now: Instant) -> Option<ReportedLoad> {
        let r = &self.reported;
        let now_ns = self.model.nanos(now);
        let age = Reported::fresh(
            r.at_ns.load(Ordering::Relaxed),
            now_ns,
            self.model.report_expiry_ns,
        )?;
        let [cpu, mem, app, rps, eps] = r.values.each_ref().map(load);
        Some(ReportedLoad {
            cpu_utilization: cpu,
            mem_utilization: mem,
            application_utilization: app,
            rps_fractional: rps,
            eps,
            age: Duration::from_nanos(age),
        })
    }

    /// The utilization of the last report not expired at `now_ns` and its
    /// age in ns: application utilization if above 0, else CPU.
    #[inline]
    pub(crate) fn utilization_at(&self, now_ns: u64) -> Option<(f64, u64)> {
        let r = &self.reported;
        let age = Reported::fresh(
            r.at_ns.load(Ordering::Relaxed),
            now_ns,
            self.model.report_expiry_ns,
        )?;
        let u = load(&r.values[2])
            .filter(|&u| u > 0.0)
            .or_else(|| load(&r.values[0]))?;
        Some((u, age))
    }

    /// A58's weight at `now_ns`: `rps / (utilization + eps/rps × penalty)`
    /// from the last report that had both, or 0 when there is none, it has
    /// expired, or its stream is younger than `blackout_ns`.
    pub(crate) fn report_weight(&self, now_ns: u64, blackout_ns: u64, penalty: f64) -> f64 {
        let r = &self.reported;
        let expiry = self.model.report_expiry_ns;
        if Reported::fresh(r.weighted_ns.load(Ordering::Relaxed), now_ns, expiry).is_none() {
            return 0.0;
        }
        let since = r.since_ns.load(Ordering::Relaxed);
        if since == NEVER || now_ns.saturating_sub(since) < blackout_ns {
            return 0.0;
        }
        let [rps, u, eps] = r.weight_inputs.each_ref().map(load);
        match (rps, u) {
            (Some(rps), Some(u)) => a58_weight(rps, u, eps.unwrap_or(0.0), penalty),
            _ => 0.0,
        }
    }

    /// Load reports fed into this endpoint so far.
    pub fn load_reports(&self) -> u64 {
        self.reported.reports.load(Ordering::Relaxed)
    }

    /// Report headers (or trailers) from this endpoint that were not load
    /// reports at all (an unknown form, broken JSON, bad base64 or
    /// protobuf); they change nothing.
    pub fn load_reports_malformed(&self) -> u64 {
        self.reported.malformed.load(Ordering::Relaxed)
    }

    /// Values its reports carried that were left out (malformed, out of
    /// range, unknown, past a bound), including each CPU or application
    /// utilization above [`MAX_UTILIZATION`], which the model does not
    /// trust: a replica that keeps sending those is treated as unreported,
    /// and this count shows it.
    pub fn load_values_rejected(&self) -> u64 {
        self.reported.rejected.load(Ordering::Relaxed)
    }
}

/// A utilization the model trusts (`Ok`), or one past
/// [`MAX_UTILIZATION`] it leaves out (`Err`).
fn trusted(u: Option<f64>) -> Result<Option<f64>, ()> {
    match u {
        Some(u) if u > MAX_UTILIZATION => Err(()),
        u => Ok(u),
    }
}

/// A58's weight: `rps / (utilization + eps / rps × penalty)`; 0 unless rps
/// and utilization are above 0 (a report that cannot weigh).
pub(crate) fn a58_weight(rps: f64, utilization: f64, eps: f64, penalty: f64) -> f64 {
    if !(rps > 0.0 && utilization > 0.0) {
        return 0.0;
    }
    let w = rps / (utilization + eps / rps * penalty);
    if w.is_finite() { w } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_utilization_past_the_bound_is_left_out_and_counted() {
        let f = crate::pick::testing::Fixture::new(&[1.0]);
        let s = &f.states[0];
        let r = LoadReport::new()
            .with_cpu_utilization(1e308)
            .with_application_utilization(0.5);
        s.record_load(&r, 0);
        assert_eq!(s.utilization_at(0), Some((0.5, 0)));
        assert_eq!(s.load_values_rejected(), 1);
        // Only an untrusted value: nothing new, the last report stands.
        s.record_load(&LoadReport::new().with_cpu_utilization(50.0), 5);
        assert_eq!(s.utilization_at(5), Some((0.5, 5)));
        assert_eq!((s.load_reports(), s.load_values_rejected()), (2, 2));
        // The bound itself is trusted.
        s.record_load(&LoadReport::new().with_cpu_utilization(MAX_UTILIZATION), 6);
        assert_eq!(s.utilization_at(6), Some((MAX_UTILIZATION, 0)));
    }

    #[test]
    fn a58_weight_table() {
        // (rps, utilization, eps, penalty) -> weight
        let table: &[(f64, f64, f64, f64, f64)] = &[
            (100.0, 0.5, 0.0, 1.0, 200.0),
            (100.0, 0.5, 10.0, 1.0, 100.0 / 0.6),
            (100.0, 0.5, 10.0, 0.0, 200.0),
            (100.0, 0.5, 10.0, 2.0, 100.0 / 0.7),
            (100.0, 1.0, 100.0, 1.0, 50.0),
            (320.0, 2.0, 0.0, 1.0, 160.0),
            (0.0, 0.5, 0.0, 1.0, 0.0),
            (100.0, 0.0, 0.0, 1.0, 0.0),
            (f64::MIN_POSITIVE, f64::MIN_POSITIVE, f64::MAX, 1.0, 0.0),
        ];
        for &(rps, u, eps, penalty, want) in table {
            let w = a58_weight(rps, u, eps, penalty);
            assert!(
                (w - want).abs() <= 1e-9 * want.max(1.0),
                "{rps} {u} {eps} {penalty}: {w}"
            );
        }
    }
}
