//! `--find-capacity`: for each picker, the highest load that holds the
//! scenario's target (`[capacity]`: p99 at or under a bound, errors at or
//! under a share). The load rises in coarse steps (users in a closed loop,
//! arrivals per second in an open one) until a step fails, then bisects
//! between the last step that held and the first that failed.
//!
//! Bounded: at most `max_steps + bisect` runs per picker (100 + 10), each
//! the scenario's duration, and at most [`MAX_TOTAL`] of run time in all.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::driver::{Options, run_scenario};
use super::error::LabError;
use super::record::round;
use super::scenario::{Capacity, PickerName, Scenario};
use super::sweep;

/// The JSON schema of a capacity search.
pub const SCHEMA: &str = "tower-lb-lab-capacity/1";

/// The longest a search may run, all pickers' steps at the scenario's
/// duration (simulated time in `--sim`).
pub const MAX_TOTAL: Duration = Duration::from_secs(24 * 3600);

/// One picker's search.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// The row's name.
    pub picker: String,
    /// The highest load that held (`null`: not even the first step).
    pub capacity: Option<f64>,
    /// Whether a step failed (`false`: every step held, the capacity is a
    /// lower bound).
    pub limit_found: bool,
    /// Every step run, in load order.
    pub points: Vec<Point>,
}

/// One step.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Users, or arrivals per second.
    pub load: f64,
    /// Its p99, ms.
    pub p99_ms: f64,
    /// Its error rate.
    pub error_rate: f64,
    /// Requests completed per second.
    pub rps: f64,
    /// Whether it held the target.
    pub held: bool,
}

/// A capacity search's result (JSON, schema [`SCHEMA`]).
#[derive(Debug, Clone, Serialize)]
pub struct CapacityReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The scenario.
    pub scenario: String,
    /// `"sim"` or `"http"`.
    pub mode: &'static str,
    /// `"users"` or `"arrivals/s"`.
    pub unit: &'static str,
    /// The p99 target, ms.
    pub p99_target_ms: f64,
    /// The error limit (a share).
    pub error_limit: f64,
    /// Each step's run time, s.
    pub step_s: f64,
    /// One curve per picker.
    pub curves: Vec<Curve>,
}

/// Runs the search for every picker of `sc` (or `opts.pickers`).
pub fn find(sc: &Scenario, opts: &Options) -> Result<CapacityReport, LabError> {
    let users = !sc.load.is_open();
    let spec = sc.capacity.clone().unwrap_or_default();
    let c = spec
        .resolve(sc.own_load(), users)
        .map_err(|(f, p)| LabError::input(format!("--find-capacity: `{f}`: {p}")))?;
    let pickers = opts.pickers.clone().unwrap_or_else(|| sc.pickers.clone());
    let duration = opts.duration.unwrap_or(sc.duration.0) + sc.load.warmup.0;
    let runs = (c.max_steps + c.bisect) as usize * pickers.len();
    let total = duration.saturating_mul(runs as u32);
    if total > MAX_TOTAL {
        return Err(LabError::input(format!(
            "--find-capacity: up to {runs} runs of {duration:?} is {:.1} h, over the {} h bound: lower `capacity.max_steps`, `capacity.bisect`, the pickers or --duration",
            total.as_secs_f64() / 3600.0,
            MAX_TOTAL.as_secs() / 3600
        )));
    }
    let mut curves = Vec::with_capacity(pickers.len());
    for &p in &pickers {
        curves.push(search(sc, opts, &c, p)?);
    }
    Ok(CapacityReport {
        schema: SCHEMA,
        scenario: sc.name.clone(),
        mode: if opts.sim { "sim" } else { "http" },
        unit: if users { "users" } else { "arrivals/s" },
        p99_target_ms: c.p99.as_secs_f64() * 1e3,
        error_limit: c.errors,
        step_s: duration.as_secs_f64(),
        curves,
    })
}

/// One picker: coarse steps, then bisection.
fn search(sc: &Scenario, opts: &Options, c: &Capacity, p: PickerName) -> Result<Curve, LabError> {
    let mut name = p.as_str().to_string();
    let mut points = Vec::new();
    let mut measure = |load: f64| -> Result<bool, LabError> {
        let (row, point) = step(sc, opts, c, p, load)?;
        name = row;
        let held = point.held;
        points.push(point);
        Ok(held)
    };
    let (mut good, mut bad) = (None, None);
    for k in 0..c.max_steps {
        let load = c.start + c.step * f64::from(k);
        if measure(load)? {
            good = Some(load);
        } else {
            bad = Some(load);
            break;
        }
    }
    if let Some(mut hi) = bad {
        let mut lo = good.unwrap_or(0.0);
        for _ in 0..c.bisect {
            // Whole users; arrivals per second to a tenth.
            let mid = if c.users {
                ((lo + hi) / 2.0).round()
            } else {
                round((lo + hi) / 2.0, 1)
            };
            if mid <= lo || mid >= hi || mid <= 0.0 {
                break;
            }
            if measure(mid)? {
                lo = mid;
                good = Some(mid);
            } else {
                hi = mid;
            }
        }
    }
    points.sort_by(|a, b| a.load.total_cmp(&b.load));
    Ok(Curve {
        picker: name,
        capacity: good,
        limit_found: bad.is_some(),
        points,
    })
}

