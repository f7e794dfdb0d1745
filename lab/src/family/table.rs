//! The scorecard as text: one line per picker, then every case's ratios,
//! and over real sockets the share timelines of the identical fleets.

use std::fmt::Write as _;

use super::card::{Card, ORACLE, Reduced, TIE, TIE_MS, TOWER};
use super::lab::Report;
use super::report::FamilyReport;
use super::score::MISS_MS;

/// Timelines' window, seconds.
pub const WINDOW_S: usize = 5;

/// A row name in a column of the case matrix.
fn short(name: &str) -> &str {
    match name {
        "round_robin" => "rr",
        "weighted_round_robin" => "wrr",
        "random" => "random",
        "least_in_flight" => "lif",
        "p2c_least_in_flight" => "p2c_lif",
        "least_response_time" => "lrt",
        "p2c_peak_ewma" => "p2c_pe",
        "peak_ewma" => "pe",
        "peak_ewma_orca" => "pe_orca",
        "orca_round_robin" => "orca_rr",
        "tower_p2c" => "tower",
        "loadpace" => "loadpc",
        n => &n[..n.len().min(7)],
    }
}

fn minutes(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn reduced(r: Option<&Reduced>) -> String {
    match r {
        Some(r) => format!(
            "{:>7.2} {:>7.2} [{:.2}] {}",
            r.geomean,
            r.worst,
            r.worst_seed,
            clip(&r.worst_case, 30)
        ),
        None => format!("{:>7} {:>7}", "-", "-"),
    }
}

fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

impl FamilyReport {
    /// The heading line: family, mode, seeds, cases, rows, threads, time.
    pub fn heading(&self) -> String {
        let seeds: Vec<String> = self.seeds.iter().map(u64::to_string).collect();
        format!(
            "family {} ({}, family seed {}, seeds {}, {} cases, {} rows, {} thread{}, {})",
            self.family.name,
            if self.http { "http" } else { "sim" },
            self.family.family_seed,
            seeds.join(","),
            self.cases.len(),
            self.cards.len(),
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            minutes(self.wall)
        )
    }

    /// The whole text: heading, scorecard, case matrix, and over real
    /// sockets the timelines.
    pub fn table(&self) -> String {
        let mut out = format!("\n{}\n", self.heading());
        self.scorecard(&mut out);
        self.matrix(&mut out);
        if self.http {
            self.timelines(&mut out);
        }
        out
    }

    /// The scorecard: one line per row.
    pub fn scorecard(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\nscorecard: p99 of every request (a failure is a miss at {:.0} s) over the oracle's and tower_p2c's;\n\
             geomean over the cases of each case's geometric mean over its seeds; worst: that mean [its worst seed] and the case;\n\
             behind: cases over tower_p2c by more than {:.0}% and {TIE_MS} ms; shares: cases of identical replicas, 1 s windows",
            MISS_MS / 1000.0,
            TIE * 100.0
        );
        let w = self
            .cards
            .iter()
            .map(|c| c.picker.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let _ = writeln!(
            out,
            "{:<w$}  {:<55} {:<55} {:>7}  {:>8} {:>8}",
            "picker", "p99 / oracle", "p99 / tower_p2c", "behind", "max/mean", "starved"
        );
        let _ = writeln!(
            out,
            "{:<w$}  {:>7} {:>7} {:<39} {:>7} {:>7} {:<39} {:>7}  {:>8} {:>8}",
            "", "geomean", "worst", "", "geomean", "worst", "", "tower", "share", "s"
        );
        for c in &self.cards {
            let _ = writeln!(out, "{}", line(c, w));
        }
        if let Some((name, g)) = self.best() {
            let _ = writeln!(out, "best p99 / oracle: {name} ({g:.2})");
        }
    }

    /// Every case: the references' p99 and each row's over tower_p2c's.
    pub fn matrix(&self, out: &mut String) {
        let names: Vec<&str> = self.cards.iter().map(|c| c.picker.as_str()).collect();
        let _ = writeln!(
            out,
            "\ncases: p99 ms of tower_p2c and the oracle, then each row's p99 over tower_p2c's (geometric mean over seeds; * behind)"
        );
        let mut head = format!("{:<34} {:>8} {:>8}", "case", "tower", "oracle");
        for n in &names {
            let _ = write!(head, " {:>8}", short(n));
        }
        let _ = writeln!(out, "{head}");
        for (i, rows) in self.rows.iter().enumerate() {
            let p99 = |name: &str| {
                let xs: Vec<f64> = rows
                    .iter()
                    .find(|r| r.picker == name)
                    .map(|r| {
                        r.seeds
                            .iter()
                            .flatten()
                            .map(|s| s.figures.scored_ms)
                            .collect()
                    })
                    .unwrap_or_default();
                if xs.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.1}", xs.iter().sum::<f64>() / xs.len() as f64)
                }
            };
            let mut line = format!(
                "{:<34} {:>8} {:>8}",
                clip(&self.label(i), 34),
                p99(TOWER),
                p99(ORACLE)
            );
            for n in &names {
                let cell = match rows
                    .iter()
                    .find(|r| r.picker == *n)
                    .and_then(|r| Some((r.vs_tower?, r.over_tower_ms?)))
                {
                    Some((s, over)) => {
                        let mark = if s.mean > 1.0 + TIE && over > TIE_MS {
                            "*"
                        } else {
                            " "
                        };
                        format!("{:.2}{mark}", s.mean)
                    }
                    None => "-".into(),
                };
                let _ = write!(line, " {cell:>8}");
            }
            let _ = writeln!(out, "{line}");
        }
    }

    /// The identical fleets' shares in 5 s windows, per row, at
    /// the first seed.
    pub fn timelines(&self, out: &mut String) {
        for (i, runs) in self.runs.iter().enumerate() {
            if !self.family.cases[i].axes.identical() {
                continue;
            }
            let Some(r) = runs.first() else { continue };
            let _ = writeln!(
                out,
                "\nshares in {WINDOW_S} s windows (% per replica), {}, seed {}:",
                self.label(i),
                r.seed
            );
            timeline(r, out);
        }
    }
}

