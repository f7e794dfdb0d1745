//! `--find-capacity`: for each picker, the highest load that holds the
//! scenario's target (`[capacity]`: p99 at or under a bound, errors at or
//! under a share). The load rises in coarse steps (users in a closed loop,
//! arrivals per second in an open one) until a step fails, then bisects
//! between the last step that held and the first that failed.
//!
//! Bounded: at most `max_steps + bisect` runs per picker (100 + 10), each
//! the scenario's duration, and at most [`MAX_TOTAL`] of run time in all.

use std::time::Duration;

use crate::driver::{Options, run_scenario};
use crate::error::LabError;
use crate::report::capacity_curves::{CapacityReport, Curve, Point, SCHEMA};
use crate::report::round;
use crate::scenario::{Capacity, PickerName, Scenario};

/// The longest a search may run, all pickers' steps at the scenario's
/// duration (simulated time in `--sim`).
pub const MAX_TOTAL: Duration = Duration::from_secs(24 * 3600);

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
