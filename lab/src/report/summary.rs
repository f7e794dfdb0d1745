//! The summary: one line per row with its latency, errors and the ratio
//! columns against a named row (`--ratio-to`, default `tower_p2c`), and
//! with several seeds (`--seeds 1-3`) each cell's mean and range over them.
//! The README's and docs/tails.md's tables are this table, pasted.

use std::fmt::Write as _;

use serde::Serialize;

use super::document::{PickerReport, Report};

/// The row the ratio columns divide by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RatioTo {
    /// `tower_p2c` when it runs, else none.
    Default,
    /// No ratio columns (`--ratio-to none`).
    None,
    /// This row: a picker's name (`peak_ewma`) or a row's as the table
    /// shows it (`nginx least_conn (peer)`).
    Row(String),
}

/// The row [`RatioTo::Default`] names.
pub const DEFAULT_RATIO_ROW: &str = "tower_p2c";

impl RatioTo {
    /// `--ratio-to`'s value.
    pub fn parse(v: &str) -> Self {
        match v.trim() {
            "none" => RatioTo::None,
            name => RatioTo::Row(name.to_string()),
        }
    }

    /// The row of `r` to divide by, if any.
    fn find<'a>(&self, r: &'a Report) -> Option<&'a PickerReport> {
        let name = match self {
            RatioTo::None => return None,
            RatioTo::Default => DEFAULT_RATIO_ROW,
            RatioTo::Row(n) => n.as_str(),
        };
        r.runs
            .iter()
            .find(|x| x.picker == name)
            .or_else(|| r.runs.iter().find(|x| r.row_name(x) == name))
    }
}

/// One figure over the seeds: its mean, lowest and highest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    /// Mean over the seeds.
    pub mean: f64,
    /// Lowest.
    pub min: f64,
    /// Highest.
    pub max: f64,
}

impl Stat {
    /// The mean and range of `xs` (`None` when empty).
    fn of(xs: &[f64]) -> Option<Self> {
        if xs.is_empty() {
            return None;
        }
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Self { mean, min, max })
    }

    /// The cell: the mean with `digits` decimals, and with `range` the
    /// range after it when the seeds differ (`84.0 (80.0-90.0)`; from 100
    /// on the range in whole units, `126.0 (95-158)`, to keep the table
    /// narrow).
    fn cell(&self, digits: usize, range: bool) -> String {
        let d = if self.max.abs() >= 100.0 { 0 } else { digits };
        let (lo, hi) = (format!("{:.d$}", self.min), format!("{:.d$}", self.max));
        if range && lo != hi {
            format!("{:.digits$} ({lo}-{hi})", self.mean)
        } else {
            format!("{:.digits$}", self.mean)
        }
    }
}

/// One row of the summary.
#[derive(Debug, Clone, Serialize)]
pub struct SummaryRow {
    /// The row's name, as the table shows it.
    pub row: String,
    /// Seeds the row ran at.
    pub seeds: usize,
    /// Requests per second.
    pub rps: Stat,
    /// Mean latency, ms.
    pub mean_ms: Stat,
    /// p99 latency, ms.
    pub p99_ms: Stat,
    /// p99.9 latency, ms.
    pub p999_ms: Stat,
    /// Errors over requests.
    pub error_rate: Stat,
    /// Open loop: requests unanswered when the drain ended (`null` in a
    /// closed loop).
    pub unfinished: Option<Stat>,
    /// p99 over the reference row's p99 at the same seed (`null` without
    /// a reference).
    pub p99_ratio: Option<Stat>,
    /// Mean over the reference row's mean at the same seed.
    pub mean_ratio: Option<Stat>,
}

/// The summary of one scenario (at one utilization level) over its seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The scenario.
    pub scenario: String,
    /// `"sim"` or `"http"`.
    pub mode: &'static str,
    /// The seeds, in run order.
    pub seeds: Vec<u64>,
    /// Measured seconds per row.
    pub duration_s: f64,
    /// Open loop: arrivals per second meant.
    pub arrival_rate: Option<f64>,
    /// Open loop at a share of capacity: that share.
    pub target_utilization: Option<f64>,
    /// Closed loop: most users.
    pub users: u32,
    /// Client balancers.
    pub clients: u32,
    /// The row the ratios divide by, as the table names it (`null`: none).
    pub ratio_to: Option<String>,
    /// Its picker's name, for the columns' headers.
    #[serde(skip)]
    pub ratio_short: Option<String>,
    /// One entry per row, in the first seed's order.
    pub rows: Vec<SummaryRow>,
}

