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
use report::{Report, sweep};
use scenario::Scenario;

/// Runs the lab with these arguments (without the program name): prints
/// the table (one per utilization level of a sweep), writes the report page
/// and, if asked, the JSON and its chart; returns the reports (none for
/// `--help`).
pub fn cli(args: &[String]) -> Result<Vec<Report>, LabError> {
    // `--family [NAME]`: the scenario family and its scorecard.
    if args
        .iter()
        .any(|a| a == "--family" || a.starts_with("--family="))
    {
        family::cli(args)?;
        return Ok(Vec::new());
    }
    let Some(a) = args::parse(args)? else {
        println!("{USAGE}\n\npickers: {}", scenario::known_pickers());
        return Ok(Vec::new());
    };
    let mut sc = Scenario::load(&a.scenario)?;
    if a.connections.is_some() {
        sc.load.connections = a.connections;
    }
    if a.find_capacity {
        if !a.levels.is_empty() {
            return Err(LabError::input(
                "--find-capacity: steps the load itself; leave out --utilization",
            ));
        }
        let found = driver::find_capacity::find(&sc, &a.opts)?;
        println!("{}", found.table());
        output::write_capacity(&sc, &a, &found)?;
        return Ok(Vec::new());
    }
    let reports = run(&sc, &a)?;
    output::write(&sc, &a, &reports)?;
    Ok(reports)
}

/// Runs the scenario once, or once per `--utilization` level, printing
/// each table as it is done.
fn run(sc: &Scenario, a: &Args) -> Result<Vec<Report>, LabError> {
    let levels: Vec<Option<f64>> = if a.levels.is_empty() {
        vec![None]
    } else {
        a.levels.iter().copied().map(Some).collect()
    };
    let mut reports = Vec::with_capacity(levels.len());
    for u in levels {
        let mut opts = a.opts.clone();
        opts.utilization = u;
        // Rows print as they finish; without a terminal to watch
        // (`--quiet`), the whole table at the end.
        opts.stream = !opts.quiet;
        let report = driver::run_scenario(sc, &opts)?;
        if opts.stream {
            print!("{}", report.table_tail());
        } else {
            println!("{}", report.table());
        }
        reports.push(report);
    }
    if reports.len() > 1 {
        println!("{}", sweep::summary(&reports));
    }
    Ok(reports)
}
