//! The tower-lb lab: compares pickers on local backends.
//!
//! ```text
//! cargo lab                                     # steady-capacity over real HTTP
//! cargo lab --sim --scenario seed-steady
//! cargo lab --sim --json out.json   # + out.svg
//! cargo lab --peers nginx,haproxy   # + central proxies
//! ```
//!
//! See "The lab in detail" in the top-level README for the table, the scenario format, the
//! peers and the JSON schema.

pub mod backend;
pub mod body;
pub mod driver;
pub mod endpoint;
pub mod error;
pub mod fleet;
pub mod load;
pub mod oracle;
pub mod peers;
pub mod record;
pub mod report;
pub mod scenario;
pub mod server;
pub mod svg;
pub mod timed;
pub mod users;

use std::path::{Path, PathBuf};

use driver::Options;
use error::LabError;
use report::Report;
use scenario::{PickerName, Scenario};

/// The scenario run when `--scenario` is absent.
pub const DEFAULT_SCENARIO: &str = "steady-capacity";

const USAGE: &str = "\
usage: cargo lab [FLAGS]

  --scenario NAME|FILE   a shipped scenario or a TOML file (default: steady-capacity)
  --sim                  simulated time, in-process backends (fast, reproducible)
  --duration DUR         per-picker run time, e.g. 20s (overrides the scenario)
  --pickers a,b,...      pickers to compare (overrides the scenario)
  --peers nginx,haproxy  central proxies in front of the same backends, one row
                         per policy (http mode; nginx:least_conn for one policy;
                         none for no peers; overrides the scenario)
  --json FILE            write every number to FILE, and a chart next to it (.svg)
  --seed N               seed of every random number (default: the scenario's, else 1)
  --warm-select          time a second pick made right after the one that
                         decides (its result unused): selection with warm
                         caches; cursors of round robin pickers then advance
                         twice per request, so read those rows' shares with care
  --per-thread-load      each worker thread picks with its own view of the
                         endpoints' load (Builder::per_thread_load; http
                         mode: the sim runs on one thread)
  --quiet                no progress line
  --help                 this text

In http mode (without --sim) Prometheus metrics are served while the lab
runs, at the address printed at the start (metrics: http://127.0.0.1:PORT/metrics).";

/// Parsed command line.
#[derive(Debug, Clone)]
pub struct Args {
    /// `--scenario`.
    pub scenario: String,
    /// Run options.
    pub opts: Options,
    /// `--json`.
    pub json: Option<PathBuf>,
}

/// Parses the flags; `Ok(None)` means `--help`.
pub fn parse_args(args: &[String]) -> Result<Option<Args>, LabError> {
    let mut a = Args {
        scenario: DEFAULT_SCENARIO.to_string(),
        opts: Options::default(),
        json: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (flag.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| LabError::input(format!("{name}: needs a value")))
        };
        match flag {
            "--help" | "-h" => return Ok(None),
            "--sim" => a.opts.sim = true,
            "--quiet" | "-q" => a.opts.quiet = true,
            "--warm-select" => a.opts.warm_select = true,
            "--per-thread-load" => a.opts.per_thread_load = true,
            "--scenario" => a.scenario = value(flag)?,
            "--json" => a.json = Some(PathBuf::from(value(flag)?)),
            "--duration" => {
                let v = value(flag)?;
                let d = scenario::parse_duration(&v)
                    .map_err(|e| LabError::input(format!("--duration: {e}")))?;
                if d.is_zero() {
                    return Err(LabError::input("--duration: must be > 0"));
                }
                a.opts.duration = Some(d);
            }
            "--seed" => {
                let v = value(flag)?;
                a.opts.seed = Some(v.parse().map_err(|_| {
                    LabError::input(format!("--seed: \"{v}\" is not an integer in 0..2^64"))
                })?);
            }
            "--pickers" => {
                let v = value(flag)?;
                let list = v
                    .split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| s.trim().parse::<PickerName>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| LabError::input(format!("--pickers: {e}")))?;
                if list.is_empty() {
                    return Err(LabError::input("--pickers: list at least one picker"));
                }
                a.opts.pickers = Some(list);
            }
            "--peers" => {
                let v = value(flag)?;
                let list =
                    peers::parse_list(&v).map_err(|e| LabError::input(format!("--peers: {e}")))?;
                a.opts.peers = Some(list);
            }
            other => {
                return Err(LabError::input(format!(
                    "unknown flag \"{other}\"\n\n{USAGE}"
                )));
            }
        }
    }
    Ok(Some(a))
}

/// Runs the lab with these arguments (without the program name): prints
/// the table, writes the JSON and SVG if asked, returns the report.
pub fn cli(args: &[String]) -> Result<Option<Report>, LabError> {
    let Some(a) = parse_args(args)? else {
        println!("{USAGE}\n\npickers: {}", scenario::known_pickers());
        return Ok(None);
    };
    let sc = Scenario::load(&a.scenario)?;
    let report = driver::run_scenario(&sc, &a.opts)?;
    println!("{}", report.table());
    if let Some(path) = &a.json {
        write_outputs(&report, path, sc.has_events())?;
        if !a.opts.quiet {
            eprintln!(
                "wrote {} and {}",
                path.display(),
                path.with_extension("svg").display()
            );
        }
    }
    Ok(Some(report))
}

/// Writes the JSON to `path` and the chart to `path` with extension `.svg`.
pub fn write_outputs(report: &Report, path: &Path, timeline: bool) -> Result<(), LabError> {
    let write = |p: &Path, text: String| {
        std::fs::write(p, text)
            .map_err(|e| LabError::runtime(format!("{}: cannot write: {e}", p.display())))
    };
    write(path, report.to_json())?;
    write(&path.with_extension("svg"), svg::chart(report, timeline))
}
