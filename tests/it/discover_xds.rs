//! xDS discovery: the ADS client against a management server written with
//! tonic over Envoy's protos, on 127.0.0.1.
#![cfg(feature = "xds")]

#[allow(dead_code)]
#[path = "../../examples/xds_client/main.rs"]
mod xds_example;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::HealthStatus::{Draining, Healthy, Unhealthy};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use tower::util::BoxCloneSyncService;
use tower::{ServiceExt, service_fn};
use tower_lb::discover::Source;
use tower_lb::discover::xds::{CLUSTER_LABEL, Xds};
use tower_lb::retry::Backoff;
use tower_lb::{Balance, Handle, pick};

use crate::support::{Capture, eventually};
use xds_example::control_plane::{ControlPlane, assignment, endpoint, locality};

type Svc = BoxCloneSyncService<(), SocketAddr, Infallible>;

fn a(last: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, last], 8080))
}

fn members<P: pick::Picker, C>(h: &Handle<SocketAddr, Svc, P, C>) -> Vec<(SocketAddr, f64, bool)> {
    let mut m: Vec<_> = h
        .endpoints()
        .iter()
        .map(|(k, s)| (*k, s.weight(), s.is_draining()))
        .collect();
    m.sort_by_key(|e| e.0);
    m
}

fn two(
    w2: u32,
    zone2: &str,
    p2: u32,
    health1: envoy_types::pb::envoy::config::core::v3::HealthStatus,
) -> ClusterLoadAssignment {
    let mut ls = vec![locality("eu-1a", 0, 1, vec![endpoint(a(1), 1, health1)])];
    if p2 == 0 && zone2 == "eu-1a" {
        ls[0].lb_endpoints.push(endpoint(a(2), w2, Healthy));
    } else {
        ls.push(locality(zone2, p2, 2, vec![endpoint(a(2), w2, Healthy)]));
    }
    assignment("backend", ls)
}

async fn shares(
    lb: &Balance<SocketAddr, Svc, pick::WeightedRoundRobin>,
    n: usize,
) -> HashMap<SocketAddr, f64> {
    let mut counts: HashMap<SocketAddr, usize> = HashMap::new();
    for _ in 0..n {
        *counts
            .entry(lb.clone().oneshot(()).await.unwrap())
            .or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(k, c)| (k, c as f64 / n as f64))
        .collect()
}

