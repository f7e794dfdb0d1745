//! The command line as docs/lab.md writes it (issue 37): a leading `--`,
//! `--quiet` still naming the files written, `--seeds` with its means and
//! ranges, `--ratio-to`, `--clients`, and picker settings (`[picker.NAME]`,
//! `--set`) that reach the picker.

mod common;

use std::process::Command;

use tower_lb_lab as lab;

use common::{options, parse, refused};
use lab::args;
use lab::driver::run_scenario;
use lab::report::summary::{RatioTo, Summary};
use lab::scenario::tuning::parse_set;
use lab::scenario::{Scenario, SetFlag};

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_leading_double_dash_is_skipped() {
    // `cargo lab -- --peers nginx`: the alias ends in `--` already, so the
    // lab sees one more.
    let a = args::parse(&strings(&["--", "--peers", "nginx", "--sim"]))
        .expect("parses")
        .expect("not --help");
    let peers = a.opts.peers.expect("--peers was read");
    assert_eq!(peers.len(), 1);
    assert!(a.opts.sim);
    let err = args::parse(&strings(&["--", "--bogus"])).unwrap_err();
    assert!(err.message.contains("unknown flag \"--bogus\""), "{err}");
}

#[test]
fn seeds_lists_and_ranges_parse_and_bad_ones_are_named() {
    let seeds = |v: &str| args::parse(&strings(&["--seeds", v])).map(|a| a.unwrap().seeds);
    assert_eq!(seeds("1-3").unwrap(), [1, 2, 3]);
    assert_eq!(seeds("1,4,7").unwrap(), [1, 4, 7]);
    assert_eq!(seeds("1-3,7,2").unwrap(), [1, 2, 3, 7]);
    for bad in ["3-1", "x", "", "1-100000"] {
        let e = seeds(bad).unwrap_err();
        assert!(e.message.starts_with("--seeds: "), "{bad}: {e}");
    }
    let both = args::parse(&strings(&["--seed", "2", "--seeds", "1-3"])).unwrap_err();
    assert!(both.message.contains("--seed and --seeds"), "{both}");
}

