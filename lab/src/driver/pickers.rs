//! The rows of tower-lb's pickers (and of the lab's oracle): per row,
//! fresh backends, the scenario's client balancers over them, the traffic,
//! the joins and leaves, and at the end what the balancers know.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tower_lb::pick::Pick;
use tower_lb::route::RoutePlan;

use crate::discovery::Registry;
use crate::error::LabError;
use crate::report::{PickerReport, fleet_stats, membership_stats};
use crate::run::balancers::{self, Clients, EndStats, Lb};
use crate::run::endpoint::{Target, targets};
use crate::run::joins;
use crate::run::message::LabRequest;
use crate::run::replica::model::Backend;
use crate::run::row::{Ctx, Row};
use crate::run::server::AbortOnDrop;
use crate::scenario::random::sub_seed;
use crate::scenario::{PickerName, Scenario};

/// Runs one row of the crate's balancers with `make`'s picker, and returns
/// its numbers.
pub async fn run<P, F>(
    ctx: &Ctx<'_>,
    name: PickerName,
    registry: Option<&Registry>,
    make: F,
) -> Result<PickerReport, LabError>
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
    let (targets, _servers) = targets(ctx.sc, ctx.sim, &row.backends).await?;
    let weighted = sc.weighted(name);
    let clients = balancers::build(ctx, &label, weighted, &targets, &row.rec, || {
        make(&row.backends)
    })?;
    let shown = match ctx.variant {
        Some(v) => format!("{label} [{}]", v.as_str()),
        None => label.clone(),
    };
    let etcd = match registry {
        Some(r) => Some(
            r.tower_lb(ctx, &row, &clients.lbs, &targets, weighted)
                .await?,
        ),
        None => None,
    };
    let traffic = clients.start(&row, sc.max_vus(), ctx.progress(shown));
    let _joins = etcd
        .is_none()
        .then(|| joins(ctx, &row, &clients.lbs, &targets, weighted));
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
    report.etcd = etcd.map(|e| e.finish(sc));
    Ok(report)
}

/// Drives the scenario's joins and leaves through each balancer's handle,
/// while the guard lives.
fn joins<P: Pick<LabRequest>>(
    ctx: &Ctx<'_>,
    row: &Row,
    lbs: &[Lb<P>],
    targets: &[Target],
    weighted: bool,
) -> AbortOnDrop {
    let sc = ctx.sc;
    joins::drive(
        row.plan.start,
        joins::actions(
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

/// Adds to `report` what the row's balancers, retry layers and load probes know
/// at its end: retries, membership, load probes, ejections, breaker openings,
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
    report.probes = clients.load_probe_counts();
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
async fn plans(
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
fn sample(plan: &RoutePlan) -> (Vec<u32>, String) {
    let loads = plan.levels.iter().map(|l| l.load).collect();
    let healthy = plan
        .levels
        .first()
        .map_or_else(String::new, |l| format!("{}/{}", l.healthy, l.total));
    (loads, healthy)
}
