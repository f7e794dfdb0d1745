//! One peer row: fresh backends, the proxy in front of them, the
//! scenario's users (or arrivals) sending through it with a plain
//! hyper-util client.
//! Responses are attributed to backends by the header the backends add;
//! in-flight at the end is counted by the backends themselves.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::uri::{Authority, Scheme, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::Service;

use super::binary::{self, Installed};
use super::config::{self, Setup};
use super::process;
use crate::error::LabError;
use crate::record::Recorder;
use crate::report::{PeerInfo, PickerReport, Report};
use crate::run::endpoint::HttpClient;
use crate::run::message::{BACKEND_HEADER, EndpointError, LabRequest, LabResponse, backend_tag};
use crate::run::row::{Progress, Row};
use crate::run::server;
use crate::scenario::proxy::{Peer, Proxy};
use crate::scenario::{OpenLoop, Scenario};

/// What a row needs from the run.
#[derive(Clone, Copy)]
pub struct RowCtx<'a> {
    /// The scenario.
    pub sc: &'a Scenario,
    /// Length of the row.
    pub duration: Duration,
    /// Seed of every random number (the same backends' and users' draws as
    /// the pickers' rows).
    pub seed: u64,
    /// No progress line.
    pub quiet: bool,
    /// Position in the table, for the progress line.
    pub nth: (usize, usize),
    /// The open loop, resolved (`None`: the scenario's users).
    pub open: Option<OpenLoop>,
}

/// Runs the peer rows after the pickers' rows. A proxy that is not
/// installed, or a row that cannot start, becomes a note; the other rows run.
pub async fn run_rows(
    ctx: &RowCtx<'_>,
    rows: &[Peer],
    report: &mut Report,
) -> Result<(), LabError> {
    let mut found: Vec<(Proxy, Result<Installed, String>)> = Vec::new();
    for peer in rows {
        if !found.iter().any(|(p, _)| *p == peer.proxy) {
            found.push((peer.proxy, binary::installed(peer.proxy)));
        }
    }
    run_found(ctx, rows, &found, report).await
}

/// [`run_rows`] with the proxies already looked up: `found` says, per
/// proxy, where it is or why it cannot run.
pub async fn run_found(
    ctx: &RowCtx<'_>,
    rows: &[Peer],
    found: &[(Proxy, Result<Installed, String>)],
    report: &mut Report,
) -> Result<(), LabError> {
    for (proxy, inst) in found {
        if let Err(why) = inst {
            report.notes.push(format!("{proxy}: skipped: {why}"));
        }
    }
    caveats(ctx.sc, report);
    // One watch for the whole loop: a signal that arrives between rows, or
    // while a row's end blocks on stopping its proxy, is still seen.
    let interrupt = interrupted();
    tokio::pin!(interrupt);
    for (k, &peer) in rows.iter().enumerate() {
        let inst = match found.iter().find(|(p, _)| *p == peer.proxy) {
            Some((_, Ok(inst))) => inst,
            Some((_, Err(_))) => continue,
            None => {
                report.notes.push(format!(
                    "{} (peer): skipped: {} was not looked up",
                    peer.label(),
                    peer.proxy
                ));
                continue;
            }
        };
        let row = RowCtx {
            nth: (ctx.nth.0 + k, ctx.nth.1),
            ..*ctx
        };
        // Dropping the row's future stops its proxy: a Ctrl-C or SIGTERM
        // sent to the lab alone (not to its process group) must not leave
        // the proxy running.
        let outcome = tokio::select! {
            biased;
            why = &mut interrupt => {
                return Err(LabError::runtime(format!(
                    "{why} during {} (peer): the proxy was stopped",
                    peer.label()
                )));
            }
            r = run(&row, peer, inst) => r?,
        };
        match outcome {
            Ok(r) => report.runs.push(r),
            Err(why) => report
                .notes
                .push(format!("{} (peer): skipped: {why}", peer.label())),
        }
    }
    Ok(())
}

/// Notes in `report` what the peer rows leave out of `sc`: resilience,
/// several clients, joins and leaves, the modelled overhead.
fn caveats(sc: &Scenario, report: &mut Report) {
    if sc.resilience.retry.is_some()
        || sc.resilience.breaker.is_some()
        || sc.resilience.outlier.is_some()
    {
        report.notes.push(
            "peers: [resilience] applies to tower-lb's rows; the proxies keep their own defaults"
                .into(),
        );
    }
    if sc.load.clients > 1 {
        report.notes.push(format!(
            "peers: one proxy serves all users (load.clients = {} applies to tower-lb's rows)",
            sc.load.clients
        ));
    }
    if sc
        .backends
        .iter()
        .any(|b| b.join.is_some() || b.leave.is_some())
    {
        report.notes.push(
            "peers: a proxy's upstream is its config file: backends that join or leave are in it from the start"
                .into(),
        );
    }
    if !sc.load.overhead.0.is_zero() {
        report.notes.push(
            "peers: load.overhead (a modelled proxy hop) is not added: the hop is real".into(),
        );
    }
}

