//! The command line: flags, and what `--help` says.

use std::path::PathBuf;

use super::driver::Options;
use super::error::LabError;
use super::scenario::{self, PickerName, proxy};

/// The scenario run when `--scenario` is absent.
pub const DEFAULT_SCENARIO: &str = "steady-capacity";

/// What `--help` prints.
pub const USAGE: &str = "\
usage: cargo lab [FLAGS]

  --scenario NAME|FILE   a shipped scenario or a TOML file (default: steady-capacity)
  --sim                  simulated time, in-process backends (fast, reproducible)
  --duration DUR         per-picker run time, e.g. 20s (overrides the scenario)
  --pickers a,b,...      pickers to compare (overrides the scenario)
  --peers nginx,haproxy  central proxies in front of the same backends, one row
                         per policy (http mode; nginx:least_conn for one policy;
                         :keepalive=off for a connection per request to the
                         backends, :conns=N for nginx's worker_connections or
                         haproxy's maxconn, e.g. nginx,nginx:keepalive=off;
                         none for no peers; overrides the scenario)
  --utilization U[,U..]  open-loop scenarios: arrivals at this share of the
                         backends' capacity; several levels make a sweep (one
                         table per level, and p99 against load in the report)
  --connections per_user|per_request
                         hash pickers key on the users' connections (a
                         layer-4 5-tuple hash): one kept-alive connection per
                         user, or a new source port per request (overrides
                         the scenario's [load] connections)
  --find-capacity        per picker, the highest load (users, or arrivals/s in
                         an open loop) whose p99 and error rate hold the
                         scenario's [capacity] target (default p99 <= 400 ms,
                         errors <= 1%): coarse steps, then bisection; the p99
                         against load curves go in the report
  --json FILE            write every number to FILE, and a chart next to it (.svg)
  --report FILE|none     the report page (tables and charts, HTML; default
                         lab-SCENARIO.html here); none writes no page
  --seed N               seed of every random number (default: the scenario's, else 1)
  --seeds 1-3|1,4,7      run once per seed, then a table of each cell's mean
                         and range over the seeds (in the JSON and the report too)
  --ratio-to NAME|none   the summary's p99/NAME and mean/NAME columns: each
                         row against this one (default: tower_p2c when it runs)
  --clients N            independent client balancers (overrides [load] clients)
  --set P.FIELD=V[,V..]  a picker setting, as [picker.P] FIELD = V in a scenario
                         (e.g. peak_ewma.sample_decay=2s); several values: one
                         row each
  --vary P.FIELD=V[,V..] rows beside P's own, one per value of FIELD (the rest
                         of P's settings kept): e.g. prequal.pool_size=8,32
  --warm-select          time a second pick made right after the one that
                         decides (its result unused): selection with warm
                         caches; cursors of round robin pickers then advance
                         twice per request, so read those rows' shares with care
  --per-thread-load      each worker thread picks with its own view of the
                         endpoints' load (Builder::per_thread_load; http
                         mode: the sim runs on one thread)
  --quiet                no progress line (the files written are still named)
  --help                 this text
  --family [NAME]        the scenario family's scorecard instead of one scenario
                         (all, named, generated, quick, http; its own flags:
                         cargo lab --family --help)

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
    /// `--utilization`: the open loop's levels (several: a sweep).
    pub levels: Vec<f64>,
    /// `--report`: where the report page goes (`None`: nowhere); absent:
    /// `lab-SCENARIO.html` in the working directory.
    pub report: Option<Option<PathBuf>>,
    /// `--find-capacity`.
    pub find_capacity: bool,
    /// `--connections`.
    pub connections: Option<scenario::Connections>,
    /// `--seeds` (empty: one run, at `--seed`).
    pub seeds: Vec<u64>,
    /// `--ratio-to`.
    pub ratio: crate::report::summary::RatioTo,
    /// `--clients`.
    pub clients: Option<u32>,
    /// `--set` and `--vary`, in order.
    pub set: Vec<scenario::SetFlag>,
}

