//! The tower-lb lab: compares pickers on local backends.
//!
//! ```text
//! cargo lab                                          # steady-capacity over real HTTP
//! cargo lab --sim --scenario seed-steady             # the published study, simulated
//! cargo lab --sim --scenario noisy-fleet             # open loop, replicas that slow down
//! cargo lab --sim --scenario noisy-fleet --utilization 0.5,0.7,0.9,0.95   # a sweep
//! cargo lab --sim --json out.json                    # + out.svg
//! cargo lab --peers nginx,haproxy                    # + central proxies
//! cargo lab --sim --find-capacity                    # the load each picker holds
//! cargo lab --sim --scenario noisy-fleet --seeds 1-3  # each cell's mean and range over seeds
//! cargo lab --family                                 # the scenario family's scorecard
//! ```
//!
//! Every run writes a report page (the tables and the charts) and prints its
//! path. See `docs/lab.md` for the table, the scenario format, the rivals,
//! the peers and the JSON schema.

pub mod args;
pub mod driver;
pub mod error;
pub mod family;
pub mod output;
pub mod peers;
pub mod record;
pub mod report;
pub mod rivals;
pub mod run;
pub mod scenario;

use args::{Args, USAGE};
use error::LabError;
use report::summary::{Seeded, Summary};
use report::{Report, sweep};
use scenario::Scenario;

/// Runs the lab with these arguments (without the program name): prints
/// the table (one per seed and utilization level), the summary with its
/// ratio columns and seed means, writes the report page and, if asked, the
/// JSON and its chart; returns the reports (per level, then per seed; none
/// for `--help`).
pub fn cli(args: &[String]) -> Result<Vec<Report>, LabError> {
    // `--family [NAME]`: the scenario family and its scorecard.
    if args
        .iter()
        .any(|a| a == "--family" || a.starts_with("--family="))
    {
        family::cli(args)?;
        return Ok(Vec::new());
    }
    Ok(runs(args)?.into_iter().flat_map(|r| r.reports).collect())
}

/// [`cli`], returning each level's reports with their summary (what the
/// README's tables are: `lab/tests/headline.rs` runs the README's command
/// through this).
pub fn runs(args: &[String]) -> Result<Vec<Seeded>, LabError> {
    let Some(a) = args::parse(args)? else {
        println!("{USAGE}\n\npickers: {}", scenario::known_pickers());
        return Ok(Vec::new());
    };
    let mut sc = Scenario::load(&a.scenario)?;
    if a.connections.is_some() {
        sc.load.connections = a.connections;
    }
    sc.adjust(a.clients, &a.set)?;
    if a.find_capacity {
        if !a.levels.is_empty() || !a.seeds.is_empty() {
            return Err(LabError::input(
                "--find-capacity: steps the load itself at one seed; leave out --utilization and --seeds",
            ));
        }
        let found = driver::find_capacity::find(&sc, &a.opts)?;
        println!("{}", found.table());
        output::write_capacity(&sc, &a, &found)?;
        return Ok(Vec::new());
    }
    let runs = run(&sc, &a)?;
    output::write(&sc, &a, &runs)?;
    Ok(runs)
}

/// Runs the scenario once, or once per `--utilization` level, each once
/// per `--seeds` seed, printing each table as it is done and each level's
/// summary after its seeds.
fn run(sc: &Scenario, a: &Args) -> Result<Vec<Seeded>, LabError> {
    let levels: Vec<Option<f64>> = if a.levels.is_empty() {
        vec![None]
    } else {
        a.levels.iter().copied().map(Some).collect()
    };
    let mut runs = Vec::with_capacity(levels.len());
    for u in levels {
        let mut opts = a.opts.clone();
        opts.utilization = u;
        // Rows print as they finish; without a terminal to watch
        // (`--quiet`), the whole table at the end.
        opts.stream = !opts.quiet;
        let print = |r: &Report| {
            if opts.stream && (a.seeds.len() < 2 || !opts.sim) {
                print!("{}", r.table_tail());
            } else {
                println!("{}", r.table());
            }
        };
        let reports = if a.seeds.is_empty() {
            let r = driver::run_scenario(sc, &opts)?;
            print(&r);
            vec![r]
        } else {
            driver::seeds::run(sc, &opts, &a.seeds, print)?
        };
        let mut run = Seeded::new(reports, &a.ratio);
        if run.summary.worth_printing() {
            println!("\n{}", run.summary.table());
        }
        if let [one] = run.reports.as_mut_slice() {
            one.summary = run.summary.ratio_to.is_some().then(|| run.summary.clone());
        }
        runs.push(run);
    }
    if runs.len() > 1 {
        let summaries: Vec<Summary> = runs.iter().map(|r| r.summary.clone()).collect();
        println!("{}", sweep::summary(&summaries));
    }
    Ok(runs)
}
