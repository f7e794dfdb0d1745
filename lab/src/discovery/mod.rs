//! How the balancers learn of replicas that join and leave while a row
//! runs (`--discovery`): through the lab's own join actions (`handle`, the
//! default: [`crate::run::joins`] edits each balancer's `Handle`, and feeds
//! each rival's `Discover` channel), or through a real etcd (`etcd`,
//! feature `etcd`, http mode): each replica registers itself under a
//! lease with `tower_lb_etcd::register` when it joins, every tower-lb
//! balancer's endpoints come from a `tower_lb_etcd::Etcd` source watching
//! the prefix, the rivals' `Discover` channels from a watch of the same
//! prefix, and a replica named in the scenario's `[etcd] crash` stops
//! renewing its lease without revoking it, so it leaves when the lease
//! expires.

#[cfg(feature = "etcd")]
mod etcd;

use tower_lb::pick::Pick;

use crate::error::LabError;
use crate::run::balancers::Lb;
use crate::run::endpoint::Target;
use crate::run::message::LabRequest;
use crate::run::row::{Ctx, Row};
use crate::scenario::Scenario;
use crate::scenario::membership::changes;

/// `--discovery`'s choices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Discovery {
    /// The lab's join actions, in process (the default).
    #[default]
    Handle,
    /// A local etcd: registrations under leases, and watches.
    Etcd,
}

impl Discovery {
    /// `handle` or `etcd`.
    pub fn parse(v: &str) -> Result<Self, LabError> {
        match v {
            "handle" => Ok(Discovery::Handle),
            "etcd" => Ok(Discovery::Etcd),
            v => Err(LabError::input(format!(
                "--discovery: \"{v}\": give handle or etcd"
            ))),
        }
    }
}

/// What a watch tells of backend `i`: its key appeared (`true`) or went.
pub type Feed = Box<dyn FnMut(usize, bool) + Send>;

/// A run's registry: one local etcd the rows' replicas register in (each
/// row under a prefix of its own). Only `--discovery etcd` makes one.
pub struct Registry {
    #[cfg(feature = "etcd")]
    inner: etcd::Registry,
    #[cfg(not(feature = "etcd"))]
    never: std::convert::Infallible,
}

/// What a row's registrations and watches need while the row runs; its
/// events once it ends ([`RowGuard::finish`]).
pub struct RowGuard {
    #[cfg(feature = "etcd")]
    inner: etcd::RowGuard,
    #[cfg(not(feature = "etcd"))]
    never: std::convert::Infallible,
}

impl RowGuard {
    /// Stops the row's registrations and watches, and returns its events.
    pub fn finish(self, sc: &Scenario) -> crate::report::registry::EtcdRow {
        #[cfg(feature = "etcd")]
        return self.inner.finish(sc);
        #[cfg(not(feature = "etcd"))]
        match (self.never, sc) {}
    }
}

/// With `--discovery etcd`: checks the run can use etcd, starts a local
/// etcd, and returns the scenario with each `[etcd] crash` as its
/// backend's `leave`, and the registry. `None` for `--discovery handle`.
///
/// # Errors
///
/// `--sim` (no sockets there), a scenario where no replica joins, a lab
/// built without feature `etcd`, or an etcd that did not start.
pub async fn prepare(
    sc: &Scenario,
    sim: bool,
    discovery: Discovery,
) -> Result<Option<(Scenario, Registry)>, LabError> {
    if discovery == Discovery::Handle {
        return Ok(None);
    }
    if sim {
        return Err(LabError::input(
            "--discovery etcd: needs http mode (replicas on real sockets registering in a real etcd), not --sim",
        ));
    }
    if !changes(&sc.backends).iter().any(|c| c.join) {
        return Err(LabError::input(format!(
            "--discovery etcd: no replica of scenario {} joins while it runs (give a [[backend]] a `join`, as scale-out does)",
            sc.name
        )));
    }
    let mut sc = sc.clone();
    let spec = sc.etcd.clone().unwrap_or_default();
    let crashed = spec.crashes(&mut sc.backends);
    start(sc, spec.ttl.0, crashed).await.map(Some)
}

#[cfg(feature = "etcd")]
async fn start(
    sc: Scenario,
    ttl: std::time::Duration,
    crashed: Vec<usize>,
) -> Result<(Scenario, Registry), LabError> {
    let inner = etcd::Registry::start(ttl, crashed).await?;
    Ok((sc, Registry { inner }))
}

#[cfg(not(feature = "etcd"))]
async fn start(
    _: Scenario,
    _: std::time::Duration,
    _: Vec<usize>,
) -> Result<(Scenario, Registry), LabError> {
    Err(LabError::input(
        "--discovery etcd: this lab was built without feature `etcd` (it needs protoc): \
         cargo run --release -p tower-lb-lab --features etcd -- --discovery etcd ...",
    ))
}

impl Registry {
    /// What the report's notes say of the registry.
    pub fn note(&self, sc: &Scenario) -> String {
        #[cfg(feature = "etcd")]
        return self.inner.note(sc);
        #[cfg(not(feature = "etcd"))]
        match (self.never, sc) {}
    }

    /// Registers the row's first replicas, starts one etcd source per
    /// tower-lb client balancer (`lbs`, built empty) and waits until each
    /// has its first members; the joins, leaves and crashes then happen at
    /// their times while the guard lives.
    ///
    /// # Errors
    ///
    /// A registration or a source that failed, or balancers that did not
    /// see their first members within 20 s.
    pub async fn tower_lb<P: Pick<LabRequest>>(
        &self,
        ctx: &Ctx<'_>,
        row: &Row,
        lbs: &[Lb<P>],
        targets: &[Target],
        weighted: bool,
    ) -> Result<RowGuard, LabError> {
        #[cfg(feature = "etcd")]
        return Ok(RowGuard {
            inner: self
                .inner
                .tower_lb(ctx, row, lbs, targets, weighted)
                .await?,
        });
        #[cfg(not(feature = "etcd"))]
        match (self.never, ctx, row, lbs, targets, weighted) {}
    }

    /// For the rivals: one watch of the row's prefix calls `feed(i,
    /// true)` when backend `i`'s key appears, `feed(i, false)` when it
    /// goes (the rivals' `Discover` channels take it from there); as
    /// [`Self::tower_lb`] otherwise.
    ///
    /// # Errors
    ///
    /// As [`Self::tower_lb`].
    pub async fn rivals(
        &self,
        ctx: &Ctx<'_>,
        row: &Row,
        targets: &[Target],
        feed: Feed,
    ) -> Result<RowGuard, LabError> {
        #[cfg(feature = "etcd")]
        return Ok(RowGuard {
            inner: self.inner.rivals(ctx, row, targets, feed).await?,
        });
        #[cfg(not(feature = "etcd"))]
        match (self.never, ctx, row, targets, feed) {}
    }
}