/// Resolves on Ctrl-C or (unix) SIGTERM, naming it; never if signals
/// cannot be watched.
async fn interrupted() -> &'static str {
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        r = tokio::signal::ctrl_c() => match r {
            Ok(()) => "interrupted (Ctrl-C)",
            Err(_) => std::future::pending().await,
        },
        () = term => "terminated (SIGTERM)",
    }
}

/// Runs `peer` on `inst`. `Ok(Err(why))`: the row is skipped (the proxy
/// did not start, or its build lacks the policy), the others still run.
pub async fn run(
    ctx: &RowCtx<'_>,
    peer: Peer,
    inst: &Installed,
) -> Result<Result<PickerReport, String>, LabError> {
    let sc = ctx.sc;
    let n = sc.backends.len();
    let listeners = server::bind(n).await?;
    let addrs = listeners
        .iter()
        .map(|l| l.local_addr())
        .collect::<Result<Vec<SocketAddr>, _>>()
        .map_err(|e| LabError::runtime(format!("no local address: {e}")))?;
    let users = sc.max_vus();
    let make = |listen| {
        let setup = Setup {
            listen,
            backends: &addrs,
            users,
        };
        config::text(peer, &setup, &inst.without)
    };
    let running = match process::start(inst, make).await {
        Ok(r) => r,
        Err(why) => return Ok(Err(why)),
    };
    // The backends' event clocks and the traffic start now, after the
    // proxy is up: the row is timed like a picker's.
    let row = Row::new(sc, ctx.seed, ctx.duration, ctx.open, false);
    let servers = server::serve(listeners, &row.backends)?;
    let rec = row.rec.clone();
    let authority: Authority = running
        .addr
        .to_string()
        .parse()
        .map_err(|e| LabError::runtime(format!("bad address {}: {e}", running.addr)))?;
    let through = Through(Arc::new(Parts {
        client: Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build_http::<Full<Bytes>>(),
        authority,
        tags: sc
            .backends
            .iter()
            .enumerate()
            .map(|(i, b)| backend_tag(i, &b.name))
            .collect(),
        rec: rec.clone(),
    }));
    let progress = (!ctx.quiet).then(|| Progress {
        label: peer.row_name(),
        nth: ctx.nth,
        sim: false,
    });
    // One proxy serves every user (or arrival).
    let traffic = row.start(users, vec![through], progress);
    tokio::time::sleep_until(row.plan.end).await;
    let in_flight = row.backend_load();
    traffic.finish().await;
    let mut report = rec.finish(&peer.label(), false, in_flight, true);
    row.add_utilization(&mut report);
    // The pick happens in another process: there is no call to time.
    report.select_ns = None;
    report.rest_ns = None;
    report.peer = Some(PeerInfo {
        proxy: peer.proxy.name().to_string(),
        version: inst.version.clone(),
        policy: peer.policy.token().to_string(),
        keepalive: peer.settings.keepalive,
        conns: peer.settings.conns,
        config: running.config.clone(),
    });
    // The proxy stops before its backends do.
    drop(running);
    drop(servers);
    Ok(Ok(report))
}

/// The users' service for a peer row: every request to the proxy.
#[derive(Clone)]
struct Through(Arc<Parts>);

struct Parts {
    client: HttpClient,
    authority: Authority,
    /// The backends' header values, in backend order.
    tags: Arc<[http::HeaderValue]>,
    rec: Arc<Recorder>,
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<LabResponse, EndpointError>> + Send>>;

impl Service<LabRequest> for Through {
    type Response = LabResponse;
    type Error = EndpointError;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), EndpointError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: LabRequest) -> BoxFuture {
        let parts = self.0.clone();
        Box::pin(async move {
            let mut uri = req.uri().clone().into_parts();
            uri.scheme = Some(Scheme::HTTP);
            uri.authority = Some(parts.authority.clone());
            *req.uri_mut() = Uri::from_parts(uri).map_err(|e| EndpointError(e.to_string()))?;
            let res = parts
                .client
                .request(req)
                .await
                .map_err(|e| EndpointError(format!("request failed: {e}")))?;
            // Counted when the answer names its backend: an answer from the
            // proxy itself (a 502) went to no backend.
            if let Some(i) = res
                .headers()
                .get(BACKEND_HEADER)
                .and_then(|v| parts.tags.iter().position(|t| t == v))
            {
                parts.rec.pick(i);
            }
            let status = res.status();
            res.into_body()
                .collect()
                .await
                .map_err(|e| EndpointError(format!("body failed: {e}")))?;
            let mut out = http::Response::new(crate::run::replica::body::LabBody::Done);
            *out.status_mut() = status;
            Ok(out)
        })
    }
}
