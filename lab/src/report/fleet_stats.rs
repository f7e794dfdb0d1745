//! What a fleet run shows beyond the picker table: connections and load per
//! endpoint, cross-zone traffic, and how priority levels took the traffic,
//! for the table, the JSON and the chart.

use std::fmt::Write as _;

use super::document::{PickerReport, Report, round};
use super::sections::{FleetPhase, FleetStats};
use crate::scenario::Scenario;

/// The fleet numbers of a finished run: `picks[c][b]` is client `c`'s
/// picks of backend `b`, `plan[t]` client 0's plan at the end of second
/// `t`.
pub fn stats(
    sc: &Scenario,
    picks: &[Vec<u64>],
    run: &PickerReport,
    plan: &[(Vec<u32>, String)],
) -> FleetStats {
    let n = sc.backends.len().max(1);
    let mut pairs = vec![0u64; n];
    let (mut cross, mut total) = (0u64, 0u64);
    for (c, row) in picks.iter().enumerate() {
        let here = sc.client_zone(c as u32, sc.load.clients);
        for (b, &p) in row.iter().enumerate() {
            pairs[b] += u64::from(p > 0);
            total += p;
            if let (Some(h), Some(z)) = (here, sc.backends[b].zone.as_deref())
                && h != z
            {
                cross += p;
            }
        }
    }
    let max_mean = |v: &[u64]| {
        let mean = v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
        let max = v.iter().copied().max().unwrap_or(0) as f64;
        (mean, if mean > 0.0 { max / mean } else { 0.0 })
    };
    let (pairs_mean, pairs_max_mean) = max_mean(&pairs);
    let zoned = sc.fleet.as_ref().is_some_and(|f| !f.zones.is_empty());
    let levels = levels(sc);
    let priority_share = levels
        .iter()
        .map(|&p| {
            let of: u64 = (0..n)
                .filter(|&b| sc.backends[b].priority == p)
                .map(|b| run.picks[b])
                .sum();
            round(of as f64 / run.picks.iter().sum::<u64>().max(1) as f64, 5)
        })
        .collect();
    FleetStats {
        pairs_mean: round(pairs_mean, 2),
        pairs_max_mean: round(pairs_max_mean, 4),
        load_max_mean: round(max_mean(&run.picks).1, 4),
        cross_zone: zoned.then(|| round(cross as f64 / total.max(1) as f64, 5)),
        cross_zone_min: zoned.then(|| round(least_cross_zone(sc), 5)),
        priority_share,
        phases: if levels.len() > 1 {
            phases(sc, run, plan, &levels)
        } else {
            Vec::new()
        },
    }
}

/// The distinct priorities of the backends, highest first.
fn levels(sc: &Scenario) -> Vec<u32> {
    let mut l: Vec<u32> = sc.backends.iter().map(|b| b.priority).collect();
    l.sort_unstable();
    l.dedup();
    l
}

/// `1 − Σ min(c(z), e(z))` for the scenario's clients and backends.
fn least_cross_zone(sc: &Scenario) -> f64 {
    let Some(f) = &sc.fleet else { return 0.0 };
    let clients = sc.load.clients.max(1);
    let kept: f64 = f
        .zones
        .iter()
        .map(|z| {
            let c = (0..clients)
                .filter(|&c| sc.client_zone(c, clients) == Some(&z.name))
                .count() as f64
                / f64::from(clients);
            let e = sc
                .backends
                .iter()
                .filter(|b| b.zone.as_deref() == Some(&z.name))
                .count() as f64
                / sc.backends.len().max(1) as f64;
            c.min(e)
        })
        .sum();
    1.0 - kept
}

/// Splits the run where client 0's planned loads changed; measures each
/// level's share of picks from the per-second shares (weighted by
/// requests), leaving out the second in which each change happened (the
/// first of its phase).
fn phases(
    sc: &Scenario,
    run: &PickerReport,
    plan: &[(Vec<u32>, String)],
    levels: &[u32],
) -> Vec<FleetPhase> {
    let mut out: Vec<FleetPhase> = Vec::new();
    let mut start = 0;
    for t in 1..=plan.len() {
        if t < plan.len() && plan[t] == plan[start] {
            continue;
        }
        let from = (start + 1).min(t);
        let (mut weight, mut share) = (0.0, vec![0.0; levels.len()]);
        for s in run.timeline.iter().take(t).skip(from) {
            let w = s.requests as f64;
            weight += w;
            for (b, x) in s.share.iter().enumerate() {
                if let Some(l) = levels.iter().position(|&p| p == sc.backends[b].priority) {
                    share[l] += w * x;
                }
            }
        }
        if weight > 0.0 {
            out.push(FleetPhase {
                from_s: from as u64,
                to_s: t as u64,
                healthy: plan[start].1.clone(),
                planned: plan[start].0.clone(),
                measured: share.iter().map(|s| round(100.0 * s / weight, 2)).collect(),
            });
        }
        start = t;
    }
    out
}