/// Runs `p` alone at `load`; its row's name and the step's numbers.
fn step(
    sc: &Scenario,
    opts: &Options,
    c: &Capacity,
    p: PickerName,
    load: f64,
) -> Result<(String, Point), LabError> {
    let mut at = sc.clone();
    if c.users {
        let vus = load as u32;
        at.load.vus = vus;
        at.load.stages.clear();
        at.load.clients = at.load.clients.min(vus.max(1));
    } else {
        at.load.rate = Some(load);
        at.load.utilization = None;
    }
    // The picker alone: no peer rows (a proxy's capacity is another search).
    let o = Options {
        pickers: Some(vec![p]),
        peers: Some(Vec::new()),
        utilization: None,
        stream: false,
        quiet: true,
        metrics_addr: None,
        ..opts.clone()
    };
    let report = run_scenario(&at, &o)?;
    let Some(r) = report.runs.first() else {
        return Err(LabError::input(format!(
            "--find-capacity: {p} did not run: {}",
            report.notes.join("; ")
        )));
    };
    let p99_ms = r.latency_ms.p99;
    let held = p99_ms <= c.p99.as_secs_f64() * 1e3 && r.error_rate <= c.errors;
    if !opts.quiet {
        eprintln!(
            "capacity: {} at {load} {}: p99 {p99_ms:.1} ms, errors {:.2}% → {}",
            report.row_name(r),
            if c.users { "users" } else { "arrivals/s" },
            r.error_rate * 100.0,
            if held { "held" } else { "failed" }
        );
    }
    Ok((
        report.row_name(r),
        Point {
            load,
            p99_ms,
            error_rate: r.error_rate,
            rps: r.rps,
            held,
        },
    ))
}

impl CapacityReport {
    /// The terminal table: per picker, its capacity and its steps.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\ncapacity: {} ({}, p99 <= {:.0} ms and errors <= {}%, {:.0} s per step)",
            self.scenario,
            self.mode,
            self.p99_target_ms,
            round(self.error_limit * 100.0, 3),
            self.step_s
        );
        let w = self
            .curves
            .iter()
            .map(|c| c.picker.chars().count())
            .fold(22, usize::max);
        let _ = writeln!(
            out,
            "{:<w$} {:>12}  steps ({}: p99 ms, err %; * failed)",
            "picker", self.unit, self.unit
        );
        for c in &self.curves {
            let cap = match (c.capacity, c.limit_found) {
                (Some(x), true) => format!("{x}"),
                (Some(x), false) => format!(">= {x}"),
                (None, _) => "none".into(),
            };
            let steps: Vec<String> = c
                .points
                .iter()
                .map(|p| {
                    format!(
                        "{}: {:.0}/{:.1}{}",
                        p.load,
                        p.p99_ms,
                        p.error_rate * 100.0,
                        if p.held { "" } else { "*" }
                    )
                })
                .collect();
            let _ = writeln!(out, "{:<w$} {cap:>12}  {}", c.picker, steps.join("  "));
        }
        out
    }

    /// The chart: p99 against load, one line per picker.
    pub fn chart(&self) -> String {
        let mut loads: Vec<f64> = self
            .curves
            .iter()
            .flat_map(|c| c.points.iter().map(|p| p.load))
            .collect();
        loads.sort_by(f64::total_cmp);
        loads.dedup();
        // At most a dozen labels on the axis.
        let every = loads.len().div_ceil(12).max(1);
        let ticks: Vec<(f64, String)> = loads
            .iter()
            .step_by(every)
            .map(|&x| (x, format!("{x}")))
            .collect();
        let series: Vec<(String, Vec<(f64, f64)>)> = self
            .curves
            .iter()
            .map(|c| {
                let pts = c.points.iter().map(|p| (p.load, p.p99_ms)).collect();
                (c.picker.clone(), pts)
            })
            .collect();
        sweep::lines(
            &format!(
                "p99 against load: {} (target {:.0} ms)",
                self.scenario, self.p99_target_ms
            ),
            &format!("load ({})", self.unit),
            &ticks,
            &series,
            Some(self.p99_target_ms),
        )
    }

    /// The JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