impl Summary {
    /// The summary of `reports`: one run of the same scenario and level per
    /// seed.
    pub fn new(reports: &[Report], ratio: &RatioTo) -> Self {
        let first = reports.first();
        let base = first.and_then(|r| ratio.find(r).map(|x| (r.row_name(x), x.picker.clone())));
        let (ratio_to, ratio_short) = base.unzip();
        let mut names: Vec<String> = Vec::new();
        for r in reports {
            for x in &r.runs {
                let n = r.row_name(x);
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        let rows = names.into_iter().map(|n| row(reports, n, ratio)).collect();
        Self {
            scenario: first.map_or_else(String::new, |r| r.scenario.clone()),
            mode: first.map_or("sim", |r| r.mode),
            seeds: reports.iter().map(|r| r.seed).collect(),
            duration_s: first.map_or(0.0, |r| r.duration_s),
            arrival_rate: first.and_then(|r| r.arrival_rate),
            target_utilization: first.and_then(|r| r.target_utilization),
            users: first.map_or(0, |r| r.users),
            clients: first.map_or(0, |r| r.clients),
            ratio_to,
            ratio_short,
            rows,
        }
    }

    /// Whether the table is worth printing after the run's own: it has
    /// ratio columns, or several seeds.
    pub fn worth_printing(&self) -> bool {
        self.ratio_to.is_some() || self.seeds.len() > 1
    }

    /// The table.
    pub fn table(&self) -> String {
        let range = self.seeds.len() > 1;
        let short = self.ratio_short.clone();
        // In an open loop the RPS is the arrival rate; what differs is
        // what was left unanswered.
        let open = self.arrival_rate.is_some();
        let unfinished = open
            && self
                .rows
                .iter()
                .any(|r| r.unfinished.is_some_and(|u| u.max > 0.0));
        let mut header = vec!["row".to_string()];
        if !open {
            header.push("RPS".into());
        }
        header.extend(["mean ms", "p99 ms", "p99.9 ms", "err %"].map(String::from));
        if unfinished {
            header.push("unfinished".into());
        }
        if let Some(s) = &short {
            header.push(format!("p99/{s}"));
            header.push(format!("mean/{s}"));
        }
        let mut lines = vec![header];
        for r in &self.rows {
            let mut cells = vec![r.row.clone()];
            if !open {
                cells.push(r.rps.cell(1, range));
            }
            cells.extend([
                r.mean_ms.cell(1, range),
                r.p99_ms.cell(1, range),
                r.p999_ms.cell(1, range),
                Stat {
                    mean: r.error_rate.mean * 100.0,
                    min: r.error_rate.min * 100.0,
                    max: r.error_rate.max * 100.0,
                }
                .cell(2, range),
            ]);
            if unfinished {
                let u = r
                    .unfinished
                    .map_or_else(|| "-".into(), |u| u.cell(0, range));
                cells.push(u);
            }
            if short.is_some() {
                let na = || "-".to_string();
                cells.push(r.p99_ratio.map_or_else(na, |s| s.cell(2, range)));
                cells.push(r.mean_ratio.map_or_else(na, |s| s.cell(2, range)));
            }
            lines.push(cells);
        }
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.heading());
        let cols = lines[0].len();
        let widths: Vec<usize> = (0..cols)
            .map(|c| {
                lines
                    .iter()
                    .map(|l| l[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for l in &lines {
            let mut line = String::new();
            for (c, cell) in l.iter().enumerate() {
                let w = widths[c];
                if c == 0 {
                    let _ = write!(line, "{cell:<w$}");
                } else {
                    let _ = write!(line, "  {cell:>w$}");
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out
    }

    /// The table's first line: what ran, at which seeds, against what.
    fn heading(&self) -> String {
        let load = match (self.target_utilization, self.arrival_rate) {
            (Some(u), Some(rate)) => format!("open loop at {u}, {rate:.0} arrivals/s"),
            (_, Some(rate)) => format!("open loop, {rate:.0} arrivals/s"),
            _ => format!("{} users", self.users),
        };
        let seeds = if self.seeds.len() > 1 {
            format!("seeds {}: mean (min-max)", seeds_text(&self.seeds))
        } else {
            format!("seed {}", seeds_text(&self.seeds))
        };
        let against = match &self.ratio_to {
            Some(n) => format!("; ratios to {n} at the same seed"),
            None => String::new(),
        };
        format!(
            "{} ({}, {load}, {} client balancer{}, {:.0} s per row, {seeds}{against})",
            self.scenario,
            self.mode,
            self.clients,
            if self.clients == 1 { "" } else { "s" },
            self.duration_s,
        )
    }
}

/// Row `name` over `reports`.
fn row(reports: &[Report], name: String, ratio: &RatioTo) -> SummaryRow {
    let mut v: [Vec<f64>; 8] = Default::default();
    let mut seeds = 0;
    for r in reports {
        let Some(x) = r.runs.iter().find(|x| r.row_name(x) == name) else {
            continue;
        };
        seeds += 1;
        let l = &x.latency_ms;
        v[0].push(x.rps);
        v[1].push(l.mean);
        v[2].push(l.p99);
        v[3].push(l.p999);
        v[4].push(x.error_rate);
        if let Some(o) = &x.open {
            v[7].push(o.unfinished as f64);
        }
        if let Some(base) = ratio.find(r) {
            let b = &base.latency_ms;
            if b.p99 > 0.0 && b.mean > 0.0 {
                v[5].push(l.p99 / b.p99);
                v[6].push(l.mean / b.mean);
            }
        }
    }
    let zero = Stat {
        mean: 0.0,
        min: 0.0,
        max: 0.0,
    };
    let s = |i: usize| Stat::of(&v[i]).unwrap_or(zero);
    SummaryRow {
        row: name,
        seeds,
        rps: s(0),
        mean_ms: s(1),
        p99_ms: s(2),
        p999_ms: s(3),
        error_rate: s(4),
        unfinished: Stat::of(&v[7]),
        p99_ratio: Stat::of(&v[5]),
        mean_ratio: Stat::of(&v[6]),
    }
}

/// `1-3` for consecutive seeds, else `1, 4, 7`.
pub fn seeds_text(seeds: &[u64]) -> String {
    let consecutive = seeds.windows(2).all(|w| w[1] == w[0] + 1);
    match seeds {
        [] => String::new(),
        [one] => one.to_string(),
        [first, .., last] if consecutive => format!("{first}-{last}"),
        _ => seeds
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// One level of a run (the run itself without a sweep): its report per
/// seed, and their summary.
#[derive(Debug, Clone)]
pub struct Seeded {
    /// One report per seed, in seed order.
    pub reports: Vec<Report>,
    /// Their summary.
    pub summary: Summary,
}

impl Seeded {
    /// `reports` (one per seed) with their summary against `ratio`.
    pub fn new(reports: Vec<Report>, ratio: &RatioTo) -> Self {
        let summary = Summary::new(&reports, ratio);
        Self { reports, summary }
    }
}