/// One line per row of `r`: its shares per window.
fn timeline(r: &Report, out: &mut String) {
    let w = r.runs.iter().map(|x| x.picker.len()).max().unwrap_or(6);
    for row in &r.runs {
        let mut line = format!("{:<w$}", row.picker);
        for (k, win) in row.timeline.chunks(WINDOW_S).enumerate() {
            let n = win.first().map_or(0, |s| s.share.len());
            let total: u64 = win.iter().map(|s| s.requests).sum();
            let shares: Vec<String> = (0..n)
                .map(|b| {
                    let picks: f64 = win.iter().map(|s| s.share[b] * s.requests as f64).sum();
                    format!("{:.1}", 100.0 * picks / total.max(1) as f64)
                })
                .collect();
            let _ = write!(
                line,
                "  {}-{} s {}",
                k * WINDOW_S,
                k * WINDOW_S + win.len(),
                shares.join("/")
            );
        }
        let _ = writeln!(out, "{line}");
    }
}

fn line(c: &Card, w: usize) -> String {
    let shares = match &c.shares {
        Some(s) => format!("{:>8.2} {:>8}", s.max_mean, s.starved_s),
        None => format!("{:>8} {:>8}", "-", "-"),
    };
    let compared = c.vs_tower.as_ref().map_or(0, |r| r.cases);
    format!(
        "{:<w$}  {:<55} {:<55} {:>7}  {shares}",
        c.picker,
        reduced(c.vs_oracle.as_ref()),
        reduced(c.vs_tower.as_ref()),
        format!("{}/{compared}", c.behind),
    )
}
