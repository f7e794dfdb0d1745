//! The report page renders: a real headless Chromium (Debian's `chromium`)
//! loads the page a sweep writes and reports, from inside the page, the
//! size of every chart and how many of its marks (bars, lines, labels)
//! have a non-empty box once laid out; it also takes a screenshot. The
//! family's page (`cargo lab --family`) is loaded the same way: its heat
//! maps have a cell for every row of every case.
//!
//! Without Chromium the test is skipped with a notice, so `cargo test` on
//! a fresh machine needs nothing but cargo; with
//! `TOWER_LB_REQUIRE_CHROMIUM=1` (set by `.ci/run`, which installs it) a
//! missing browser fails.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tower_lb_lab as lab;

use lab::report::summary::{RatioTo, Seeded};

use lab::driver::{Options, run_scenario};
use lab::scenario::{PickerName, Scenario};

/// Reports, from inside the page once it has loaded, `[width, height,
/// marks]` for each `<svg>`: its laid-out size and the number of its
/// marks whose bounding box is not empty.
const PROBE: &str = r#"<script>addEventListener('load', () => {
  const charts = [...document.querySelectorAll('svg')].map(v => {
    const r = v.getBoundingClientRect();
    const marks = [...v.querySelectorAll('rect,path,polyline,line,circle,text')]
      .filter(e => { const b = e.getBBox(); return b.width > 0 || b.height > 0; }).length;
    return [Math.round(r.width), Math.round(r.height), marks];
  });
  const p = document.createElement('pre');
  p.id = 'probe';
  p.textContent = JSON.stringify(charts);
  document.body.appendChild(p);
})</script>"#;

/// Debian's Chromium, or `None` after a notice (a failure with
/// `TOWER_LB_REQUIRE_CHROMIUM=1`).
fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        if std::env::var("TOWER_LB_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1") {
            panic!("TOWER_LB_REQUIRE_CHROMIUM=1 and no chromium (apt-get install chromium)");
        }
        let _ = writeln!(
            std::io::stderr(),
            "\n*** report_page: SKIPPED: no chromium (Debian/Ubuntu: apt-get install chromium).\n"
        );
    }
    found
}

/// Runs headless Chromium on `page` with `args`; its standard output.
fn browse(browser: &Path, dir: &Path, args: &[&str], page: &Path) -> String {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium starts");
    assert!(out.status.success(), "chromium: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A two-level sweep of the `steady-fleet` scenario (open loop), in sim mode.
fn sweep_page() -> String {
    let sc = Scenario::load("steady-fleet").expect("shipped scenario parses");
    let reports: Vec<_> = [0.5, 0.8]
        .into_iter()
        .map(|u| {
            let opts = Options {
                sim: true,
                duration: Some(Duration::from_secs(3)),
                pickers: Some(
                    ["round_robin", "peak_ewma"]
                        .iter()
                        .map(|p| p.parse::<PickerName>().expect("known picker"))
                        .collect(),
                ),
                seed: Some(1),
                utilization: Some(u),
                quiet: true,
                ..Options::default()
            };
            let r = run_scenario(&sc, &opts).expect("scenario runs");
            Seeded::new(vec![r], &RatioTo::Default)
        })
        .collect();
    lab::output::html(&sc, &reports)
}

/// Loads `html` with `script` added, and parses what the script left in
/// `<pre id="probe">`.
fn probe<T: serde::de::DeserializeOwned>(
    browser: &Path,
    dir: &Path,
    html: &str,
    script: &str,
) -> T {
    let probed = dir.join("probed.html");
    std::fs::write(
        &probed,
        html.replace("</body>", &format!("{script}</body>")),
    )
    .unwrap();
    let dom = browse(
        browser,
        dir,
        &["--virtual-time-budget=2000", "--dump-dom"],
        &probed,
    );
    let json = dom
        .split("<pre id=\"probe\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .unwrap_or_else(|| panic!("the probe did not run: {dom}"));
    serde_json::from_str(json).expect("the probe's JSON")
}

#[test]
fn the_report_page_renders_every_chart_in_chromium() {
    let Some(browser) = chromium() else { return };
    let dir = std::env::temp_dir().join(format!("tower-lb-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = sweep_page();
    // One chart per level, and the sweep's p99 against load.
    assert_eq!(html.matches("<svg").count(), 3, "{html}");

    let charts: Vec<[u32; 3]> = probe(&browser, &dir, &html, PROBE);
    assert_eq!(charts.len(), 3, "{charts:?}");
    for [w, h, marks] in &charts {
        assert!(
            *w >= 300 && *h >= 150,
            "a chart laid out at {w}×{h}: {charts:?}"
        );
        assert!(
            *marks >= 10,
            "a chart with {marks} visible marks: {charts:?}"
        );
    }

    let page = dir.join("page.html");
    std::fs::write(&page, &html).unwrap();
    let shot = dir.join("page.png");
    let arg = format!("--screenshot={}", shot.display());
    browse(&browser, &dir, &["--window-size=1400,2400", &arg], &page);
    let png = std::fs::read(&shot).expect("the screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reports, for each heat map, `[width, height, cells]`: its laid-out size
/// and how many of its `heat-cell` rectangles have a box and a fill.
const HEAT_PROBE: &str = r#"<script>addEventListener('load', () => {
  const maps = [...document.querySelectorAll('svg.heat-map')].map(v => {
    const r = v.getBoundingClientRect();
    const cells = [...v.querySelectorAll('rect.heat-cell')]
      .filter(e => { const b = e.getBBox(); return b.width > 0 && b.height > 0 && e.getAttribute('fill'); }).length;
    return [Math.round(r.width), Math.round(r.height), cells];
  });
  const p = document.createElement('pre');
  p.id = 'probe';
  p.textContent = JSON.stringify(maps);
  document.body.appendChild(p);
})</script>"#;

/// A family of two quick cases and three rows: the page draws a heat map
/// of picker × case against tower_p2c and one against the oracle, a cell
/// for every row of every case.
#[test]
fn the_family_page_draws_its_heat_maps_in_chromium() {
    let Some(browser) = chromium() else { return };
    let dir = std::env::temp_dir().join(format!("tower-lb-family-page-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = lab::family::FamilyArgs {
        cases: Some(vec!["q01".into(), "q04".into()]),
        pickers: Some(
            ["peak_ewma", "tower_p2c", "oracle"]
                .iter()
                .map(|p| p.parse::<PickerName>().expect("known picker"))
                .collect(),
        ),
        duration: Some(Duration::from_secs(2)),
        quiet: true,
        ..lab::family::FamilyArgs::new("quick")
    };
    let report = lab::family::run(&a).unwrap().expect("a run");
    let html = report.html();
    assert_eq!(html.matches("class=\"heat-map\"").count(), 2, "{html}");
    let maps: Vec<[u32; 3]> = probe(&browser, &dir, &html, HEAT_PROBE);
    assert_eq!(maps.len(), 2, "{maps:?}");
    for [w, h, cells] in &maps {
        assert!(
            *w >= 300 && *h >= 100,
            "a heat map laid out at {w}×{h}: {maps:?}"
        );
        assert_eq!(*cells, 3 * 2, "{maps:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