#[test]
fn quiet_still_says_where_the_report_went() {
    let dir = std::env::temp_dir().join(format!("tower-lb-quiet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.html");
    let out = Command::new(env!("CARGO_BIN_EXE_tower-lb-lab"))
        .args([
            "--",
            "--sim",
            "--quiet",
            "--scenario",
            "hop",
            "--duration",
            "1s",
        ])
        .args(["--pickers", "round_robin", "--report"])
        .arg(&page)
        .output()
        .expect("the lab runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("wrote {}", page.display())),
        "stderr: {stderr}"
    );
    assert!(page.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn seed_means_and_ranges_are_the_runs_at_each_seed() {
    let sc = Scenario::load("steady-fleet").unwrap();
    let pickers = ["peak_ewma", "tower_p2c"];
    let at = |seed| run_scenario(&sc, &options(&pickers, 2, seed)).unwrap();
    let (one, two) = (at(1), at(2));
    let s = Summary::new(&[one.clone(), two.clone()], &RatioTo::Default);
    assert_eq!(s.seeds, [1, 2]);
    assert_eq!(s.ratio_to.as_deref(), Some("tower_p2c (rival)"));
    let row = |name: &str| s.rows.iter().find(|r| r.row == name).unwrap();
    let pe = row("peak_ewma");
    let p99 = [one.run("peak_ewma"), two.run("peak_ewma")].map(|r| r.unwrap().latency_ms.p99);
    assert!((pe.p99_ms.mean - (p99[0] + p99[1]) / 2.0).abs() < 1e-9);
    assert_eq!(pe.p99_ms.min, p99[0].min(p99[1]));
    assert_eq!(pe.p99_ms.max, p99[0].max(p99[1]));
    // Ratios are taken per seed, then averaged.
    let t = [one.run("tower_p2c"), two.run("tower_p2c")].map(|r| r.unwrap().latency_ms.p99);
    let ratio = (p99[0] / t[0] + p99[1] / t[1]) / 2.0;
    assert!((pe.p99_ratio.unwrap().mean - ratio).abs() < 1e-9);
    assert_eq!(row("tower_p2c (rival)").p99_ratio.unwrap().mean, 1.0);
    // The table shows each cell's mean and range, and the ratio columns.
    let table = s.table();
    assert!(table.contains("seeds 1-2: mean (min-max)"), "{table}");
    assert!(table.contains("p99/tower_p2c"), "{table}");
    let cell = format!(
        "{:.1} ({:.1}-{:.1})",
        pe.p99_ms.mean, pe.p99_ms.min, pe.p99_ms.max
    );
    assert!(
        pe.p99_ms.min == pe.p99_ms.max || table.contains(&cell),
        "{cell}\n{table}"
    );
    // Without a reference row there are no ratio columns.
    let none = Summary::new(&[one], &RatioTo::None);
    assert!(!none.table().contains("p99/"), "{}", none.table());
}

#[test]
fn clients_override_is_checked_like_the_field() {
    let mut sc = Scenario::load("scale-out").unwrap();
    sc.adjust(Some(8), &[]).expect("8 of 200 users");
    assert_eq!(sc.load.clients, 8);
    let e = sc.adjust(Some(0), &[]).unwrap_err();
    assert!(e.message.contains("--clients: `load.clients`"), "{e}");
}

const PREQUAL: &str = r#"
name = "t"
duration = "2s"
pickers = ["prequal"]
[load]
vus = 20
think = "10ms"
[[backend]]
name = "a"
count = 8
delay = "5ms"
workers = 4
"#;

#[test]
fn a_picker_setting_reaches_the_picker_and_names_the_row() {
    let probes_per_request = |sc: &Scenario| {
        let r = run_scenario(sc, &options(&["prequal"], 2, 1)).unwrap();
        let x = &r.runs[0];
        (
            x.picker.clone(),
            x.probes.unwrap().sent as f64 / x.requests as f64,
        )
    };
    let (name, default) = probes_per_request(&parse(PREQUAL));
    assert_eq!(name, "prequal");
    assert!(default > 2.5, "{default}");
    let one = parse(&format!(
        "{PREQUAL}[picker.prequal]\nprobes_per_request = 1\n"
    ));
    let (name, set) = probes_per_request(&one);
    assert_eq!(name, "prequal{probes_per_request=1}");
    assert!(set < 1.5, "{set}");
}

fn flag(text: &str, vary: bool) -> SetFlag {
    parse_set(text, vary).expect("a good flag")
}

#[test]
fn set_with_several_values_makes_one_row_each() {
    let mut sc = parse(PREQUAL);
    sc.adjust(None, &[flag("prequal.pool_size=8,32", false)])
        .unwrap();
    let r = run_scenario(&sc, &options(&["prequal"], 1, 1)).unwrap();
    let names: Vec<&str> = r.runs.iter().map(|x| x.picker.as_str()).collect();
    assert_eq!(names, ["prequal{pool_size=8}", "prequal{pool_size=32}"]);
    let mut sc = parse(PREQUAL);
    let e = sc
        .adjust(None, &[flag("prequal.sample_decay=x", false)])
        .unwrap_err();
    assert!(
        e.message.starts_with("--set: prequal.sample_decay=x"),
        "{e}"
    );
    for bad in ["prequal", "prequal.pool_size", ".x=1", "prequal.pool_size="] {
        assert!(parse_set(bad, false).is_err(), "{bad}");
    }
}

#[test]
fn vary_adds_rows_beside_the_pickers_own() {
    let mut sc = parse(PREQUAL);
    let flags = [
        flag("prequal.max_age=2s", false),
        flag("prequal.pool_size=8,32", true),
        flag("prequal.max_uses=3", true),
    ];
    sc.adjust(None, &flags).unwrap();
    let r = run_scenario(&sc, &options(&["prequal"], 1, 1)).unwrap();
    let names: Vec<&str> = r.runs.iter().map(|x| x.picker.as_str()).collect();
    assert_eq!(
        names,
        [
            "prequal{max_age=2s}",
            "prequal{pool_size=8, max_age=2s}",
            "prequal{pool_size=32, max_age=2s}",
            "prequal{max_age=2s, max_uses=3}",
        ]
    );
}

#[test]
fn bad_picker_settings_are_named() {
    let cases = [
        (
            "[picker.round_robin]\nchoices = 4",
            "`picker.round_robin.choices`",
        ),
        (
            "[picker.peak_ewma]\nchoices = 0",
            "`picker.peak_ewma.choices`",
        ),
        (
            "[picker.peak_ewma]\nsample_decay = \"0s\"",
            "`picker.peak_ewma.sample_decay`",
        ),
        (
            "[picker.prequal]\nrif_quantile = 2.0",
            "`picker.prequal.rif_quantile`",
        ),
        ("[picker.tower_p2c]\ndecay = \"1s\"", "`picker.tower_p2c`"),
        ("[picker.nonesuch]\ndecay = \"1s\"", "`picker.nonesuch`"),
        ("[picker.peak_ewma]\nchoice = 4", "unknown field `choice`"),
    ];
    for (extra, named) in cases {
        let e = refused(&format!("{PREQUAL}{extra}\n"));
        assert!(e.contains(named), "{extra}: {e}");
    }
}
