//! What a run leaves behind: the report page (every table and chart in one
//! self-contained HTML file, written by default), and with `--json` every
//! number as JSON with its chart next to it as SVG.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::args::Args;
use super::error::LabError;
use super::report::capacity_curves::CapacityReport;
use super::report::seeds::SeedsDoc;
use super::report::summary::{Seeded, Summary};
use super::report::{Report, svg, sweep};
use super::scenario::Scenario;

/// Writes the report page and the JSON (with its chart) as `a` asks, and
/// says where on stderr (`--quiet` too: it hides progress, not results).
pub fn write(sc: &Scenario, a: &Args, runs: &[Seeded]) -> Result<(), LabError> {
    let mut wrote = Vec::new();
    let summaries: Vec<Summary> = runs.iter().map(|r| r.summary.clone()).collect();
    let firsts: Vec<Report> = runs
        .iter()
        .filter_map(|r| r.reports.first().cloned())
        .collect();
    let seeded = runs.iter().any(|r| r.reports.len() > 1);
    if let Some(path) = &a.json {
        let (json, chart) = match (seeded, firsts.as_slice()) {
            (false, [one]) => (one.to_json(), svg::chart(one, sc.has_events())),
            (false, many) => (
                pretty(&sweep::Sweep::new(many, &a.levels)),
                sweep::chart(&summaries),
            ),
            (true, [one]) => (
                pretty(&SeedsDoc::new(runs, &a.levels)),
                svg::chart(one, sc.has_events()),
            ),
            (true, _) => (
                pretty(&SeedsDoc::new(runs, &a.levels)),
                sweep::chart(&summaries),
            ),
        };
        file(path, json)?;
        file(&path.with_extension("svg"), chart)?;
        wrote.push(path.clone());
        wrote.push(path.with_extension("svg"));
    }
    let page = match &a.report {
        Some(p) => p.clone(),
        None => Some(PathBuf::from(format!("lab-{}.html", sc.name))),
    };
    if let Some(path) = page {
        file(&path, html(sc, runs))?;
        wrote.push(path);
    }
    say_wrote(&wrote);
    Ok(())
}

/// Pretty JSON of a document (an error object if it cannot be written).
fn pretty<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
/// Names the files written, on stderr.
fn say_wrote(wrote: &[PathBuf]) {
    if !wrote.is_empty() {
        let list: Vec<String> = wrote.iter().map(|p| p.display().to_string()).collect();
        eprintln!("wrote {}", list.join(", "));
    }
}

/// A capacity search's report page (its table and curves), and with
/// `--json` its JSON and chart.
pub fn write_capacity(sc: &Scenario, a: &Args, found: &CapacityReport) -> Result<(), LabError> {
    let mut wrote = Vec::new();
    if let Some(path) = &a.json {
        file(path, found.to_json())?;
        file(&path.with_extension("svg"), found.chart())?;
        wrote.push(path.clone());
        wrote.push(path.with_extension("svg"));
    }
    let page = match &a.report {
        Some(p) => p.clone(),
        None => Some(PathBuf::from(format!("lab-{}-capacity.html", sc.name))),
    };
    if let Some(path) = page {
        let body = format!(
            "<h2>Capacity</h2>\n<figure>{}</figure>\n<pre>{}</pre>\n",
            found.chart(),
            esc(&found.table())
        );
        file(&path, page_html(sc, &body))?;
        wrote.push(path);
    }
    say_wrote(&wrote);
    Ok(())
}

/// Writes `text` to `p`; the error names the file.
pub fn file(p: &Path, text: String) -> Result<(), LabError> {
    std::fs::write(p, text)
        .map_err(|e| LabError::runtime(format!("{}: cannot write: {e}", p.display())))
}

/// The report page: a sweep's p99-against-load chart, each level's
/// summary (ratio columns, seed means), the tables as text and each
/// report's chart, in one file with nothing to fetch.
pub fn html(sc: &Scenario, runs: &[Seeded]) -> String {
    let mut body = String::new();
    let summaries: Vec<Summary> = runs.iter().map(|r| r.summary.clone()).collect();
    if runs.len() > 1 {
        let _ = writeln!(
            body,
            "<h2>p99 against load</h2>\n<figure>{}</figure>\n<pre>{}</pre>",
            sweep::chart(&summaries),
            esc(&sweep::summary(&summaries))
        );
    }
    for s in summaries.iter().filter(|s| s.worth_printing()) {
        let _ = writeln!(
            body,
            "<h2>Summary</h2>\n<pre class=\"summary\">{}</pre>",
            esc(&s.table())
        );
    }
    for r in runs.iter().flat_map(|r| &r.reports) {
        let title = match r.target_utilization {
            Some(u) => format!("{} at utilization {u}, seed {}", r.scenario, r.seed),
            None => format!("{}, seed {}", r.scenario, r.seed),
        };
        let _ = writeln!(
            body,
            "<h2>{}</h2>\n<pre>{}</pre>\n<figure>{}</figure>",
            esc(&title),
            esc(&r.table()),
            svg::chart(r, sc.has_events())
        );
    }
    page_html(sc, &body)
}

/// A self-contained page around `body`.
fn page_html(sc: &Scenario, body: &str) -> String {
    page(&sc.name, &sc.description, body)
}

/// A self-contained page titled `name`, with `desc` under the title, around
/// `body` (the family's page too).
pub fn page(name: &str, desc: &str, body: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tower-lb lab: {name}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}pre{{font-size:12px;overflow-x:auto;background:#f7f7f7;padding:1em}}figure{{margin:0}}</style>
</head><body>
<h1>tower-lb lab: {name}</h1>
<p>{desc}</p>
{body}</body></html>
"#,
        name = esc(name),
        desc = esc(desc),
    )
}

/// `s` in HTML text.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