/// The table's fleet block: one line per row with fleet numbers, and the
/// priority phases.
pub fn table(r: &Report, out: &mut String) {
    let rows: Vec<_> = r
        .runs
        .iter()
        .filter_map(|x| x.fleet.as_ref().map(|f| (r.row_name(x), f)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let w = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .fold(22, usize::max);
    let _ = writeln!(
        out,
        "\n{:<w$} {:>11} {:>10} {:>9} {:>11} {:>17}",
        "route step", "pairs/ep", "pairs max", "load max", "cross-zone", "priority share %"
    );
    let _ = writeln!(
        out,
        "{:<w$} {:>11} {:>10} {:>9} {:>11} {:>17}",
        "", "mean", "/mean", "/mean", "% (least)", "per level"
    );
    for (name, f) in &rows {
        let cross = match (f.cross_zone, f.cross_zone_min) {
            (Some(c), Some(m)) => format!("{:.1} ({:.1})", c * 100.0, m * 100.0),
            _ => "-".into(),
        };
        let levels: Vec<String> = f
            .priority_share
            .iter()
            .map(|s| format!("{:.1}", s * 100.0))
            .collect();
        let _ = writeln!(
            out,
            "{name:<w$} {:>11.1} {:>10.3} {:>9.3} {:>11} {:>17}",
            f.pairs_mean,
            f.pairs_max_mean,
            f.load_max_mean,
            cross,
            levels.join("/")
        );
    }
    for (name, f) in rows.iter().filter(|(_, f)| !f.phases.is_empty()) {
        let _ = writeln!(
            out,
            "\n{name}: priority phases (plan of client 0; measured share of picks)"
        );
        let _ = writeln!(
            out,
            "  {:>9} {:>11} {:>16} {:>16}",
            "seconds", "P0 healthy", "planned %", "measured %"
        );
        for p in &f.phases {
            let planned: Vec<String> = p.planned.iter().map(u32::to_string).collect();
            let measured: Vec<String> = p.measured.iter().map(|m| format!("{m:.1}")).collect();
            let _ = writeln!(
                out,
                "  {:>9} {:>11} {:>16} {:>16}",
                format!("{}-{}", p.from_s, p.to_s),
                p.healthy,
                planned.join("/"),
                measured.join("/")
            );
        }
    }
}

/// The chart's fleet panel: per row, bars for pairs max/mean, load
/// max/mean and (with zones) the cross-zone share. Returns the next y.
pub fn chart(r: &Report, names: &[String], label: f64, out: &mut String, mut y: f64) -> f64 {
    if r.runs.iter().all(|x| x.fleet.is_none()) {
        return y;
    }
    let _ = writeln!(
        out,
        r#"<text x="10" y="{y}" font-weight="bold">Route step: pairs max/mean (blue), load max/mean (orange), cross-zone share (red, with the least possible as a tick); bar scale 0 to 2 (x), 0 to 100%</text>"#
    );
    y += 10.0;
    let width = 900.0 - label - 80.0;
    for (x, name) in r.runs.iter().zip(names) {
        let Some(f) = &x.fleet else { continue };
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}">{}</text><g class="fleet-row">"#,
            y + 11.0,
            name.replace('&', "&amp;").replace('<', "&lt;")
        );
        let bars = [
            (f.pairs_max_mean / 2.0, "#4e79a7", 0.0),
            (f.load_max_mean / 2.0, "#f28e2b", 5.0),
        ];
        for (v, c, dy) in bars {
            let _ = writeln!(
                out,
                r#"<rect x="{label}" y="{}" width="{:.1}" height="4" fill="{c}"/>"#,
                y + dy,
                v.min(1.0) * width
            );
        }
        if let (Some(cz), Some(min)) = (f.cross_zone, f.cross_zone_min) {
            let _ = writeln!(
                out,
                r##"<rect x="{label}" y="{}" width="{:.1}" height="4" fill="#e15759"/><line x1="{m:.1}" x2="{m:.1}" y1="{}" y2="{}" stroke="black"/>"##,
                y + 10.0,
                cz * width,
                y + 9.0,
                y + 15.0,
                m = label + min * width
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{}">{:.2} / {:.2}</text></g>"#,
            label + width + 5.0,
            y + 11.0,
            f.pairs_max_mean,
            f.load_max_mean
        );
        y += 22.0;
    }
    y
}
