//! Runs a scenario: its rows in table order, each on fresh backends with
//! `clients` balancers sharing them, and closed-loop users or open-loop
//! arrivals. tower-lb's rows (and the oracle's) are [`pickers`]'s, the
//! rivals' [`crate::rivals`]'s, the proxies' [`crate::peers`]'s; the
//! capacity search, which runs the scenario again and again, is
//! [`find_capacity`]'s. The same code drives `--sim` (tokio's paused
//! clock, in-process backends) and http mode (hyper servers on loopback, a
//! hyper-util client).

pub mod find_capacity;
pub mod pickers;
pub mod seeds;

use std::net::SocketAddr;
use std::time::Duration;

use tower_lb::metrics::prometheus::Exporter;
use tower_lb::pick;

use crate::discovery::Registry;
use crate::error::LabError;
use crate::peers;
use crate::record::timed::{self, Timed};
use crate::report::table::Stream;
use crate::report::{PickerReport, Report};
use crate::rivals;
use crate::run::oracle::Oracle;
use crate::run::row::Ctx;
use crate::run::server::{self, AbortOnDrop};
use crate::run::traffic::connections::LabKey;
use crate::scenario::proxy::{self, Peer, PeerSpec};
use crate::scenario::{OpenLoop, PickerName, RowSpec, Scenario};

/// Seed used when neither `--seed` nor the scenario gives one.
pub const DEFAULT_SEED: u64 = 1;

/// How to run a scenario (the command-line flags).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Simulated time, in-process backends.
    pub sim: bool,
    /// Overrides the scenario's per-picker duration.
    pub duration: Option<Duration>,
    /// Overrides the scenario's picker list.
    pub pickers: Option<Vec<PickerName>>,
    /// Overrides the scenario's peers (central proxies, http mode only).
    pub peers: Option<Vec<PeerSpec>>,
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Open loop at this share of capacity (overrides the scenario's rate
    /// or utilization; `--utilization`).
    pub utilization: Option<f64>,
    /// No progress line.
    pub quiet: bool,
    /// Times a second pick after the deciding one ([`timed`]).
    pub warm_select: bool,
    /// Each worker thread keeps its own view of load (`per_thread_load`).
    pub per_thread_load: bool,
    /// `--discovery`: how joins and leaves reach the balancers.
    pub discovery: crate::discovery::Discovery,
    /// Print the table's rows as they finish (the command line, unless
    /// `--quiet`); the caller prints [`Report::table_tail`] after.
    pub stream: bool,
    /// http mode: told the address of the `/metrics` server once it listens
    /// (tests scrape it while the lab runs).
    pub metrics_addr: Option<std::sync::mpsc::Sender<SocketAddr>>,
}

/// Runs every picker of the scenario and returns the report.
pub fn run_scenario(sc: &Scenario, opts: &Options) -> Result<Report, LabError> {
    timed::set_warm(opts.warm_select);
    let rt = if opts.sim {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    }
    .map_err(|e| LabError::runtime(format!("cannot start the runtime: {e}")))?;
    rt.block_on(run_all(sc, opts))
}

async fn run_all(sc: &Scenario, opts: &Options) -> Result<Report, LabError> {
    // `--discovery etcd`: the scenario with its crashes as leaves, and etcd.
    let etcd = crate::discovery::prepare(sc, opts.sim, opts.discovery).await?;
    let (sc, registry) = match &etcd {
        Some((sc, registry)) => (sc, Some(registry)),
        None => (sc, None),
    };
    let seed = opts.seed.or(sc.seed).unwrap_or(DEFAULT_SEED);
    let duration = opts.duration.unwrap_or(sc.duration.0);
    if duration.is_zero() {
        return Err(LabError::input("--duration: must be > 0"));
    }
    let open = open_loop(sc, opts)?;
    let pickers = opts.pickers.clone().unwrap_or_else(|| sc.pickers.clone());
    let runs = sc.rows(&pickers);
    let peer_rows = proxy::rows(opts.peers.as_deref().unwrap_or(&sc.peers));
    let rows = runs.len() + if opts.sim { 0 } else { peer_rows.len() };
    let mut report = Report::new(sc, opts.sim, seed, duration.as_secs_f64());
    report.notes.extend(registry.map(|r| r.note(sc)));
    report.arrival_rate = open.map(|o| o.rate);
    report.target_utilization = opts.utilization.or(sc.load.utilization);
    // http mode only: the sim stays free of the SDK (and of real sockets).
    let (exporter, _metrics_server) = if opts.sim {
        (None, None)
    } else {
        let (exporter, task) = start_exporter(opts).await?;
        (Some(exporter), Some(task))
    };
    let streamed_peers = if opts.sim { &[][..] } else { &peer_rows[..] };
    let stream = opts
        .stream
        .then(|| Stream::start(&report, width(&runs, streamed_peers)));
    for (k, spec) in runs.iter().enumerate() {
        let name = spec.picker;
        let ctx = Ctx {
            sc,
            sim: opts.sim,
            duration,
            seed,
            quiet: opts.quiet,
            nth: (k + 1, rows),
            limited: spec.limited,
            slow_start: spec.slow_start,
            exporter: exporter.as_ref(),
            track: spec.track,
            variant: spec.variant,
            per_thread: opts.per_thread_load,
            open,
            tuning: spec.tuning.clone(),
            discovered: registry.is_some(),
        };
        match run_picker(&ctx, name, registry).await? {
            Ok(r) => {
                report.runs.push(r);
                show(stream.as_ref(), &report, report.runs.len() - 1);
            }
            Err(why) => report.notes.push(format!("{name}: skipped: {why}")),
        }
    }
    let ctx = peers::run::RowCtx {
        sc,
        duration,
        seed,
        quiet: opts.quiet,
        nth: (runs.len() + 1, rows),
        open,
    };
    run_peers(&ctx, opts.sim, &peer_rows, &mut report, stream.as_ref()).await?;
    if !opts.quiet {
        eprint!("\r{:<130}\r", "");
    }
    Ok(report)
}

