//! `--discovery etcd` (feature `etcd`): a local etcd for the run, and per
//! row the replicas' registrations, the balancers' sources and the
//! watches that time what happened.

mod replicas;
mod watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use etcd_client::Client;
use tokio::time::Instant;
use tower_lb::discover::{Driver, Source};
use tower_lb::pick::Pick;
use tower_lb::retry::Backoff;
use tower_lb_etcd::Etcd;
use tower_lb_etcd::local::LocalEtcd;

use self::replicas::{Replicas, Shared};
use super::Feed;
use crate::error::LabError;
use crate::report::registry::EtcdRow;
use crate::run::balancers::{self, Lb};
use crate::run::endpoint::{Endpoint, Target};
use crate::run::joins;
use crate::run::message::LabRequest;
use crate::run::row::{Ctx, Row};
use crate::run::server::AbortOnDrop;
use crate::scenario::Scenario;
use crate::scenario::membership::initial;

/// Longest wait for a row's first replicas to reach its balancers: they
/// take milliseconds; a loaded machine gets twenty seconds.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// The sources' reconnect delays: 50 ms doubling to 500 ms, so a watch
/// lost on a busy machine is back within the row, not after the
/// production default's seconds.
const RECONNECT: (Duration, Duration) = (Duration::from_millis(50), Duration::from_millis(500));

/// The run's local etcd.
pub struct Registry {
    etcd: LocalEtcd,
    client: Client,
    ttl: Duration,
    crashed: Vec<usize>,
    rows: AtomicU32,
}

/// A row's registrations, sources and watches.
pub struct RowGuard {
    replicas: Shared,
    measured: Instant,
    ttl: Duration,
    _drivers: Vec<Driver>,
    _tasks: Vec<AbortOnDrop>,
}

impl Registry {
    /// Starts etcd on 127.0.0.1 (a temporary data directory).
    pub async fn start(ttl: Duration, crashed: Vec<usize>) -> Result<Self, LabError> {
        let etcd = LocalEtcd::start()
            .await
            .map_err(|e| LabError::runtime(format!("--discovery etcd: {e}")))?;
        let client = etcd
            .client()
            .await
            .map_err(|e| LabError::runtime(format!("--discovery etcd: {e}")))?;
        Ok(Self {
            etcd,
            client,
            ttl,
            crashed,
            rows: AtomicU32::new(0),
        })
    }

    /// The report's note.
    pub fn note(&self, sc: &Scenario) -> String {
        let crashes: Vec<String> = self
            .crashed
            .iter()
            .filter_map(|&i| {
                let b = &sc.backends[i];
                Some(format!("{} crashes at {:?}", b.name, b.leave?.0))
            })
            .collect();
        let crashes = match crashes.is_empty() {
            true => String::new(),
            false => format!(
                "; {} (its lease is no longer renewed, never revoked)",
                crashes.join(", ")
            ),
        };
        format!(
            "discovery: etcd at {}: each replica registers under a lease of {:?} when it joins, every balancer watches the prefix{crashes}",
            self.etcd.endpoint(),
            self.ttl
        )
    }

