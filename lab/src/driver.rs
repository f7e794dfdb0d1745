//! Runs a scenario: per picker, fresh backends, `clients` balancers sharing
//! them, and closed-loop users or open-loop arrivals. The same code drives `--sim`
//! (tokio's paused clock, in-process backends) and http mode (hyper servers
//! on loopback, a hyper-util client).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tower_lb::route::RoutePlan;

use tower_lb::metrics::prometheus::Exporter;
use tower_lb::pick::{self, Pick};

use super::backend::Backend;
use super::balancers::{self, Clients, EndStats, Lb};
use super::connections::LabKey;
use super::endpoint::{LabRequest, Target, targets};
use super::error::LabError;
use super::membership;
use super::oracle::Oracle;
use super::peers;
use super::record::timed::{self, Timed};
use super::report::fleet_stats;
use super::report::membership_stats;
use super::report::table::Stream;
use super::report::{PickerReport, Report};
use super::rivals;
use super::scenario::proxy::{self, Peer, PeerSpec};
use super::scenario::random::sub_seed;
use super::scenario::{OpenLoop, PickerName, Scenario, Tracking, Variant};
use super::server::{self, AbortOnDrop};
use super::traffic::{Progress, Row};

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

/// What one row runs with.
pub struct Ctx<'a> {
    /// The scenario.
    pub sc: &'a Scenario,
    /// `--sim`.
    pub sim: bool,
    /// Measured time per row.
    pub duration: Duration,
    /// Seed of every random number.
    pub seed: u64,
    /// No progress line.
    pub quiet: bool,
    /// Position in the picker list, for the progress line.
    pub nth: (usize, usize),
    /// This row runs with adaptive concurrency limits.
    pub limited: bool,
    /// This row's balancers ramp joining endpoints
    /// (`[resilience.slow_start]`).
    pub slow_start: bool,
    /// http mode: where the balancers report their metrics.
    pub exporter: Option<&'a Exporter>,
    /// How the balancers track a call.
    pub track: Tracking,
    /// The route-step variant of this row (`[fleet]`).
    pub variant: Option<Variant>,
    /// `--per-thread-load`.
    pub per_thread: bool,
    /// The open loop, resolved (`None`: the scenario's users).
    pub open: Option<OpenLoop>,
}

impl Ctx<'_> {
    /// The progress line of a row called `label`, unless `--quiet`.
    pub fn progress(&self, label: String) -> Option<Progress> {
        (!self.quiet).then_some(Progress {
            label,
            nth: self.nth,
            sim: self.sim,
        })
    }
}

