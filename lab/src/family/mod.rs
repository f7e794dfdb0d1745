//! The scenario family and its scorecard (`cargo lab --family [NAME]`).
//!
//! A picker is judged on a family of fleets, never on one. A family is a
//! list of cases: the fleets issue 36 names, identical LAN replicas, and
//! cases drawn from a seed across the axes that change a balancer's answer
//! (replicas, client balancers, workers, service-time mix, slowdowns,
//! load, latency scale: [`axes`]). Each case is a generated scenario
//! file, run like any other once per seed with every picker, the rivals
//! and, in sim, the oracle; the scorecard reduces the runs per picker:
//! p99 against the oracle and against `tower_p2c` (geometric mean and
//! worst case), the cases behind `tower_p2c`, and the share balance on
//! identical replicas. It is printed, written to the JSON (`--json`) and
//! drawn on the report page as heat maps of picker × case.
//!
//! ```text
//! cargo lab --family                       # all: every case, sim, seeds 1-3
//! cargo lab --family quick                 # the tests' subset, seed 1
//! cargo lab --family http                  # the LAN fleets over real sockets
//! cargo lab --family all --family-seed 2   # other generated cases (judging)
//! cargo lab --family named --print         # the cases as scenario files
//! ```
//!
//! See `docs/lab.md`, "Family and scorecard".

mod args;
pub mod axes;
pub mod card;
mod case;
mod generate;
mod heat;
mod lab;
mod named;
mod output;
mod report;
mod run;
pub mod score;
mod table;
pub mod toml;

use std::time::Instant;

use lab::{LabError, PickerName};

pub use args::{FamilyArgs, USAGE};
pub use card::{Card, RowResult};
pub use case::{Case, HASH_PICKERS, MIN_FAIR_PICKS};
pub use generate::{FAMILIES, Family, GENERATED, family};
pub use report::FamilyReport;

/// The rows a family runs unless `--pickers` says otherwise: every picker
/// of the registry but the hash pickers, the rivals, and in sim the
/// oracle.
pub fn default_pickers(sim: bool) -> Vec<PickerName> {
    PickerName::all()
        .filter(|p| !HASH_PICKERS.contains(&p.as_str()))
        .filter(|p| sim || *p != PickerName::Oracle)
        .collect()
}

/// `cargo lab --family ...`: parses the flags, runs (or prints) the
/// family, prints the scorecard and writes the page and the JSON.
pub fn cli(args: &[String]) -> Result<Option<FamilyReport>, LabError> {
    let Some(a) = args::parse(args)? else {
        println!("{USAGE}");
        return Ok(None);
    };
    let report = run(&a)?;
    if let Some(r) = &report {
        println!("{}", r.table());
        output::write(r, &a)?;
    }
    Ok(report)
}

/// Runs the family `a` names; `None` when `a.print` asked for its scenario
/// files instead (printed).
pub fn run(a: &FamilyArgs) -> Result<Option<FamilyReport>, LabError> {
    let (fam, sim, cases) = resolved(a)?;
    if a.print {
        for c in &cases {
            println!("{}", c.text);
        }
        return Ok(None);
    }
    let seeds = a.seeds.clone().unwrap_or_else(|| fam.seeds.clone());
    let plan = run::Plan {
        sim,
        seeds: seeds.clone(),
        pickers: a.pickers.clone(),
        jobs: a.jobs,
        quiet: a.quiet,
    };
    let started = Instant::now();
    let runs = run::all(&cases, &plan)?;
    let wall = started.elapsed();
    let shares: Vec<bool> = fam
        .cases
        .iter()
        .zip(&cases)
        .map(|(c, r)| c.axes.identical() && r.rate / f64::from(c.axes.replicas) >= MIN_FAIR_PICKS)
        .collect();
    let rows: Vec<Vec<RowResult>> = runs
        .iter()
        .zip(&shares)
        .map(|(r, &s)| card::rows(r, &seeds, s))
        .collect();
    let cards = scorecard(&fam, &rows, &shares);
    Ok(Some(FamilyReport {
        family: fam,
        cases,
        http: !sim,
        seeds,
        runs,
        rows,
        shares,
        cards,
        threads: if sim { a.jobs } else { 1 },
        wall,
    }))
}

/// The family `a` names, narrowed to `--case`, whether it runs in sim,
/// and its cases as scenarios.
fn resolved(a: &FamilyArgs) -> Result<(Family, bool, Vec<toml::Resolved>), LabError> {
    // The generator reads the pickers only to size its cases.
    let mut fam = family(&a.name, a.family_seed, &default_pickers(true))?;
    let sim = a.sim || !fam.http;
    let pickers = default_pickers(sim);
    if let Some(want) = &a.cases {
        fam.cases
            .retain(|c| want.iter().any(|w| *w == c.id || *w == c.name));
        if fam.cases.is_empty() {
            return Err(LabError::input(format!(
                "--case: no case of family {} is called {}",
                fam.name,
                want.join(", ")
            )));
        }
    }
    let secs = a.duration.map(|d| d.as_secs().max(1));
    let cases = fam
        .cases
        .iter()
        .map(|c| toml::resolve(c, &fam.name, &pickers, fam.budget, secs))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((fam, sim, cases))
}

/// The cards of `rows` (per case), with `shares` saying which cases the
/// share bounds apply to.
fn scorecard(fam: &Family, rows: &[Vec<RowResult>], shares: &[bool]) -> Vec<Card> {
    let scored: Vec<card::Scored<'_>> = fam
        .cases
        .iter()
        .zip(rows)
        .zip(shares)
        .map(|((c, r), &s)| card::Scored {
            label: c.label(),
            shares: s,
            rows: r,
        })
        .collect();
    card::cards(&scored)
}
