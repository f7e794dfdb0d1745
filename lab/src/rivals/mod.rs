//! The rivals: other Rust balancers as rows of the same table, over the same
//! backends, arrivals and slowdowns, built the way their authors document
//! them ([`what`] says, in the table, what each row runs):
//!
//! * `tower_p2c`: `tower::balance::p2c::Balance` over
//!   `tower::load::PeakEwmaDiscover` (default RTT 30 ms, decay 10 s:
//!   linkerd2-proxy's values), completion at the response head. The
//!   balancer is not `Clone` and picks in `poll_ready`, so tower users
//!   share it behind a `Buffer`; so does the lab, one per client balancer.
//! * `tower_p2c_pending`: the same over `PendingRequestsDiscover`.
//! * `tonic_balance`: tonic 0.14's balanced channel (`Channel::balance_list`,
//!   `balance_channel`) as it balances: the same P2C over endpoints whose
//!   load is a constant 0 (tonic's `Connection`), behind a `Buffer` of
//!   1,024 (its `DEFAULT_BUFFER_SIZE`). tonic itself is not linked: the
//!   lab's endpoints are not tonic connections.
//! * `loadpace` and `loadpace_tuned`: loadpace 0.1.0-rc.4's controller per
//!   endpoint ([`loadpace`]) under the same P2C, behind a bounded `Buffer`
//!   with `LoadShed` in front (its integration guide: no unbounded buffer in
//!   front of the balancer); a shed request is an error. `(defaults)` runs
//!   `EndpointConfig::default()`, `(tuned)` sets the initial RTT and
//!   concurrency for the scenario as its tuning guide says ([`tuned`]).
//!
//! Each learns of its endpoints from a channel-backed `Discover` stream
//! ([`discover`]) and wraps each one when it discovers it. With
//! `[resilience.retry]` each client retries with tower's own `Retry`
//! ([`retry`]); breakers, ejection, tracking modes and route variants are
//! tower-lb's. The in-flight column is what the backends hold at the row's
//! end; there is no selection time (the pick happens in the buffer's task).

pub mod discover;
pub mod loadpace;
pub mod retry;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ::loadpace::EndpointConfig;
use tower::balance::p2c::Balance;
use tower::buffer::Buffer;
use tower::discover::Change;
use tower::load::{CompleteOnResponse, Constant, PeakEwmaDiscover, PendingRequestsDiscover};
use tower::load_shed::LoadShed;
use tower::util::BoxCloneService;
use tower::{BoxError, ServiceExt};

use self::discover::Wrapped;
use self::loadpace::Paced;
use crate::error::LabError;
use crate::report::PickerReport;
use crate::report::membership_stats;
use crate::run::endpoint::{Endpoint, Parts, Target, targets};
use crate::run::joins;
use crate::run::message::{LabRequest, LabResponse};
use crate::run::row::{Ctx, Row};
use crate::run::server::AbortOnDrop;
use crate::scenario::membership::initial;
use crate::scenario::random::{Delay, Rng, sub_seed};
use crate::scenario::{Rival, Scenario};

/// tower's PeakEwma default RTT in the lab (linkerd2-proxy's).
pub const TOWER_DEFAULT_RTT: Duration = Duration::from_millis(30);
/// tower's PeakEwma decay in the lab (linkerd2-proxy's, and tower-lb's).
pub const TOWER_DECAY: Duration = Duration::from_secs(10);
/// Requests a tower client's `Buffer` holds before its callers wait: far
/// above what any scenario keeps in flight, so the buffer never refuses.
pub const TOWER_BUFFER: usize = 1 << 16;
/// tonic 0.14's `DEFAULT_BUFFER_SIZE`, the buffer of a balanced channel.
pub const TONIC_BUFFER: usize = 1024;

/// A client's balancer as the traffic drives it.
type Client = BoxCloneService<LabRequest, LabResponse, BoxError>;

