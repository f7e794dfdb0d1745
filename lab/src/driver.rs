//! Runs a scenario: per picker, fresh backends, `clients` balancers sharing
//! them, and closed-loop virtual users. The same code drives `--sim`
//! (tokio's paused clock, in-process backends) and http mode (hyper servers
//! on loopback, a hyper-util client).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tower::Layer;
use tower_lb::Balance;
use tower_lb::breaker::State as BreakerState;
use tower_lb::http::Classifier;
use tower_lb::metrics::Metrics;
use tower_lb::metrics::prometheus::Exporter;
use tower_lb::outlier::EjectionReason;
use tower_lb::pick::{self, Pick};
use tower_lb::retry::RetryLayer;

use super::backend::{Backend, sub_seed};
use super::endpoint::{Endpoint, LabRequest, Parts, targets};
use super::error::LabError;
use super::fleet;
use super::oracle::Oracle;
use super::peers::{self, PeerSpec};
use super::record::Recorder;
use super::report::{PickerReport, Report};
use super::scenario::{PickerName, RetrySpec, Scenario, Tracking, Variant};
use super::server;
use super::timed::Timed;
use super::users::{Plan, progress, user};

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
    /// No progress line.
    pub quiet: bool,
    /// Times a second pick after the deciding one ([`super::timed`]).
    pub warm_select: bool,
    /// Each worker thread keeps its own view of load (`per_thread_load`).
    pub per_thread_load: bool,
    /// http mode: told the address of the `/metrics` server once it listens
    /// (tests scrape it while the lab runs).
    pub metrics_addr: Option<std::sync::mpsc::Sender<SocketAddr>>,
}

/// Runs every picker of the scenario and returns the report.
pub fn run_scenario(sc: &Scenario, opts: &Options) -> Result<Report, LabError> {
    super::timed::set_warm(opts.warm_select);
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

struct Ctx<'a> {
    sc: &'a Scenario,
    sim: bool,
    duration: Duration,
    seed: u64,
    quiet: bool,
    /// Position in the picker list, for the progress line.
    nth: (usize, usize),
    /// This row runs with adaptive concurrency limits.
    limited: bool,
    /// http mode: where the balancers report their metrics.
    exporter: Option<&'a Exporter>,
    /// How the balancers track a call.
    track: Tracking,
    /// The route-step variant of this row (`[fleet]`).
    variant: Option<Variant>,
    /// `--per-thread-load`.
    per_thread: bool,
}

async fn run_all(sc: &Scenario, opts: &Options) -> Result<Report, LabError> {
    let seed = opts.seed.or(sc.seed).unwrap_or(DEFAULT_SEED);
    let duration = opts.duration.unwrap_or(sc.duration.0);
    if duration.is_zero() {
        return Err(LabError::input("--duration: must be > 0"));
    }
    let pickers = opts.pickers.clone().unwrap_or_else(|| sc.pickers.clone());
    let runs = sc.rows(&pickers);
    let peer_rows = peers::rows(opts.peers.as_deref().unwrap_or(&sc.peers));
    let rows = runs.len() + if opts.sim { 0 } else { peer_rows.len() };
    let mut report = Report::new(sc, opts.sim, seed, duration.as_secs_f64());
    // http mode only: the sim stays free of the SDK (and of real sockets).
    let mut _metrics_server = None;
    let exporter = if opts.sim {
        None
    } else {
        let exporter = Exporter::new()
            .map_err(|e| LabError::runtime(format!("cannot start the metrics exporter: {e}")))?;
        let (addr, task) = server::serve_metrics(exporter.clone()).await?;
        _metrics_server = Some(task);
        if !opts.quiet {
            eprintln!("metrics: http://{addr}/metrics");
        }
        if let Some(tx) = &opts.metrics_addr {
            let _ = tx.send(addr);
        }
        Some(exporter)
    };
    for (k, &(name, track, variant, limited)) in runs.iter().enumerate() {
        let ctx = Ctx {
            sc,
            sim: opts.sim,
            duration,
            seed,
            quiet: opts.quiet,
            nth: (k + 1, rows),
            limited,
            exporter: exporter.as_ref(),
            track,
            variant,
            per_thread: opts.per_thread_load,
        };
        match run_picker(&ctx, name).await? {
            Ok(r) => report.runs.push(r),
            Err(why) => report.notes.push(format!("{name}: skipped: {why}")),
        }
    }
    if opts.sim && !peer_rows.is_empty() {
        report
            .notes
            .push("peers: skipped: a proxy needs http mode (real sockets), not --sim".into());
    } else if !peer_rows.is_empty() {
        let ctx = peers::run::RowCtx {
            sc,
            duration,
            seed,
            quiet: opts.quiet,
            nth: (runs.len() + 1, rows),
        };
        peers::run::run_rows(&ctx, &peer_rows, &mut report).await?;
    }
    if !opts.quiet {
        eprint!("\r{:<130}\r", "");
    }
    Ok(report)
}