#[tokio::test]
async fn the_balancer_follows_the_assignment_and_acks_or_nacks() {
    let (capture, _guard) = Capture::install();
    let plane = ControlPlane::default();
    plane.set(&[two(1, "eu-1a", 0, Healthy)]);
    let server = plane.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = server.addr;

    let lb: Balance<SocketAddr, Svc, _> = Balance::builder()
        .picker(pick::WeightedRoundRobin::new())
        .build()
        .unwrap();
    let h = lb.handle();
    let xds = Xds::builder(format!("http://{addr}"))
        .cluster("backend")
        .node_id("test-node")
        .node_metadata("NAMESPACE", "shop")
        .reconnect_backoff(Backoff::new(
            Duration::from_millis(50),
            Duration::from_millis(200),
        ))
        .build()
        .unwrap();
    let stats = xds.stats();
    let _driver = xds.spawn(lb.handle(), |addr| {
        Some((
            addr,
            BoxCloneSyncService::new(service_fn(move |()| async move { Ok(addr) })),
        ))
    });

    // Initial assignment, with locality, its weight, priority and cluster.
    eventually("initial", || {
        members(&h) == [(a(1), 1.0, false), (a(2), 1.0, false)]
    })
    .await;
    let first = h.endpoints()[0].1.clone();
    let meta = first.meta();
    assert_eq!(
        (meta.locality().region(), meta.locality().zone()),
        ("eu", "eu-1a")
    );
    assert_eq!((meta.priority(), meta.locality_weight()), (0, Some(1)));
    assert_eq!(meta.labels()[CLUSTER_LABEL], "backend");
    eventually("ack", || plane.requests().len() >= 2).await;
    let reqs = plane.requests();
    let node = reqs[0].node.clone().unwrap();
    assert_eq!(node.id, "test-node");
    assert!(node.metadata.unwrap().fields.contains_key("NAMESPACE"));
    assert_eq!(reqs[0].resource_names, ["backend"]);
    assert_eq!(
        (
            reqs[0].version_info.as_str(),
            reqs[0].response_nonce.as_str()
        ),
        ("", "")
    );
    assert_eq!(
        (
            reqs[1].version_info.as_str(),
            reqs[1].response_nonce.as_str()
        ),
        ("1", "1")
    );
    assert!(reqs[1].error_detail.is_none());

    // A weight change: shares follow, models kept.
    plane.set(&[two(3, "eu-1a", 0, Healthy)]);
    eventually("weight", || members(&h)[1].1 == 3.0).await;
    let s = shares(&lb, 400).await;
    assert!((s[&a(2)] - 0.75).abs() < 0.05, "{s:?}");
    assert!(Arc::ptr_eq(&h.endpoints()[0].1, &first));

    // Priority and locality change.
    plane.set(&[two(3, "eu-1b", 1, Healthy)]);
    eventually("priority", || {
        h.endpoints()
            .iter()
            .any(|(k, s)| *k == a(2) && s.meta().priority() == 1)
    })
    .await;
    let (_, second) = h.endpoints().into_iter().find(|(k, _)| *k == a(2)).unwrap();
    assert_eq!(
        (
            second.meta().locality().zone(),
            second.meta().locality_weight()
        ),
        ("eu-1b", Some(2))
    );

    // DRAINING drains, then the endpoint is removed; UNHEALTHY is absent.
    plane.set(&[two(3, "eu-1a", 0, Draining)]);
    eventually("draining", || {
        members(&h) == [(a(1), 1.0, true), (a(2), 3.0, false)]
    })
    .await;
    assert!(
        Arc::ptr_eq(&h.endpoints()[0].1, &first),
        "a draining endpoint keeps its model"
    );
    let acked = || plane.requests().last().unwrap().version_info.clone();
    let before = acked();
    plane.set(&[two(3, "eu-1a", 0, Unhealthy)]);
    eventually("removed", || members(&h) == [(a(2), 3.0, false)]).await;
    // The ACK follows the update it acknowledges: wait for it.
    eventually("acked", || acked() != before).await;
    let good_version = acked();

    // An invalid resource (port 0) is NACKed; the last good set serves.
    let mut bad = two(3, "eu-1a", 0, Healthy);
    bad.endpoints[0].lb_endpoints[0] = endpoint(SocketAddr::from(([10, 0, 0, 9], 0)), 1, Healthy);
    plane.set(&[bad]);
    eventually("nack", || {
        plane.requests().iter().any(|r| r.error_detail.is_some())
    })
    .await;
    let nack = plane
        .requests()
        .into_iter()
        .find(|r| r.error_detail.is_some())
        .unwrap();
    let detail = nack.error_detail.unwrap();
    assert_eq!(detail.code, 3);
    assert!(detail.message.contains("port"), "{}", detail.message);
    assert_eq!(
        nack.version_info, good_version,
        "a NACK names the last good version"
    );
    assert!(!nack.response_nonce.is_empty());
    assert_eq!(members(&h), [(a(2), 3.0, false)]);
    assert_eq!(lb.clone().oneshot(()).await.unwrap(), a(2));
    let events = capture.events("xds");
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].error.contains("port"), "{events:?}");
    assert_eq!(stats.errors(), 1);

    // The server restarts (same address, fresh state): the client
    // reconnects with backoff and resubscribes with its last version.
    server.stop().await;
    assert_eq!(
        lb.clone().oneshot(()).await.unwrap(),
        a(2),
        "serving while disconnected"
    );
    let plane = ControlPlane::default();
    plane.set(&[assignment(
        "backend",
        vec![locality(
            "eu-1a",
            0,
            1,
            vec![endpoint(a(2), 3, Healthy), endpoint(a(3), 1, Healthy)],
        )],
    )]);
    let server = plane.serve(addr).await.unwrap();
    eventually("resubscribed", || {
        members(&h) == [(a(2), 3.0, false), (a(3), 1.0, false)]
    })
    .await;
    let sub = &plane.requests()[0];
    assert_eq!(
        (sub.version_info.as_str(), sub.response_nonce.as_str()),
        (good_version.as_str(), "")
    );
    assert_eq!(sub.node.as_ref().unwrap().id, "test-node");
    assert!(
        capture.events("xds").len() >= 2,
        "the lost stream is an error event"
    );
    assert!(
        capture.events("xds")[1].error.contains("restarting"),
        "{:?}",
        capture.events("xds")
    );
    server.stop().await;
}

#[test]
fn bad_configuration_is_a_config_error() {
    let field = |b: tower_lb::discover::xds::Builder| b.build().err().map(|e| e.field());
    assert_eq!(
        field(Xds::builder("not a uri").cluster("c")),
        Some("xds.server")
    );
    assert_eq!(
        field(Xds::builder("ftp://h:1").cluster("c")),
        Some("xds.server")
    );
    assert_eq!(field(Xds::builder("http://h:1")), Some("xds.clusters"));
    assert_eq!(
        field(Xds::builder("http://h:1").cluster("")),
        Some("xds.clusters")
    );
    assert_eq!(
        field(Xds::builder("http://h:1").cluster("c").node_id("")),
        Some("xds.node_id")
    );
    assert_eq!(
        field(
            Xds::builder("http://h:1")
                .cluster("c")
                .connect_timeout(Duration::ZERO)
        ),
        Some("xds.connect_timeout")
    );
    assert!(Xds::builder("http://h:1").cluster("c").build().is_ok());
}

#[tokio::test]
async fn the_example_runs_its_phases() {
    let phases = xds_example::run().await.unwrap();
    let share = |i: usize, last: u8| phases[i].1[&a(last)];
    assert!((share(0, 1) - 0.5).abs() < 0.05);
    assert!((share(1, 2) - 0.75).abs() < 0.05);
    assert_eq!(share(2, 1), 0.0, "a draining endpoint takes no new picks");
}
