//! What a run leaves behind: the report page (every table and chart in one
//! self-contained HTML file, written by default), and with `--json` every
//! number as JSON with its chart next to it as SVG.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::args::Args;
use super::error::LabError;
use super::report::capacity_curves::CapacityReport;
use super::report::{Report, svg, sweep};
use super::scenario::Scenario;

/// Writes the report page and the JSON (with its chart) as `a` asks, and
/// says where on stderr unless `--quiet`.
pub fn write(sc: &Scenario, a: &Args, reports: &[Report]) -> Result<(), LabError> {
    let mut wrote = Vec::new();
    if let Some(path) = &a.json {
        let (json, chart) = match reports {
            [one] => (one.to_json(), svg::chart(one, sc.has_events())),
            many => (
                serde_json::to_string_pretty(&sweep::Sweep::new(many, &a.levels))
                    .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")),
                sweep::chart(many),
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
        file(&path, html(sc, reports))?;
        wrote.push(path);
    }
    if !a.opts.quiet && !wrote.is_empty() {
        let list: Vec<String> = wrote.iter().map(|p| p.display().to_string()).collect();
        eprintln!("wrote {}", list.join(", "));
    }
    Ok(())
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
    if !a.opts.quiet && !wrote.is_empty() {
        let list: Vec<String> = wrote.iter().map(|p| p.display().to_string()).collect();
        eprintln!("wrote {}", list.join(", "));
    }
    Ok(())
}

/// Writes `text` to `p`; the error names the file.
pub fn file(p: &Path, text: String) -> Result<(), LabError> {
    std::fs::write(p, text)
        .map_err(|e| LabError::runtime(format!("{}: cannot write: {e}", p.display())))
}

/// The report page: the tables as text, each report's chart, and a sweep's
/// p99-against-load chart, in one file with nothing to fetch.
pub fn html(sc: &Scenario, reports: &[Report]) -> String {
    let mut body = String::new();
    if reports.len() > 1 {
        let _ = writeln!(
            body,
            "<h2>p99 against load</h2>\n<figure>{}</figure>\n<pre>{}</pre>",
            sweep::chart(reports),
            esc(&sweep::summary(reports))
        );
    }
    for r in reports {
        let title = match r.target_utilization {
            Some(u) => format!("{} at utilization {u}", r.scenario),
            None => r.scenario.clone(),
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
