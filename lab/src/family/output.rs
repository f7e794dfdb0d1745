//! What a family run leaves behind: the report page (the scorecard, its
//! heat maps, every case's tables and scenario file) and with `--json`
//! every figure as JSON (`tower-lb-lab-family/1`).

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use super::args::FamilyArgs;
use super::axes::Axes;
use super::card::{Card, RowResult, TIE, TIE_MS};
use super::case::MIN_FAIR_PICKS;
use super::heat::{self, Reference};
use super::lab::{LabError, page};
use super::report::FamilyReport;
use super::score::MISS_MS;

/// The JSON schema identifier.
pub const SCHEMA: &str = "tower-lb-lab-family/1";

#[derive(Serialize)]
struct Doc<'a> {
    schema: &'static str,
    family: &'a str,
    family_seed: u64,
    mode: &'static str,
    seeds: &'a [u64],
    threads: usize,
    wall_s: f64,
    miss_ms: f64,
    tie: f64,
    tie_ms: f64,
    min_fair_picks: f64,
    best: Option<Best<'a>>,
    scorecard: &'a [Card],
    cases: Vec<CaseDoc<'a>>,
}

#[derive(Serialize)]
struct Best<'a> {
    picker: &'a str,
    vs_oracle: f64,
}

#[derive(Serialize)]
struct CaseDoc<'a> {
    id: &'a str,
    name: &'a str,
    note: &'a str,
    axes: &'a Axes,
    identical: bool,
    share_bounds: bool,
    duration_s: f64,
    rate: f64,
    scenario: &'a str,
    rows: &'a [RowResult],
    timelines: Vec<Timeline<'a>>,
}

/// A row's shares per second, per replica (identical fleets only).
#[derive(Serialize)]
struct Timeline<'a> {
    seed: u64,
    picker: &'a str,
    shares: Vec<&'a [f64]>,
}

impl FamilyReport {
    /// The JSON document.
    pub fn to_json(&self) -> String {
        let cases = self
            .family
            .cases
            .iter()
            .enumerate()
            .map(|(i, c)| CaseDoc {
                id: &c.id,
                name: &c.name,
                note: &c.note,
                axes: &c.axes,
                identical: c.axes.identical(),
                share_bounds: self.shares[i],
                duration_s: self.cases[i].scenario.duration.0.as_secs_f64(),
                rate: self.cases[i].rate,
                scenario: &self.cases[i].text,
                rows: &self.rows[i],
                timelines: if c.axes.identical() {
                    self.runs[i]
                        .iter()
                        .flat_map(|r| {
                            r.runs.iter().map(|x| Timeline {
                                seed: r.seed,
                                picker: &x.picker,
                                shares: x.timeline.iter().map(|s| s.share.as_slice()).collect(),
                            })
                        })
                        .collect()
                } else {
                    Vec::new()
                },
            })
            .collect();
        let doc = Doc {
            schema: SCHEMA,
            family: &self.family.name,
            family_seed: self.family.family_seed,
            mode: if self.http { "http" } else { "sim" },
            seeds: &self.seeds,
            threads: self.threads,
            wall_s: self.wall.as_secs_f64(),
            miss_ms: MISS_MS,
            tie: TIE,
            tie_ms: TIE_MS,
            min_fair_picks: MIN_FAIR_PICKS,
            best: self
                .best()
                .map(|(picker, vs_oracle)| Best { picker, vs_oracle }),
            scorecard: &self.cards,
            cases,
        };
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The report page.
    pub fn html(&self) -> String {
        let mut body = String::new();
        let mut card = String::new();
        self.scorecard(&mut card);
        let _ = writeln!(body, "<h2>Scorecard</h2>\n<pre>{}</pre>", page::esc(&card));
        for reference in [Reference::Tower, Reference::Oracle] {
            if let Some(svg) = heat::map(self, reference) {
                let _ = writeln!(body, "<figure>{svg}</figure>");
            }
        }
        let mut matrix = String::new();
        self.matrix(&mut matrix);
        if self.http {
            self.timelines(&mut matrix);
        }
        let _ = writeln!(body, "<h2>Cases</h2>\n<pre>{}</pre>", page::esc(&matrix));
        for (i, runs) in self.runs.iter().enumerate() {
            let _ = writeln!(
                body,
                "<details><summary>{}: {}</summary>\n<pre>{}</pre>",
                page::esc(&self.label(i)),
                page::esc(&self.family.cases[i].axes.to_string()),
                page::esc(&self.cases[i].text)
            );
            for r in runs {
                let _ = writeln!(body, "<pre>{}</pre>", page::esc(&r.table()));
            }
            let _ = writeln!(body, "</details>");
        }
        page::page(
            &format!("family {}", self.family.name),
            &self.heading(),
            &body,
        )
    }
}

/// Writes the page and the JSON as `a` asks, and says where unless
/// `--quiet`.
pub fn write(r: &FamilyReport, a: &FamilyArgs) -> Result<(), LabError> {
    let mut wrote = Vec::new();
    if let Some(path) = &a.json {
        page::file(path, r.to_json())?;
        wrote.push(path.clone());
    }
    let page = match &a.report {
        Some(p) => p.clone(),
        None => Some(PathBuf::from(format!("lab-family-{}.html", r.family.name))),
    };
    if let Some(path) = page {
        page::file(&path, r.html())?;
        wrote.push(path);
    }
    if !a.quiet && !wrote.is_empty() {
        let list: Vec<String> = wrote.iter().map(|p| p.display().to_string()).collect();
        eprintln!("wrote {}", list.join(", "));
    }
    Ok(())
}