/// What runs, for the table's heading and the JSON.
pub fn what(rival: Rival, sc: &Scenario) -> String {
    let base = match rival {
        Rival::TowerP2c => format!(
            "tower 0.5 p2c::Balance over load::PeakEwmaDiscover (default RTT {TOWER_DEFAULT_RTT:?}, decay {TOWER_DECAY:?}, CompleteOnResponse) behind a Buffer of {TOWER_BUFFER}"
        ),
        Rival::TowerPending => format!(
            "tower 0.5 p2c::Balance over load::PendingRequestsDiscover (CompleteOnResponse) behind a Buffer of {TOWER_BUFFER}"
        ),
        Rival::Tonic => format!(
            "tonic 0.14 balance_channel's balancer: tower 0.5 p2c::Balance over endpoints of constant load 0, behind a Buffer of {TONIC_BUFFER}"
        ),
        Rival::Loadpace | Rival::LoadpaceTuned => {
            let c = config(rival, sc);
            format!(
                "loadpace 0.1.0-rc.4 EndpointController per endpoint (initial RTT {:?}, initial concurrency {}, queue {}; seeded, 5xx as failures) under tower 0.5 p2c::Balance, behind a Buffer of {} with LoadShed (shed requests are errors)",
                c.latency.initial_rtt,
                c.gradient.initial_concurrency,
                c.queue_capacity,
                c.queue_capacity
            )
        }
    };
    match &sc.resilience.retry {
        Some(r) => format!(
            "{base}; tower Retry ({} attempts, TpsBudget 10 s / 10 per s / 20%, backoff 25-250 ms)",
            r.max_attempts
        ),
        None => base,
    }
}

/// The loadpace row's configuration: the defaults, or tuned for `sc`.
pub fn config(rival: Rival, sc: &Scenario) -> EndpointConfig {
    let mut c = EndpointConfig::default();
    if rival == Rival::LoadpaceTuned {
        let (rtt, concurrency) = tuned(sc);
        c.latency.initial_rtt = rtt;
        c.gradient.initial_concurrency =
            concurrency.clamp(c.gradient.min_concurrency, c.gradient.max_concurrency);
    }
    c
}

/// loadpace's tuning guide for `sc`: the initial RTT is the backends' mean
/// service time (and the scenario's overhead); the initial concurrency is
/// each client's share of a replica's workers (workers over client
/// balancers), or loadpace's default where a backend has no worker limit.
pub fn tuned(sc: &Scenario) -> (Duration, f64) {
    let n = sc.backends.len().max(1) as f64;
    let mean_ns: f64 = sc
        .backends
        .iter()
        .map(|b| Delay::from(b.delay).mean_ns())
        .sum::<f64>()
        / n;
    // To a tenth of a millisecond: a setting, not a measurement.
    let rtt = Duration::from_micros((mean_ns / 1e5).round() as u64 * 100) + sc.load.overhead.0;
    let workers: Option<Vec<u32>> = sc.backends.iter().map(|b| b.workers).collect();
    let concurrency = match workers {
        Some(w) => {
            let mean = w.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
            mean / f64::from(sc.load.clients.max(1))
        }
        None => EndpointConfig::default().gradient.initial_concurrency,
    };
    (rtt, concurrency)
}

/// tower's generator trait over the lab's seeded one, so the sim repeats.
#[derive(Clone)]
pub struct Seeded(pub Rng);

impl tower::util::rng::Rng for Seeded {
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
}

/// Runs `rival` as a row.
pub async fn run(
    ctx: &Ctx<'_>,
    rival: Rival,
) -> Result<Result<PickerReport, &'static str>, LabError> {
    let sc = ctx.sc;
    let row = Row::new(sc, ctx.seed, ctx.duration, ctx.open, ctx.sim);
    let (targets, _servers) = targets(ctx.sim, &row.backends).await?;
    let progress = ctx.progress(format!("{rival} (rival)"));
    // Each client balancer discovers the backends through its own channel:
    // the first members at once, the others when they join.
    let (streams, _membership) = discovery(ctx, &row, &targets);
    let sent = Arc::new(AtomicU64::new(0));
    let lbs = streams
        .into_iter()
        .enumerate()
        .map(|(c, d)| client(ctx, rival, c as u64, d, &sent))
        .collect();
    let traffic = row.start(sc.max_vus(), lbs, progress);
    tokio::time::sleep_until(row.plan.end).await;
    let in_flight = row.backend_load();
    traffic.finish().await;
    let mut report = row.rec.finish(rival.as_str(), false, in_flight, false);
    row.add_utilization(&mut report);
    report.rival = Some(what(rival, sc));
    report.retries = sc
        .resilience
        .retry
        .as_ref()
        .map(|_| sent.load(Ordering::Relaxed));
    report.membership = membership_stats::stats(sc, &report);
    Ok(Ok(report))
}

