//! A hand-written SVG chart of a report: latency bars (mean and p99) per
//! row (pickers and peers), share bars per backend, and latency over time
//! when the scenario changes during the run (and requests per second when
//! replicas join or leave). Each row's latency bar has class
//! `latency-bar`, its share bars sit in a `<g class="share-row">`, its
//! line over time has class `series` (`rps-series` for the throughput):
//! one of each per row.

use std::fmt::Write as _;

use super::document::{MAX_LISTED, Report, Second};

const PALETTE: &[&str] = &[
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#2f4b7c", "#a05195",
];

const W: f64 = 900.0;
/// Width of the row names' column, at least.
const LABEL: f64 = 190.0;
const ROW: f64 = 22.0;

/// Latency bars of peer rows (the proxies), apart from tower-lb's.
const PEER: &str = "#9c755f";

fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The chart; `timeline` adds the latency-over-time panel.
pub fn chart(r: &Report, timeline: bool) -> String {
    let names: Vec<String> = r.runs.iter().map(|x| r.row_name(x)).collect();
    // About 7 px per character at font-size 12.
    let label = names
        .iter()
        .map(|n| n.chars().count() as f64 * 7.0 + 20.0)
        .fold(LABEL, f64::max);
    let mut body = String::new();
    let mut y = 30.0;
    let _ = writeln!(
        body,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">{} ({}, {} users, {:.0} s per row)</text>"#,
        esc(&r.scenario),
        r.mode,
        r.users,
        r.duration_s
    );
    y = latency_bars(r, &names, label, &mut body, y + 10.0);
    y = share_bars(r, &names, label, &mut body, y + 20.0);
    y = super::fleet_stats::chart(r, &names, label, &mut body, y + 20.0);
    if timeline {
        let mean = Panel {
            title: "Mean latency per second (ms",
            class: "series",
            value: |s| s.mean_ms,
        };
        y = over_time(r, &names, label, &mut body, y + 20.0, mean);
    }
    // Replicas joined or left: the throughput follows them.
    if r.runs.iter().any(|x| x.membership.is_some()) {
        let rps = Panel {
            title: "Requests completed per second (",
            class: "rps-series",
            value: |s| Some(s.requests as f64),
        };
        y = over_time(r, &names, label, &mut body, y + 20.0, rps);
    }
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
{body}</svg>
"#,
        h = y + 20.0
    )
}

fn latency_bars(r: &Report, names: &[String], label: f64, out: &mut String, mut y: f64) -> f64 {
    let max = r.runs.iter().map(|x| x.latency_ms.p99).fold(1.0, f64::max);
    let width = W - label - 80.0;
    let _ = writeln!(
        out,
        r#"<text x="10" y="{y}" font-weight="bold">Latency (ms): bar = mean, line = p99</text>"#
    );
    y += 10.0;
    for (x, name) in r.runs.iter().zip(names) {
        let m = x.latency_ms.mean / max * width;
        let p = x.latency_ms.p99 / max * width;
        let _ = writeln!(
            out,
            r#"<text x="10" y="{ty}">{name}</text><rect class="latency-bar" x="{label}" y="{y}" width="{m:.1}" height="14" fill="{c}"/><line x1="{label}" x2="{px:.1}" y1="{ly}" y2="{ly}" stroke="black"/><line x1="{px:.1}" x2="{px:.1}" y1="{y}" y2="{y2}" stroke="black"/><text x="{tx:.1}" y="{ty}">{mean:.0} / {p99:.0}</text>"#,
            ty = y + 11.0,
            name = esc(name),
            c = if x.peer.is_some() { PEER } else { color(0) },
            px = label + p,
            ly = y + 7.0,
            y2 = y + 14.0,
            tx = label + p.max(m) + 5.0,
            mean = x.latency_ms.mean,
            p99 = x.latency_ms.p99,
        );
        y += ROW;
    }
    y
}

fn share_bars(r: &Report, names: &[String], label: f64, out: &mut String, mut y: f64) -> f64 {
    let width = W - label - 80.0;
    let _ = writeln!(
        out,
        r#"<text x="10" y="{y}" font-weight="bold">Share of requests per backend</text>"#
    );
    let mut lx = label + 180.0;
    let listed = if r.backends.len() > MAX_LISTED {
        0
    } else {
        r.backends.len()
    };
    for (i, b) in r.backends.iter().enumerate().take(listed) {
        let _ = writeln!(
            out,
            r#"<rect x="{lx}" y="{ry}" width="10" height="10" fill="{c}"/><text x="{tx}" y="{y}">{name}</text>"#,
            ry = y - 9.0,
            c = color(i),
            tx = lx + 14.0,
            name = esc(&b.name)
        );
        lx += 110.0;
    }
    y += 10.0;
    for (x, name) in r.runs.iter().zip(names) {
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}">{}</text><g class="share-row">"#,
            y + 11.0,
            esc(name)
        );
        let mut left = label;
        for (i, s) in x.share.iter().enumerate() {
            let w = s * width;
            let _ = writeln!(
                out,
                r#"<rect x="{left:.1}" y="{y}" width="{w:.1}" height="14" fill="{c}"><title>{name}: {pct:.1}%</title></rect>"#,
                c = color(i),
                name = esc(r.backends.get(i).map_or("?", |b| b.name.as_str())),
                pct = s * 100.0
            );
            left += w;
        }
        let _ = writeln!(out, "</g>");
        y += ROW;
    }
    y
}

/// A per-second panel: its title (the scale follows it), its lines'
/// class, and what it plots of each second.
struct Panel {
    title: &'static str,
    class: &'static str,
    value: fn(&Second) -> Option<f64>,
}

fn over_time(
    r: &Report,
    names: &[String],
    label: f64,
    out: &mut String,
    y: f64,
    panel: Panel,
) -> f64 {
    let h = 220.0;
    let top = y + 10.0;
    let width = W - label - 40.0;
    let secs = r
        .runs
        .iter()
        .map(|x| x.timeline.len())
        .max()
        .unwrap_or(1)
        .max(1);
    let max = r
        .runs
        .iter()
        .flat_map(|x| x.timeline.iter().filter_map(panel.value))
        .fold(1.0, f64::max);
    let _ = writeln!(
        out,
        r#"<text x="10" y="{y}" font-weight="bold">{}0 to {max:.0}; x: 0 to {secs} s)</text>"#,
        panel.title
    );
    let _ = writeln!(
        out,
        r##"<rect x="{label}" y="{top}" width="{width}" height="{h}" fill="none" stroke="#ccc"/>"##
    );
    for (k, (x, name)) in r.runs.iter().zip(names).enumerate() {
        let pts: Vec<String> = x
            .timeline
            .iter()
            .filter_map(|s| {
                (panel.value)(s).map(|m| {
                    format!(
                        "{:.1},{:.1}",
                        label + (s.t as f64 + 0.5) / secs as f64 * width,
                        top + h - m / max * h
                    )
                })
            })
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline class="{class}" fill="none" stroke="{c}" stroke-width="1.5" points="{p}"/><text x="10" y="{ty}" fill="{c}">{name}</text>"#,
            class = panel.class,
            c = color(k),
            p = pts.join(" "),
            ty = top + 12.0 + k as f64 * 15.0,
            name = esc(name)
        );
    }
    top + h.max(r.runs.len() as f64 * 15.0)
}