/// Parses the flags; `Ok(None)` means `--help`.
pub fn parse(args: &[String]) -> Result<Option<Args>, LabError> {
    let mut a = Args {
        scenario: DEFAULT_SCENARIO.to_string(),
        opts: Options::default(),
        json: None,
        levels: Vec::new(),
        report: None,
        find_capacity: false,
        connections: None,
        seeds: Vec::new(),
        ratio: crate::report::summary::RatioTo::Default,
        clients: None,
        set: Vec::new(),
    };
    // `cargo lab -- --peers nginx` passes a `--` of its own (the alias
    // ends in one already): the lab takes no positional arguments, so a
    // bare `--` separates nothing and is skipped.
    let mut it = args.iter().filter(|a| a.as_str() != "--");
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
            "--find-capacity" => a.find_capacity = true,
            "--utilization" => a.levels = levels(&value(flag)?)?,
            "--scenario" => a.scenario = value(flag)?,
            "--connections" => a.connections = Some(connections(&value(flag)?)?),
            "--json" => a.json = Some(PathBuf::from(value(flag)?)),
            "--report" => {
                let v = value(flag)?;
                a.report = Some((v != "none").then(|| PathBuf::from(v)));
            }
            "--duration" => a.opts.duration = Some(duration(&value(flag)?)?),
            "--seed" => {
                let v = value(flag)?;
                a.opts.seed = Some(v.parse().map_err(|_| {
                    LabError::input(format!("--seed: \"{v}\" is not an integer in 0..2^64"))
                })?);
            }
            "--pickers" => a.opts.pickers = Some(pickers(&value(flag)?)?),
            "--seeds" => {
                a.seeds = crate::driver::seeds::parse(&value(flag)?)
                    .map_err(|e| LabError::input(format!("--seeds: {e}")))?;
            }
            "--ratio-to" => a.ratio = crate::report::summary::RatioTo::parse(&value(flag)?),
            "--clients" => {
                let v = value(flag)?;
                a.clients = Some(v.parse().map_err(|_| {
                    LabError::input(format!("--clients: \"{v}\" is not a whole number"))
                })?);
            }
            "--set" | "--vary" => a.set.push(
                scenario::tuning::parse_set(&value(flag)?, flag == "--vary")
                    .map_err(|e| LabError::input(format!("{flag}: {e}")))?,
            ),
            "--peers" => {
                let v = value(flag)?;
                let list =
                    proxy::parse_list(&v).map_err(|e| LabError::input(format!("--peers: {e}")))?;
                a.opts.peers = Some(list);
            }
            other => {
                return Err(LabError::input(format!(
                    "unknown flag \"{other}\"\n\n{USAGE}"
                )));
            }
        }
    }
    if a.opts.seed.is_some() && !a.seeds.is_empty() {
        return Err(LabError::input("--seed and --seeds: give one of them"));
    }
    Ok(Some(a))
}

/// `--utilization`'s levels, from a comma-separated list.
fn levels(v: &str) -> Result<Vec<f64>, LabError> {
    let mut levels = Vec::new();
    for x in v.split(',').filter(|s| !s.trim().is_empty()) {
        let u: f64 = x
            .trim()
            .parse()
            .map_err(|_| LabError::input(format!("--utilization: \"{x}\" is not a number")))?;
        scenario::check_utilization(u)
            .map_err(|e| LabError::input(format!("--utilization: {e}")))?;
        levels.push(u);
    }
    if levels.is_empty() {
        return Err(LabError::input("--utilization: list at least one level"));
    }
    Ok(levels)
}

/// `--connections`'s mode: `per_user` or `per_request`.
fn connections(v: &str) -> Result<scenario::Connections, LabError> {
    match v {
        "per_user" => Ok(scenario::Connections::PerUser),
        "per_request" => Ok(scenario::Connections::PerRequest),
        v => Err(LabError::input(format!(
            "--connections: \"{v}\": give per_user or per_request"
        ))),
    }
}

/// `--duration`'s run time (more than zero).
fn duration(v: &str) -> Result<std::time::Duration, LabError> {
    let d = scenario::parse_duration(v).map_err(|e| LabError::input(format!("--duration: {e}")))?;
    if d.is_zero() {
        return Err(LabError::input("--duration: must be > 0"));
    }
    Ok(d)
}

/// `--pickers`'s pickers, from a comma-separated list (at least one).
pub fn pickers(v: &str) -> Result<Vec<PickerName>, LabError> {
    let list = v
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse::<PickerName>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LabError::input(format!("--pickers: {e}")))?;
    if list.is_empty() {
        return Err(LabError::input("--pickers: list at least one picker"));
    }
    Ok(list)
}
