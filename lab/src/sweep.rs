//! A utilization sweep (`--utilization 0.5,0.7,0.9,0.95`): the same
//! open-loop scenario at several shares of capacity, one report each, then
//! the p99 of every row against the load, as a table and a chart.

use std::fmt::Write as _;

use serde::Serialize;

use super::report::Report;

/// The JSON schema of a sweep.
pub const SCHEMA: &str = "tower-lb-lab-sweep/1";

/// A sweep's reports, for the JSON.
#[derive(Serialize)]
pub struct Sweep<'a> {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The scenario.
    pub scenario: &'a str,
    /// The utilization of each report, in order.
    pub levels: Vec<f64>,
    /// One report per level (each as a plain run's JSON).
    pub reports: &'a [Report],
}

impl<'a> Sweep<'a> {
    /// The sweep of `reports` at `levels`.
    pub fn new(reports: &'a [Report], levels: &[f64]) -> Self {
        Self {
            schema: SCHEMA,
            scenario: reports.first().map_or("", |r| r.scenario.as_str()),
            levels: levels.to_vec(),
            reports,
        }
    }
}

/// The row names of a sweep, in the first report's order.
fn rows(reports: &[Report]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in reports {
        for x in &r.runs {
            let n = r.row_name(x);
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names
}

/// The p99 of row `name` in `r`, ms.
fn p99(r: &Report, name: &str) -> Option<f64> {
    r.runs
        .iter()
        .find(|x| r.row_name(x) == name)
        .map(|x| x.latency_ms.p99)
}

/// The arrival rate of a report as a share of capacity (its label).
fn level(r: &Report) -> String {
    match (r.arrival_rate, r.target_utilization) {
        (_, Some(u)) => format!("{u}"),
        (Some(rate), None) => format!("{rate:.0}/s"),
        _ => "-".into(),
    }
}

/// The text summary: p99 per row and level, and each as a ratio to the
/// `tower_p2c` row when the sweep has one.
pub fn summary(reports: &[Report]) -> String {
    let names = rows(reports);
    let w = names.iter().map(|n| n.chars().count()).fold(22, usize::max);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\np99 (ms) against load: {} (× tower_p2c's p99 in brackets)",
        reports.first().map_or("", |r| r.scenario.as_str())
    );
    let _ = write!(out, "{:<w$}", "utilization");
    for r in reports {
        let _ = write!(out, " {:>16}", level(r));
    }
    let _ = writeln!(out);
    for n in &names {
        let _ = write!(out, "{n:<w$}");
        for r in reports {
            let tower = p99(r, "tower_p2c (rival)");
            let cell = match (p99(r, n), tower) {
                (Some(p), Some(t)) if t > 0.0 => format!("{p:.1} ({:.2})", p / t),
                (Some(p), _) => format!("{p:.1}"),
                (None, _) => "-".into(),
            };
            let _ = write!(out, " {cell:>16}");
        }
        let _ = writeln!(out);
    }
    out
}

const PALETTE: &[&str] = &[
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#2f4b7c", "#a05195",
];

/// The chart: one line per row, p99 (log scale) against utilization.
pub fn chart(reports: &[Report]) -> String {
    let xs: Vec<f64> = reports
        .iter()
        .map(|r| r.target_utilization.or(r.arrival_rate).unwrap_or(0.0))
        .collect();
    let ticks: Vec<(f64, String)> = reports
        .iter()
        .zip(&xs)
        .map(|(r, &x)| (x, level(r)))
        .collect();
    let series: Vec<(String, Vec<(f64, f64)>)> = rows(reports)
        .into_iter()
        .map(|n| {
            let pts = reports
                .iter()
                .zip(&xs)
                .filter_map(|(r, &x)| p99(r, &n).map(|p| (x, p)))
                .collect();
            (n, pts)
        })
        .collect();
    let title = format!(
        "p99 latency against load: {}",
        reports.first().map_or("", |r| r.scenario.as_str())
    );
    lines(
        &title,
        "utilization (arrivals / capacity)",
        &ticks,
        &series,
        None,
    )
}

/// A line chart of p99 (ms, log scale) against a load: one line per
/// series of `(load, p99)` points, `ticks` labelled on the x axis, and a
/// dashed line at `target` ms if given. The sweep's chart and the
/// capacity search's curves.
pub fn lines(
    title: &str,
    x_label: &str,
    ticks: &[(f64, String)],
    series: &[(String, Vec<(f64, f64)>)],
    target: Option<f64>,
) -> String {
    let (w, h, left, top, plot_w, plot_h) = (900.0, 460.0, 70.0, 40.0, 560.0, 360.0);
    let (x0, x1) = ticks
        .iter()
        .map(|t| t.0)
        .chain(series.iter().flat_map(|s| s.1.iter().map(|p| p.0)))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    let span = if x1 > x0 { x1 - x0 } else { 1.0 };
    let all: Vec<f64> = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .chain(target)
        .filter(|p| *p > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(0.1);
    let hi = all.iter().copied().fold(0.0, f64::max).max(lo * 10.0);
    let (l0, l1) = (lo.log10().floor(), hi.log10().ceil());
    let px = |x: f64| left + (x - x0) / span * plot_w;
    let py = |p: f64| top + plot_h - (p.max(lo).log10() - l0) / (l1 - l0) * plot_h;
    let mut body = String::new();
    let _ = writeln!(
        body,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">{}</text>"#,
        esc(title)
    );
    let _ = writeln!(
        body,
        r##"<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>"##
    );
    // Decades on the y axis, the ticks on the x axis.
    let mut d = l0;
    while d <= l1 {
        let y = py(10f64.powf(d));
        let _ = writeln!(
            body,
            r##"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + plot_w,
            left - 5.0,
            y + 4.0,
            10f64.powf(d)
        );
        d += 1.0;
    }
    if let Some(t) = target {
        let y = py(t);
        let _ = writeln!(
            body,
            r##"<line class="target" x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#c00" stroke-dasharray="6 4"/><text x="{}" y="{:.1}" fill="#c00">target {t} ms</text>"##,
            left + plot_w,
            left + 5.0,
            y - 4.0
        );
    }
    for (x, label) in ticks {
        let _ = writeln!(
            body,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            px(*x),
            top + plot_h + 16.0,
            esc(label)
        );
    }
    let _ = writeln!(
        body,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text><text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">p99 (ms, log scale)</text>"#,
        left + plot_w / 2.0,
        top + plot_h + 36.0,
        esc(x_label),
        top + plot_h / 2.0,
        top + plot_h / 2.0
    );
    for (k, (n, points)) in series.iter().enumerate() {
        let c = PALETTE[k % PALETTE.len()];
        let pts: Vec<String> = points
            .iter()
            .map(|&(x, p)| format!("{:.1},{:.1}", px(x), py(p)))
            .collect();
        let _ = writeln!(
            body,
            r#"<polyline class="sweep-series" fill="none" stroke="{c}" stroke-width="2" points="{}"/><text x="{}" y="{}" fill="{c}">{}</text>"#,
            pts.join(" "),
            left + plot_w + 15.0,
            top + 12.0 + k as f64 * 16.0,
            esc(n)
        );
    }
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
{body}</svg>
"#
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
