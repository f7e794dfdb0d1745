//! A utilization sweep (`--utilization 0.5,0.7,0.9,0.95`): the same
//! open-loop scenario at several shares of capacity, one report each (per
//! seed), then the p99 of every row against the load (the seeds' mean), as
//! a table and a chart.

use std::fmt::Write as _;

use serde::Serialize;

use super::document::Report;
use super::summary::{Summary, SummaryRow, seeds_text};

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

/// The row names of a sweep, in the first level's order.
fn rows(levels: &[Summary]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for l in levels {
        for x in &l.rows {
            if !names.contains(&x.row) {
                names.push(x.row.clone());
            }
        }
    }
    names
}

/// The row called `name` at level `l`.
fn find<'a>(l: &'a Summary, name: &str) -> Option<&'a SummaryRow> {
    l.rows.iter().find(|x| x.row == name)
}

/// The p99 of row `name` at level `l` (its mean over the seeds), ms.
fn p99(l: &Summary, name: &str) -> Option<f64> {
    find(l, name).map(|x| x.p99_ms.mean)
}

/// A level's label: its share of capacity, else its arrival rate.
fn level(l: &Summary) -> String {
    match (l.arrival_rate, l.target_utilization) {
        (_, Some(u)) => format!("{u}"),
        (Some(rate), None) => format!("{rate:.0}/s"),
        _ => "-".into(),
    }
}

/// The text summary: p99 per row and level (the seeds' mean), and each as
/// a ratio to the summaries' reference row (`--ratio-to`) when they have
/// one.
pub fn summary(levels: &[Summary]) -> String {
    let names = rows(levels);
    let w = names.iter().map(|n| n.chars().count()).fold(22, usize::max);
    let mut out = String::new();
    let first = levels.first();
    let against = first
        .and_then(|l| l.ratio_short.as_deref())
        .map(|n| format!(" (× {n}'s p99 in brackets)"))
        .unwrap_or_default();
    let seeds = match first {
        Some(l) if l.seeds.len() > 1 => format!(", mean of seeds {}", seeds_text(&l.seeds)),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "\np99 (ms) against load: {}{seeds}{against}",
        first.map_or("", |l| l.scenario.as_str())
    );
    let _ = write!(out, "{:<w$}", "utilization");
    for l in levels {
        let _ = write!(out, " {:>16}", level(l));
    }
    let _ = writeln!(out);
    for n in &names {
        let _ = write!(out, "{n:<w$}");
        for l in levels {
            let cell = match find(l, n) {
                Some(x) => match x.p99_ratio {
                    Some(r) => format!("{:.1} ({:.2})", x.p99_ms.mean, r.mean),
                    None => format!("{:.1}", x.p99_ms.mean),
                },
                None => "-".into(),
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
pub fn chart(levels: &[Summary]) -> String {
    let xs: Vec<f64> = levels
        .iter()
        .map(|l| l.target_utilization.or(l.arrival_rate).unwrap_or(0.0))
        .collect();
    let ticks: Vec<(f64, String)> = levels
        .iter()
        .zip(&xs)
        .map(|(l, &x)| (x, level(l)))
        .collect();
    let series: Vec<(String, Vec<(f64, f64)>)> = rows(levels)
        .into_iter()
        .map(|n| {
            let pts = levels
                .iter()
                .zip(&xs)
                .filter_map(|(l, &x)| p99(l, &n).map(|p| (x, p)))
                .collect();
            (n, pts)
        })
        .collect();
    let title = format!(
        "p99 latency against load: {}",
        levels.first().map_or("", |l| l.scenario.as_str())
    );
    lines(
        &title,
        "utilization (arrivals / capacity)",
        &ticks,
        &series,
        None,
    )
}

/// The chart's size, and its plot's margins and size (px).
const W: f64 = 900.0;
const H: f64 = 460.0;
const LEFT: f64 = 70.0;
const TOP: f64 = 40.0;
const PLOT_W: f64 = 560.0;
const PLOT_H: f64 = 360.0;

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
    let scale = Scale::new(ticks, series, target);
    let mut body = String::new();
    let _ = writeln!(
        body,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">{}</text>"#,
        esc(title)
    );
    let _ = writeln!(
        body,
        r##"<rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#999"/>"##
    );
    axes(&mut body, &scale, x_label, ticks, target);
    for (k, (n, points)) in series.iter().enumerate() {
        let c = PALETTE[k % PALETTE.len()];
        let pts: Vec<String> = points
            .iter()
            .map(|&(x, p)| format!("{:.1},{:.1}", scale.px(x), scale.py(p)))
            .collect();
        let _ = writeln!(
            body,
            r#"<polyline class="sweep-series" fill="none" stroke="{c}" stroke-width="2" points="{}"/><text x="{}" y="{}" fill="{c}">{}</text>"#,
            pts.join(" "),
            LEFT + PLOT_W + 15.0,
            TOP + 12.0 + k as f64 * 16.0,
            esc(n)
        );
    }
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
{body}</svg>
"#
    )
}

/// Where [`lines`] puts a load (x, linear) and a p99 (y, log scale, on
/// whole decades).
struct Scale {
    x0: f64,
    span: f64,
    lo: f64,
    l0: f64,
    l1: f64,
}

impl Scale {
    /// The scale holding every tick, point and the target.
    fn new(
        ticks: &[(f64, String)],
        series: &[(String, Vec<(f64, f64)>)],
        target: Option<f64>,
    ) -> Self {
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
        Self {
            x0,
            span,
            lo,
            l0,
            l1,
        }
    }

    /// The x pixel of load `x`.
    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / self.span * PLOT_W
    }

    /// The y pixel of `p` ms (at least the scale's lowest).
    fn py(&self, p: f64) -> f64 {
        TOP + PLOT_H - (p.max(self.lo).log10() - self.l0) / (self.l1 - self.l0) * PLOT_H
    }
}

/// Writes the axes into `body`: decades on the y axis, the dashed
/// `target` line if given, `ticks` and `x_label` on the x axis.
fn axes(
    body: &mut String,
    scale: &Scale,
    x_label: &str,
    ticks: &[(f64, String)],
    target: Option<f64>,
) {
    let mut d = scale.l0;
    while d <= scale.l1 {
        let y = scale.py(10f64.powf(d));
        let _ = writeln!(
            body,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + PLOT_W,
            LEFT - 5.0,
            y + 4.0,
            10f64.powf(d)
        );
        d += 1.0;
    }
    if let Some(t) = target {
        let y = scale.py(t);
        let _ = writeln!(
            body,
            r##"<line class="target" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#c00" stroke-dasharray="6 4"/><text x="{}" y="{:.1}" fill="#c00">target {t} ms</text>"##,
            LEFT + PLOT_W,
            LEFT + 5.0,
            y - 4.0
        );
    }
    for (x, label) in ticks {
        let _ = writeln!(
            body,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            scale.px(*x),
            TOP + PLOT_H + 16.0,
            esc(label)
        );
    }
    let _ = writeln!(
        body,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text><text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">p99 (ms, log scale)</text>"#,
        LEFT + PLOT_W / 2.0,
        TOP + PLOT_H + 36.0,
        esc(x_label),
        TOP + PLOT_H / 2.0,
        TOP + PLOT_H / 2.0
    );
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