async fn run_all(sc: &Scenario, opts: &Options) -> Result<Report, LabError> {
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
    report.arrival_rate = open.map(|o| o.rate);
    report.target_utilization = opts.utilization.or(sc.load.utilization);
    // http mode only: the sim stays free of the SDK (and of real sockets).
    let (exporter, _metrics_server) = if opts.sim {
        (None, None)
    } else {
        let (exporter, task) = start_exporter(opts).await?;
        (Some(exporter), Some(task))
    };
    let stream = opts
        .stream
        .then(|| Stream::start(&report, width(runs.iter().map(|r| r.0))));
    for (k, &(name, track, variant, limited, slow_start)) in runs.iter().enumerate() {
        let ctx = Ctx {
            sc,
            sim: opts.sim,
            duration,
            seed,
            quiet: opts.quiet,
            nth: (k + 1, rows),
            limited,
            slow_start,
            exporter: exporter.as_ref(),
            track,
            variant,
            per_thread: opts.per_thread_load,
            open,
        };
        match run_picker(&ctx, name).await? {
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

/// Room for the longest name a row can take (its picker's, a tracking
/// mode, `+limits`, a route variant, `(rival)`).
fn width(names: impl Iterator<Item = PickerName>) -> usize {
    names.map(|n| n.as_str().len() + 22).max().unwrap_or(0)
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
) -> Result<Result<PickerReport, &'static str>, LabError> {
    let r = match name {
        PickerName::Crate(n) => {
            run(ctx, name, |_| {
                let key = LabKey::for_load(ctx.sc.load.connections);
                Timed(pick::AnyPicker::by_name(n, key).expect("a registry name"))
            })
            .await
        }
        PickerName::Oracle if !ctx.sim => return Ok(Err("the oracle needs --sim")),
        PickerName::Oracle => run(ctx, name, |b| Timed(Oracle::new(b))).await,
        PickerName::Rival(r) => return rivals::run(ctx, r).await,
    };
    r.map(Ok)
}

/// Runs one row of the crate's balancers with `make`'s picker, and returns
/// its numbers.
async fn run<P, F>(ctx: &Ctx<'_>, name: PickerName, make: F) -> Result<PickerReport, LabError>
where
    P: Pick<LabRequest>,
    F: Fn(&[Arc<Backend>]) -> P,
{
    let sc = ctx.sc;
    let label = balancers::label(ctx, name.as_str());
    if ctx.sim {
        // The retry layer's backoff jitter draws from fastrand's thread-local
        // generator (it has no seed option); the sim runs on one thread, so
        // seeding it here makes retries repeat exactly too.
        fastrand::seed(sub_seed(ctx.seed, 3000));
    }
    let row = Row::new(sc, ctx.seed, ctx.duration, ctx.open, ctx.sim);
    // http mode: the servers run until the row ends.
    let (targets, _servers) = targets(ctx.sim, &row.backends).await?;
    let weighted = sc.weighted(name);
    let clients = balancers::build(ctx, &label, weighted, &targets, &row.rec, || {
        make(&row.backends)
    })?;
    let shown = match ctx.variant {
        Some(v) => format!("{label} [{}]", v.as_str()),
        None => label.clone(),
    };
    let traffic = clients.start(&row, sc.max_vus(), ctx.progress(shown));
    let _membership = membership(ctx, &row, &clients.lbs, &targets, weighted);
    let end = row.plan.end;
    let client_0 = || clients.lbs[0].handle().route_plan();
    let plan_seen = plans(sc, client_0, row.plan.start, end).await;
    tokio::time::sleep_until(end).await;
    let stats = balancers::end_stats(&clients.lbs, sc.backends.len());
    traffic.finish().await;
    let mut report = row
        .rec
        .finish(&label, weighted, stats.in_flight.clone(), !ctx.sim);
    row.add_utilization(&mut report);
    add_end(ctx, &mut report, &clients, &stats, &plan_seen);
    Ok(report)
}

/// Drives the scenario's joins and leaves through each balancer's handle,
/// while the guard lives.
fn membership<P: Pick<LabRequest>>(
    ctx: &Ctx<'_>,
    row: &Row,
    lbs: &[Lb<P>],
    targets: &[Target],
    weighted: bool,
) -> AbortOnDrop {
    let sc = ctx.sc;
    membership::drive(
        row.plan.start,
        membership::actions(
            sc,
            sc.load.clients,
            |c, i| {
                let handle = lbs[c as usize].handle();
                let (ep, w) = balancers::endpoint(ctx, weighted, &targets[i], &row.rec, c, i);
                let meta = sc.meta(i);
                Box::new(move || {
                    let _ = handle.edit(|e| e.insert(i, ep, w, meta));
                })
            },
            |c, i| {
                let handle = lbs[c as usize].handle();
                Box::new(move || {
                    handle.remove(&i);
                })
            },
        ),
    )
}

/// Adds to `report` what the row's balancers, retry layers and probes know
/// at its end: retries, membership, probes, ejections, breaker openings,
/// route variant and, with `[fleet]`, the fleet's figures.
fn add_end<P: Pick<LabRequest>>(
    ctx: &Ctx<'_>,
    report: &mut PickerReport,
    clients: &Clients<P>,
    stats: &EndStats,
    plan_seen: &[(Vec<u32>, String)],
) {
    let sc = ctx.sc;
    let retries = &clients.retries;
    report.retries = retries
        .as_ref()
        .map(|ls| ls.iter().map(|l| l.stats().retries()).sum());
    report.not_replayable = retries
        .as_ref()
        .map(|ls| ls.iter().map(|l| l.stats().not_replayable()).sum());
    report.membership = membership_stats::stats(sc, report);
    report.probes = clients.probe_counts();
    report.ejections = sc
        .resilience
        .outlier
        .is_some()
        .then(|| stats.ejections.clone());
    report.breaker_opens = sc.resilience.breaker.is_some().then(|| stats.opens.clone());
    report.route = ctx.variant.map(|v| v.as_str().to_string());
    if sc.fleet.is_some() {
        report.fleet = Some(fleet_stats::stats(sc, &stats.picks, report, plan_seen));
    }
}

/// With `[fleet]`, client 0's route plan (`plan` reads it) at the end of
/// each second from `start` to `end` (its priority phases); empty without,
/// and `plan` is then never called.
pub async fn plans(
    sc: &Scenario,
    plan: impl Fn() -> RoutePlan,
    start: Instant,
    end: Instant,
) -> Vec<(Vec<u32>, String)> {
    let mut plan_seen = Vec::new();
    if sc.fleet.is_some() {
        let second = Duration::from_secs(1);
        let mut tick = tokio::time::interval_at(start + second, second);
        while tick.tick().await <= end {
            plan_seen.push(sample(&plan()));
        }
    }
    plan_seen
}

/// One sample of client 0's plan: the load of each level.
pub fn sample(plan: &RoutePlan) -> (Vec<u32>, String) {
    let loads = plan.levels.iter().map(|l| l.load).collect();
    let healthy = plan
        .levels
        .first()
        .map_or_else(String::new, |l| format!("{}/{}", l.healthy, l.total));
    (loads, healthy)
}
