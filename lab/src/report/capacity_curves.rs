//! The result of `--find-capacity` (the search is
//! [`crate::driver::find_capacity`]'s): per picker, the highest load that
//! held the scenario's target and every step run, as the terminal table,
//! the JSON (schema [`SCHEMA`]) and the chart of p99 against load.

use std::fmt::Write as _;

use serde::Serialize;

use super::document::round;
use super::sweep;

/// The JSON schema of a capacity search.
pub const SCHEMA: &str = "tower-lb-lab-capacity/1";

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