    /// A fresh row's replicas, under a prefix of their own, their keys
    /// holding the weights (`weighted`) and metadata the balancers use.
    fn replicas(
        &self,
        ctx: &Ctx<'_>,
        targets: &[Target],
        weighted: bool,
    ) -> Result<Shared, LabError> {
        let sc = ctx.sc;
        let n = self.rows.fetch_add(1, Ordering::Relaxed) + 1;
        let addrs = targets.iter().map(addr).collect::<Result<Vec<_>, _>>()?;
        let values = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let b = &sc.backends[i];
                let w = if weighted { b.weight } else { 1.0 };
                let e = tower_lb_etcd::Endpoint::new(*a)
                    .weight(w)
                    .priority(b.priority);
                match &b.zone {
                    Some(z) => e.zone(z.clone()),
                    None => e,
                }
            })
            .collect();
        let target = format!("lab/{}/row-{n}", sc.name);
        Ok(Arc::new(Replicas::new(
            self.client.clone(),
            target,
            self.ttl,
            addrs,
            values,
        )))
    }

    /// Registers the first members now, and the joins, leaves and crashes
    /// at their times.
    async fn schedule(
        &self,
        ctx: &Ctx<'_>,
        row: &Row,
        r: &Shared,
    ) -> Result<AbortOnDrop, LabError> {
        for (i, first) in initial(&ctx.sc.backends).into_iter().enumerate() {
            if first {
                r.join(i).await.map_err(LabError::runtime)?;
            }
        }
        let actions = joins::actions(
            ctx.sc,
            1,
            |_, i| {
                let r = r.clone();
                Box::new(move || {
                    tokio::spawn(async move { r.join(i).await });
                })
            },
            |_, i| {
                let (r, crash) = (r.clone(), self.crashed.contains(&i));
                Box::new(move || if crash { r.crash(i) } else { r.revoke(i) })
            },
        );
        Ok(joins::drive(row.plan.start, actions))
    }

    /// See [`crate::discovery::Registry::tower_lb`].
    pub async fn tower_lb<P: Pick<LabRequest>>(
        &self,
        ctx: &Ctx<'_>,
        row: &Row,
        lbs: &[Lb<P>],
        targets: &[Target],
        weighted: bool,
    ) -> Result<RowGuard, LabError> {
        let sc = ctx.sc;
        let r = self.replicas(ctx, targets, weighted)?;
        let mut drivers = Vec::with_capacity(lbs.len());
        let mut expect = vec![0; targets.len()];
        for (c, lb) in (0u32..).zip(lbs) {
            let given = sc.given(ctx.variant, ctx.seed, c);
            for (e, g) in expect.iter_mut().zip(&given) {
                *e += usize::from(*g);
            }
            let eps: Vec<Endpoint> = (0..targets.len())
                .map(|i| balancers::endpoint(ctx, weighted, &targets[i], &row.rec, c, i).0)
                .collect();
            let index = r.clone();
            let make = move |a: SocketAddr| {
                let i = index.index(a)?;
                given[i].then(|| (i, eps[i].clone()))
            };
            let source = Etcd::builder(self.client.clone(), r.target.clone())
                .reconnect_backoff(Backoff::new(RECONNECT.0, RECONNECT.1))
                .build()
                .map_err(|e| LabError::runtime(format!("--discovery etcd: {e}")))?;
            drivers.push(source.spawn(lb.handle(), make));
        }
        let handles = lbs.iter().map(|lb| lb.handle()).collect();
        let mut tasks = vec![AbortOnDrop::new(tokio::spawn(watch::pools(
            handles,
            expect,
            r.clone(),
        )))];
        tasks.push(self.deletions(&r));
        tasks.push(self.schedule(ctx, row, &r).await?);
        ready(&r, sc).await?;
        Ok(RowGuard::new(r, row, self.ttl, drivers, tasks))
    }

    /// Records when etcd deletes each key.
    fn deletions(&self, r: &Shared) -> AbortOnDrop {
        let (client, target, r) = (self.client.clone(), r.target.clone(), r.clone());
        AbortOnDrop::new(tokio::spawn(async move {
            let seen = r.clone();
            let on = move |a, put: bool| {
                if let (Some(i), false) = (seen.index(a), put) {
                    seen.edit(i, |t| t.deleted = Some(Instant::now()));
                }
            };
            if let Err(e) = watch::keys(client, target, on).await {
                r.error(format!("the watch of deletions ended: {e}"));
            }
        }))
    }

    /// See [`crate::discovery::Registry::rivals`].
    pub async fn rivals(
        &self,
        ctx: &Ctx<'_>,
        row: &Row,
        targets: &[Target],
        mut feed: Feed,
    ) -> Result<RowGuard, LabError> {
        let r = self.replicas(ctx, targets, false)?;
        let (client, target, seen) = (self.client.clone(), r.target.clone(), r.clone());
        let errors = r.clone();
        let task = AbortOnDrop::new(tokio::spawn(async move {
            let mut inside = vec![false; seen.addrs.len()];
            let on = move |a, put: bool| {
                let Some(i) = seen.index(a) else { return };
                if inside[i] == put {
                    return;
                }
                inside[i] = put;
                feed(i, put);
                let now = Some(Instant::now());
                seen.edit(i, |t| match put {
                    true => t.in_pool = t.in_pool.or(now),
                    false => (t.deleted, t.out_of_pool) = (now, now),
                });
            };
            if let Err(e) = watch::keys(client, target, on).await {
                errors.error(format!("the rivals' watch ended: {e}"));
            }
        }));
        let tasks = vec![task, self.schedule(ctx, row, &r).await?];
        ready(&r, ctx.sc).await?;
        Ok(RowGuard::new(r, row, self.ttl, Vec::new(), tasks))
    }
}

impl RowGuard {
    fn new(
        replicas: Shared,
        row: &Row,
        ttl: Duration,
        drivers: Vec<Driver>,
        tasks: Vec<AbortOnDrop>,
    ) -> Self {
        Self {
            replicas,
            measured: row.plan.measured,
            ttl,
            _drivers: drivers,
            _tasks: tasks,
        }
    }

    /// See [`crate::discovery::RowGuard::finish`].
    pub fn finish(self, sc: &Scenario) -> EtcdRow {
        let names: Vec<String> = sc.backends.iter().map(|b| b.name.clone()).collect();
        let (replicas, errors) = self.replicas.finish(self.measured, &names);
        EtcdRow {
            target: self.replicas.target.clone(),
            ttl_s: self.ttl.as_secs_f64(),
            replicas,
            errors,
        }
    }
}

/// Waits until the first members are in every balancer that may have
/// them.
async fn ready(r: &Shared, sc: &Scenario) -> Result<(), LabError> {
    let first = initial(&sc.backends);
    let wait = async {
        loop {
            let times = r.times();
            let all = first
                .iter()
                .zip(&times)
                .all(|(f, t)| !f || t.in_pool.is_some());
            if all {
                return;
            }
            tokio::time::sleep(watch::POLL).await;
        }
    };
    tokio::time::timeout(READY_TIMEOUT, wait).await.map_err(|_| {
        LabError::runtime(format!(
            "--discovery etcd: the first replicas did not reach the balancers within {READY_TIMEOUT:?}"
        ))
    })
}

/// A backend's `127.0.0.1:port`.
fn addr(t: &Target) -> Result<SocketAddr, LabError> {
    match t {
        Target::Http { authority, .. } => authority
            .as_str()
            .parse()
            .map_err(|e| LabError::runtime(format!("--discovery etcd: {authority}: {e}"))),
        Target::Sim(_) => Err(LabError::input(
            "--discovery etcd: needs http mode, not --sim",
        )),
    }
}
