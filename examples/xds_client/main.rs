//! xDS discovery end to end: a toy management server on 127.0.0.1 serves
//! EDS over ADS; a balancer follows it while the example changes the
//! assignment (weights, then a draining endpoint) and prints each phase's
//! shares. The replicas are in-process services keyed by the addresses the
//! control plane names. Finishes by itself in well under a second.
//!
//! ```text
//! cargo run --example xds_client
//! ```

#[allow(dead_code)]
pub mod control_plane;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::HealthStatus;
use tower::util::BoxCloneSyncService;
use tower::{ServiceExt, service_fn};
use tower_lb::discover::Source;
use tower_lb::discover::xds::Xds;
use tower_lb::{Balance, pick};

use control_plane::{ControlPlane, assignment, endpoint, locality};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Requests sent per phase.
const REQUESTS: usize = 400;

/// One phase: its name and the share of requests each replica answered.
pub type Phase = (&'static str, BTreeMap<SocketAddr, f64>);

fn replica(addr: SocketAddr) -> BoxCloneSyncService<(), SocketAddr, Infallible> {
    BoxCloneSyncService::new(service_fn(move |()| async move { Ok(addr) }))
}

/// Runs the three phases and returns their shares.
pub async fn run() -> Result<Vec<Phase>, BoxError> {
    let a: SocketAddr = "10.0.0.1:8080".parse()?;
    let b: SocketAddr = "10.0.0.2:8080".parse()?;
    let plane = ControlPlane::default();
    let server = plane.serve("127.0.0.1:0".parse()?).await?;

    let lb = Balance::builder()
        .picker(pick::WeightedRoundRobin::new())
        .build()?;
    let xds = Xds::builder(format!("http://{}", server.addr))
        .cluster("backend")
        .node_id("xds-example")
        .build()?;
    let _driver = xds.spawn(lb.handle(), |addr| Some((addr, replica(addr))));

    let phases: [(&'static str, Vec<_>); 3] = [
        (
            "equal weights",
            vec![
                endpoint(a, 1, HealthStatus::Healthy),
                endpoint(b, 1, HealthStatus::Healthy),
            ],
        ),
        (
            "b weighs 3",
            vec![
                endpoint(a, 1, HealthStatus::Healthy),
                endpoint(b, 3, HealthStatus::Healthy),
            ],
        ),
        (
            "a drains",
            vec![
                endpoint(a, 1, HealthStatus::Draining),
                endpoint(b, 3, HealthStatus::Healthy),
            ],
        ),
    ];
    let mut out = Vec::new();
    for (name, endpoints) in phases {
        let want: Vec<(SocketAddr, f64, bool)> = endpoints
            .iter()
            .map(|e| {
                let addr = if e == &endpoints[0] { a } else { b };
                let w = e.load_balancing_weight.as_ref().map_or(1, |w| w.value);
                (
                    addr,
                    f64::from(w),
                    e.health_status == HealthStatus::Draining as i32,
                )
            })
            .collect();
        plane.set(&[assignment(
            "backend",
            vec![locality("eu-1a", 0, 1, endpoints)],
        )]);
        // Wait (bounded) until the balancer shows the assignment.
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let mut now: Vec<_> = lb
                    .handle()
                    .endpoints()
                    .iter()
                    .map(|(k, s)| (*k, s.weight(), s.is_draining()))
                    .collect();
                now.sort_by_key(|e| e.0);
                if now == want {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await?;
        let mut counts: BTreeMap<SocketAddr, usize> = BTreeMap::new();
        for _ in 0..REQUESTS {
            *counts.entry(lb.clone().oneshot(()).await?).or_default() += 1;
        }
        let shares: BTreeMap<_, _> = [a, b]
            .iter()
            .map(|k| {
                (
                    *k,
                    counts.get(k).copied().unwrap_or(0) as f64 / REQUESTS as f64,
                )
            })
            .collect();
        println!(
            "{name:>14}: {}",
            shares
                .iter()
                .map(|(k, s)| format!("{k} {:.0}%", s * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        );
        out.push((name, shares));
    }
    server.stop().await;
    Ok(out)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    run().await?;
    Ok(())
}