/// Client `c`'s balancer for `rival` over discovery stream `d`, with
/// tower's `Retry` when the scenario retries.
fn client(
    ctx: &Ctx<'_>,
    rival: Rival,
    c: u64,
    d: discover::Channel<Endpoint>,
    sent: &Arc<AtomicU64>,
) -> Client {
    let rng = Seeded(Rng::new(sub_seed(ctx.seed, 2000 + c)));
    let lb: Client = match rival {
        Rival::TowerP2c => {
            let d = PeakEwmaDiscover::new(
                d,
                TOWER_DEFAULT_RTT,
                TOWER_DECAY,
                CompleteOnResponse::default(),
            );
            BoxCloneService::new(Buffer::new(Balance::from_rng(d, rng), TOWER_BUFFER))
        }
        Rival::TowerPending => {
            let d = PendingRequestsDiscover::new(d, CompleteOnResponse::default());
            BoxCloneService::new(Buffer::new(Balance::from_rng(d, rng), TOWER_BUFFER))
        }
        Rival::Tonic => {
            let d = Wrapped::new(d, |_, ep| Constant::new(ep, 0usize));
            BoxCloneService::new(Buffer::new(Balance::from_rng(d, rng), TONIC_BUFFER))
        }
        Rival::Loadpace | Rival::LoadpaceTuned => {
            let cfg = config(rival, ctx.sc);
            let bound = cfg.queue_capacity;
            let seed = ctx.seed;
            let d = Wrapped::new(d, move |i: usize, ep| {
                let s = sub_seed(seed, 5000 + c * 100_000 + i as u64);
                Paced::new(ep, cfg.clone(), s)
            });
            let lb = Buffer::new(Balance::from_rng(d, rng), bound);
            BoxCloneService::new(LoadShed::new(lb))
        }
    };
    let Some(spec) = &ctx.sc.resilience.retry else {
        return lb;
    };
    let seed = sub_seed(ctx.seed, 3000 + c);
    let Some(policy) = retry::Policy::new(spec, seed, sent.clone()) else {
        return lb;
    };
    let lb = match spec.per_try_timeout {
        Some(t) => BoxCloneService::new(tower::timeout::Timeout::new(lb, t.0)),
        None => lb,
    };
    BoxCloneService::new(tower::retry::Retry::new(policy, lb).map_err(BoxError::from))
}

/// One `Discover` stream per client balancer, fed its first members now,
/// and the joins and leaves sent through it at their times (until the
/// returned guard drops).
fn discovery(
    ctx: &Ctx<'_>,
    row: &Row,
    targets: &[Target],
) -> (Vec<discover::Channel<Endpoint>>, AbortOnDrop) {
    let sc = ctx.sc;
    let members = initial(&sc.backends);
    let mut senders = Vec::new();
    let mut streams = Vec::new();
    for c in 0..sc.load.clients {
        let (tx, d) = discover::channel();
        for (i, t) in targets.iter().enumerate().filter(|(i, _)| members[*i]) {
            let _ = tx.send(Change::Insert(i, endpoint(ctx, row, c, i, t)));
        }
        senders.push(tx);
        streams.push(d);
    }
    let actions = joins::actions(
        sc,
        sc.load.clients,
        |c, i| {
            let tx = senders[c as usize].clone();
            let svc = endpoint(ctx, row, c, i, &targets[i]);
            Box::new(move || {
                let _ = tx.send(Change::Insert(i, svc));
            })
        },
        |c, i| {
            let tx = senders[c as usize].clone();
            Box::new(move || {
                let _ = tx.send(Change::Remove(i));
            })
        },
    );
    (streams, joins::drive(row.plan.start, actions))
}

/// Client `c`'s endpoint for backend `i`: the plain service, which the
/// rival wraps when it discovers it.
fn endpoint(ctx: &Ctx<'_>, row: &Row, c: u32, i: usize, t: &Target) -> Endpoint {
    Endpoint::new(Parts {
        idx: i,
        target: t.clone(),
        overhead: ctx.sc.load.overhead.0 + ctx.sc.rtt(c, i),
        rec: row.rec.clone(),
    })
}
