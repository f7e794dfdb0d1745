//! The rivals: other Rust balancers as rows of the same table, over the same
//! backends, arrivals and slowdowns, built the way their users build them.
//!
//! * `tower_p2c`: `tower::balance::p2c::Balance` over
//!   `tower::load::PeakEwma` endpoints (default RTT 30 ms, decay 10 s:
//!   linkerd2-proxy's values, and the open-loop model's), completion at the
//!   response head (`CompleteOnResponse`). The balancer is not `Clone` and
//!   picks in `poll_ready`, so tower users share it behind a `Buffer`; so
//!   does the lab, one per client balancer.
//! * `loadpace`: `loadpace-tower`'s `AdaptiveEndpoint`s (default
//!   `EndpointConfig`) under the same P2C balancer and `Buffer`: P2C over
//!   predicted completion cost, with per-endpoint pacing.
//!
//! Both learn of their endpoints from a channel-backed `Discover` stream
//! ([`discover`]), so replicas that join and leave (`join`,
//! `leave`) reach them as a discovery source's changes would.
//!
//! They run bare: tower-lb's layers (`[resilience]`: retries, breakers,
//! ejection) are tower-lb's, and the route step's variants (`[fleet]`) too.
//! Their in-flight column is what the backends hold at the row's end, and
//! they have no selection time (the pick happens in the buffer's task).

pub mod discover;

use std::time::Duration;

use tower::balance::p2c::Balance;
use tower::buffer::Buffer;
use tower::discover::Change;
use tower::load::{CompleteOnResponse, PeakEwma};

use crate::error::LabError;
use crate::report::PickerReport;
use crate::report::membership_stats;
use crate::run::endpoint::{Endpoint, Parts, Target, targets};
use crate::run::joins;
use crate::run::row::{Ctx, Row};
use crate::run::server::AbortOnDrop;
use crate::scenario::Rival;
use crate::scenario::membership::initial;
use crate::scenario::random::{Rng, sub_seed};

/// tower's PeakEwma default RTT in the lab (linkerd2-proxy's).
pub const TOWER_DEFAULT_RTT: Duration = Duration::from_millis(30);
/// tower's PeakEwma decay in the lab (linkerd2-proxy's, and tower-lb's).
pub const TOWER_DECAY: Duration = Duration::from_secs(10);
/// Requests a client's `Buffer` holds before its callers wait: far above
/// what any scenario keeps in flight, so the buffer never refuses.
const BUFFER: usize = 1 << 16;

/// What runs, for the table's notes and the JSON.
pub fn what(rival: Rival) -> String {
    match rival {
        Rival::TowerP2c => format!(
            "tower 0.5 p2c::Balance over load::PeakEwma (default RTT {:?}, decay {:?}) behind a Buffer",
            TOWER_DEFAULT_RTT, TOWER_DECAY
        ),
        Rival::Loadpace => {
            "loadpace-tower 0.1.0-rc.4 AdaptiveEndpoint (default config) under tower's p2c::Balance, behind a Buffer".into()
        }
    }
}

/// tower's generator trait over the lab's seeded one, so the sim repeats.
struct Seeded(Rng);

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
    let rng = |c: u32| Seeded(Rng::new(sub_seed(ctx.seed, 2000 + u64::from(c))));
    let progress = ctx.progress(format!("{rival} (rival)"));
    let users = sc.max_vus();
    // Each client balancer discovers the backends through its own channel:
    // the first members at once, the others when they join.
    let (traffic, _membership) = match rival {
        Rival::TowerP2c => {
            let (ds, joins) = discovery(ctx, &row, &targets, |ep| {
                PeakEwma::new(
                    ep,
                    TOWER_DEFAULT_RTT,
                    TOWER_DECAY.as_nanos() as f64,
                    CompleteOnResponse::default(),
                )
            });
            let lbs: Vec<_> = (0..)
                .zip(ds)
                .map(|(c, d)| Buffer::new(Balance::from_rng(d, rng(c)), BUFFER))
                .collect();
            (row.start(users, lbs, progress), joins)
        }
        Rival::Loadpace => {
            let (ds, joins) = discovery(ctx, &row, &targets, |ep| {
                loadpace_tower::AdaptiveEndpoint::new(ep, loadpace::EndpointConfig::default())
            });
            let lbs: Vec<_> = (0..)
                .zip(ds)
                .map(|(c, d)| Buffer::new(Balance::from_rng(d, rng(c)), BUFFER))
                .collect();
            (row.start(users, lbs, progress), joins)
        }
    };
    tokio::time::sleep_until(row.plan.end).await;
    let in_flight = row.backend_load();
    traffic.finish().await;
    let mut report = row.rec.finish(rival.as_str(), false, in_flight, false);
    row.add_utilization(&mut report);
    report.rival = Some(what(rival));
    report.membership = membership_stats::stats(sc, &report);
    Ok(Ok(report))
}

/// One `Discover` stream per client balancer, fed its first members now,
/// and the joins and leaves sent through it at their times (until the
/// returned guard drops).
fn discovery<W: Send + 'static>(
    ctx: &Ctx<'_>,
    row: &Row,
    targets: &[Target],
    wrap: impl Fn(Endpoint) -> W,
) -> (Vec<discover::Channel<W>>, AbortOnDrop) {
    let sc = ctx.sc;
    let members = initial(&sc.backends);
    let mut senders = Vec::new();
    let mut streams = Vec::new();
    for c in 0..sc.load.clients {
        let (tx, d) = discover::channel();
        for (i, t) in targets.iter().enumerate().filter(|(i, _)| members[*i]) {
            let _ = tx.send(Change::Insert(i, wrap(endpoint(ctx, row, c, i, t))));
        }
        senders.push(tx);
        streams.push(d);
    }
    let actions = joins::actions(
        sc,
        sc.load.clients,
        |c, i| {
            let tx = senders[c as usize].clone();
            let svc = wrap(endpoint(ctx, row, c, i, &targets[i]));
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

/// Client `c`'s endpoint for backend `i`.
fn endpoint(ctx: &Ctx<'_>, row: &Row, c: u32, i: usize, t: &Target) -> Endpoint {
    Endpoint::new(Parts {
        idx: i,
        target: t.clone(),
        overhead: ctx.sc.load.overhead.0 + ctx.sc.rtt(c, i),
        rec: row.rec.clone(),
    })
}