/// Runs the peer rows into `report` after the pickers' rows; in `--sim`
/// only notes that they were skipped.
async fn run_peers(
    ctx: &peers::run::RowCtx<'_>,
    sim: bool,
    peer_rows: &[Peer],
    report: &mut Report,
    stream: Option<&Stream>,
) -> Result<(), LabError> {
    if sim && !peer_rows.is_empty() {
        report
            .notes
            .push("peers: skipped: a proxy needs http mode (real sockets), not --sim".into());
    } else if !peer_rows.is_empty() {
        let before = report.runs.len();
        peers::run::run_rows(ctx, peer_rows, report).await?;
        show(stream, report, before);
    }
    Ok(())
}

/// The scenario's open loop at `--utilization` when given, else at its own
/// rate; `None` for a closed loop. An error when `--utilization` meets a
/// closed loop.
fn open_loop(sc: &Scenario, opts: &Options) -> Result<Option<OpenLoop>, LabError> {
    if opts.utilization.is_some() && !sc.load.is_open() {
        return Err(LabError::input(format!(
            "--utilization: scenario {} is closed loop (users); give it an open loop ([load] rate or utilization)",
            sc.name
        )));
    }
    sc.load
        .open(&sc.backends, opts.utilization)
        .map_err(|e| LabError::input(format!("--utilization: {e}")))
}

/// http mode: the metrics exporter and its `/metrics` server (serving while
/// the guard lives), whose address is printed and sent to
/// [`Options::metrics_addr`].
async fn start_exporter(opts: &Options) -> Result<(Exporter, AbortOnDrop), LabError> {
    let exporter = Exporter::new()
        .map_err(|e| LabError::runtime(format!("cannot start the metrics exporter: {e}")))?;
    let (addr, task) = server::serve_metrics(exporter.clone()).await?;
    if !opts.quiet {
        eprintln!("metrics: http://{addr}/metrics");
    }
    if let Some(tx) = &opts.metrics_addr {
        let _ = tx.send(addr);
    }
    Ok((exporter, task))
}

/// Room for the longest name a row can take: a picker's (with a tracking
/// mode, `+limits`, a route variant, `(rival)`, its settings) or a
/// proxy's (its policy, its settings, `(peer)`).
fn width(rows: &[RowSpec], peers: &[Peer]) -> usize {
    let pickers = rows.iter().map(|r| {
        let tuned = r.tuning.as_ref().map_or(0, |t| t.label().len());
        r.picker.as_str().len() + 22 + tuned
    });
    pickers
        .chain(peers.iter().map(|p| p.row_name().len()))
        .max()
        .unwrap_or(0)
}

/// Prints the report's rows from `from` on, when the table is streamed.
fn show(stream: Option<&Stream>, report: &Report, from: usize) {
    if let Some(s) = stream {
        eprint!("\r{:<130}\r", "");
        for r in &report.runs[from..] {
            s.row(report, r);
        }
    }
}

/// Runs one picker: the crate's, chosen from its registry by name (hash
/// pickers read the client IP the users put in `X-Forwarded-For`, or with
/// `[load] connections` the users' connections, with the
/// ring's 150 virtual nodes per weight unit as in the study), or the oracle.
async fn run_picker(
    ctx: &Ctx<'_>,
    name: PickerName,
    registry: Option<&Registry>,
) -> Result<Result<PickerReport, &'static str>, LabError> {
    let r = match name {
        PickerName::Crate(n) => {
            pickers::run(ctx, name, registry, |_| {
                let key = LabKey::for_load(ctx.sc.load.connections);
                let mut p = pick::AnyPicker::by_name(n, key).expect("a registry name");
                if let Some(t) = &ctx.tuning {
                    t.apply(&mut p);
                }
                Timed(p)
            })
            .await
        }
        PickerName::Oracle if !ctx.sim => return Ok(Err("the oracle needs --sim")),
        PickerName::Oracle => pickers::run(ctx, name, None, |b| Timed(Oracle::new(b))).await,
        PickerName::Rival(r) => return rivals::run(ctx, r, registry).await,
    };
    r.map(Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Tracking;

    #[test]
    fn the_streamed_name_column_holds_a_proxys_longest_row_name() {
        let rows = [RowSpec {
            picker: "peak_ewma".parse().unwrap(),
            track: Tracking::Body,
            variant: None,
            limited: false,
            slow_start: false,
            tuning: None,
        }];
        let spec: PeerSpec = "nginx:round_robin:keepalive=off".parse().unwrap();
        let peers = proxy::rows(&[spec]);
        let long = peers[0].row_name();
        assert_eq!(long, "nginx round robin keepalive=off (peer)");
        assert!(
            width(&rows, &[]) < long.len(),
            "the case needs a short picker"
        );
        assert_eq!(width(&rows, &peers), long.len());
    }
}
