//! What the issue-31 tests share: sim options, parsing, finding a row.
#![allow(dead_code)]

use std::time::Duration;

use tower_lb_lab as lab;

use lab::driver::{Options, run_scenario};
use lab::report::{PickerReport, Report};
use lab::scenario::{PickerName, Scenario};

/// `--sim --quiet` with these pickers, duration and seed.
pub fn options(pickers: &[&str], secs: u64, seed: u64) -> Options {
    Options {
        sim: true,
        duration: Some(Duration::from_secs(secs)),
        pickers: Some(
            pickers
                .iter()
                .map(|p| p.parse::<PickerName>().expect("known picker"))
                .collect(),
        ),
        seed: Some(seed),
        quiet: true,
        stream: false,
        ..Options::default()
    }
}

/// A scenario that must parse.
pub fn parse(text: &str) -> Scenario {
    Scenario::parse(text, "test.toml").expect("the scenario parses")
}

/// The error a scenario that must not parse gives.
pub fn refused(text: &str) -> String {
    Scenario::parse(text, "test.toml")
        .expect_err("the scenario is refused")
        .message
}

/// Runs `sc` in sim mode.
pub fn sim(sc: &Scenario, pickers: &[&str], secs: u64) -> Report {
    run_scenario(sc, &options(pickers, secs, 1)).expect("the run succeeds")
}

/// The row named `name`.
pub fn row<'a>(r: &'a Report, name: &str) -> &'a PickerReport {
    r.runs
        .iter()
        .find(|x| x.picker == name)
        .unwrap_or_else(|| panic!("{name} did not run: {:?}\n{}", r.notes, r.table()))
}