/// Runs one picker: the crate's, chosen from its registry by name (hash
/// pickers read the client IP the users put in `X-Forwarded-For`, with the
/// ring's 150 virtual nodes per weight unit as in the study), or the oracle.
async fn run_picker(
    ctx: &Ctx<'_>,
    name: PickerName,
) -> Result<Result<PickerReport, &'static str>, LabError> {
    let r = match name {
        PickerName::Crate(n) => {
            run(ctx, name, |_| {
                Timed(pick::AnyPicker::by_name(n, pick::ForwardedFor).expect("a registry name"))
            })
            .await
        }
        PickerName::Oracle if !ctx.sim => return Ok(Err("the oracle needs --sim")),
        PickerName::Oracle => run(ctx, name, |b| Timed(Oracle::new(b))).await,
    };
    r.map(Ok)
}

async fn run<P, F>(ctx: &Ctx<'_>, name: PickerName, make: F) -> Result<PickerReport, LabError>
where
    P: Pick<LabRequest>,
    F: Fn(&[Arc<Backend>]) -> P,
{
    let sc = ctx.sc;
    let n = sc.backends.len();
    // The row's name: picker, tracking mode, adaptive limits.
    let label = {
        let l = ctx.track.label(name.as_str());
        if ctx.limited {
            format!("{l}+limits")
        } else {
            l
        }
    };
    if ctx.sim {
        // The retry layer's backoff jitter draws from fastrand's thread-local
        // generator (it has no seed option); the sim runs on one thread, so
        // seeding it here makes retries repeat exactly too.
        fastrand::seed(sub_seed(ctx.seed, 3000));
    }
    let start = Instant::now();
    // The scenario's warm-up runs first, unrecorded: `duration` is measured.
    let measured = start + sc.load.warmup.0;
    let end = measured + ctx.duration;
    let backends: Vec<Arc<Backend>> = sc
        .backends
        .iter()
        .enumerate()
        .map(|(i, b)| Arc::new(Backend::new(b, sub_seed(ctx.seed, 1000 + i as u64), start)))
        .collect();
    let rec = Arc::new(Recorder::new(measured, ctx.duration, n));
    // http mode: the servers run until the row ends.
    let (targets, _servers) = targets(ctx.sim, &backends).await?;
    let weighted = sc.weighted(name);
    let clients = sc.load.clients;
    // One retry layer (and budget) per client balancer, as each caller
    // replica would have its own.
    let retries = match &sc.resilience.retry {
        Some(spec) => Some(
            (0..clients)
                .map(|_| retry_layer(spec))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| LabError::input(format!("[resilience.retry]: {e}")))?,
        ),
        None => None,
    };
    let res = &sc.resilience;
    let bad = |(field, problem): (String, String)| {
        LabError::input(format!("scenario {}: `{field}`: {problem}", sc.name))
    };
    let outlier = res
        .outlier
        .as_ref()
        .map(|o| o.config())
        .transpose()
        .map_err(bad)?;
    let names: Arc<[String]> = sc.backends.iter().map(|b| b.name.clone()).collect();
    let mut lbs = Vec::with_capacity(clients as usize);
    for c in 0..clients {
        let mut b = Balance::builder()
            .picker(make(&backends))
            .classify(Classifier::new().track(ctx.track.track()))
            .routing(sc.routing(ctx.variant, c))
            .per_thread_load(ctx.per_thread);
        // The sim repeats exactly with a seeded sequence. Over HTTP nothing
        // repeats anyway (the wall clock decides), and a seeded sequence is
        // one counter both worker threads write on every pick: there the
        // balancer draws from thread-local generators, as in production.
        if ctx.sim {
            b = b.seed(sub_seed(ctx.seed, 2000 + u64::from(c)));
        }
        if let Some(spec) = &res.breaker {
            b = b.circuit_breaker(
                spec.config(sub_seed(ctx.seed, 4000 + u64::from(c)))
                    .map_err(bad)?,
            );
        }
        if let Some(o) = &outlier {
            b = b.outlier_detection(o.clone());
        }
        if let Some(p) = res.panic_threshold {
            b = b.panic_threshold(p);
        }
        if let (true, Some(a)) = (ctx.limited, &res.adaptive_concurrency) {
            b = b.adaptive_concurrency(a.config().map_err(bad)?);
        }
        if let Some(exporter) = ctx.exporter {
            let lb_name = if clients == 1 {
                label.clone()
            } else {
                format!("lab-{label}-{c}")
            };
            let mut m = Metrics::new(&exporter.meter(), lb_name);
            if let Some(layers) = &retries {
                m = m.retries(&layers[c as usize]);
            }
            let names = names.clone();
            b = b.metrics_with(m, move |&i: &usize| {
                names.get(i).cloned().unwrap_or_else(|| i.to_string())
            });
        }
        let given = sc.given(ctx.variant, ctx.seed, c);
        for (i, (t, spec)) in targets.iter().zip(&sc.backends).enumerate() {
            if !given[i] {
                continue;
            }
            let ep = Endpoint::new(Parts {
                idx: i,
                target: t.clone(),
                overhead: sc.load.overhead.0 + sc.rtt(c, i),
                rec: rec.clone(),
            });
            let w = if weighted { spec.weight } else { 1.0 };
            b = b.endpoint_with(i, ep, w, sc.meta(i));
        }
        // Load reports reach the endpoint's model through the classifier.
        lbs.push(
            b.build()
                .map_err(|e| LabError::input(format!("scenario {}: {e}", sc.name)))?,
        );
    }
    let plan = Arc::new(Plan::new(sc, start, end, ctx.seed));
    let users: Vec<_> = (0..sc.max_vus() as usize)
        .map(|u| {
            let c = u % lbs.len();
            let lb = lbs[c].clone();
            match &retries {
                Some(layers) => {
                    tokio::spawn(user(u, layers[c].layer(lb), plan.clone(), rec.clone()))
                }
                None => tokio::spawn(user(u, lb, plan.clone(), rec.clone())),
            }
        })
        .collect();
    let shown = match ctx.variant {
        Some(v) => format!("{label} [{}]", v.as_str()),
        None => label.clone(),
    };
    let progress = (!ctx.quiet).then(|| {
        tokio::spawn(progress(
            shown,
            ctx.nth,
            start,
            sc.load.warmup.0 + ctx.duration,
            rec.clone(),
            ctx.sim,
        ))
    });
    // With [fleet], client 0's plan at the end of each second (its
    // priority phases).
    let mut plan_seen = Vec::new();
    if sc.fleet.is_some() {
        let second = Duration::from_secs(1);
        let mut tick = tokio::time::interval_at(start + second, second);
        while tick.tick().await <= end {
            plan_seen.push(fleet::sample(&lbs[0].handle().route_plan()));
        }
        tokio::time::sleep_until(end).await;
    } else {
        tokio::time::sleep_until(end).await;
    }
    let picks: Vec<Vec<u64>> = lbs
        .iter()
        .map(|lb| {
            let mut row = vec![0; n];
            for (i, st) in lb.handle().endpoints() {
                if let Some(x) = row.get_mut(i) {
                    *x = st.picks();
                }
            }
            row
        })
        .collect();
    let mut in_flight = vec![0; n];
    let mut ejections = vec![0; n];
    let mut opens = vec![0; n];
    for lb in &lbs {
        for (i, st) in lb.handle().endpoints() {
            if let Some(x) = in_flight.get_mut(i) {
                *x += st.in_flight();
            }
            if let Some(x) = ejections.get_mut(i) {
                *x += EjectionReason::ALL
                    .iter()
                    .map(|&r| st.outlier().ejections(r))
                    .sum::<u64>();
            }
            if let (Some(x), Some(b)) = (opens.get_mut(i), st.breaker()) {
                *x += b.transitions_to(BreakerState::Open);
            }
        }
    }
    for u in &users {
        u.abort();
    }
    for u in users {
        let _ = u.await;
    }
    if let Some(p) = progress {
        p.abort();
        let _ = p.await;
    }
    let mut report = rec.finish(&label, weighted, in_flight, !ctx.sim);
    report.retries = retries.map(|ls| ls.iter().map(|l| l.stats().retries()).sum());
    report.ejections = res.outlier.is_some().then_some(ejections);
    report.breaker_opens = res.breaker.is_some().then_some(opens);
    report.route = ctx.variant.map(|v| v.as_str().to_string());
    if sc.fleet.is_some() {
        report.fleet = Some(fleet::stats(sc, &picks, &report, &plan_seen));
    }
    Ok(report)
}

/// A retry layer classifying with the balancer's classifier (the default).
fn retry_layer(spec: &RetrySpec) -> Result<RetryLayer, tower_lb::ConfigError> {
    let mut b = RetryLayer::builder().max_attempts(spec.max_attempts);
    if let Some(t) = spec.per_try_timeout {
        b = b.per_try_timeout(t.0);
    }
    b.build()
}
