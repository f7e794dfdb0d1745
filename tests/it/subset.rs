//! Deterministic subsetting through real balancers: a fleet's picks stay in
//! each balancer's subset, every endpoint serves the same number of
//! balancers, and an endpoint's model survives leaving and re-entering a
//! subset. Paused clock.

use std::convert::Infallible;
use std::sync::Arc;

use tower::util::BoxCloneSyncService;
use tower::{ServiceExt, service_fn};
use tower_lb::endpoint::EndpointState;
use tower_lb::route::{Routing, Subset};
use tower_lb::{Balance, ConfigError, pick};

type Svc = BoxCloneSyncService<(), (), Infallible>;
type Lb = Balance<String, Svc, pick::RoundRobin>;

fn svc() -> Svc {
    BoxCloneSyncService::new(service_fn(|()| async { Ok(()) }))
}

fn member(fleet: usize, index: usize, k: usize, keys: &[String]) -> Lb {
    // Round robin: every subset member takes picks, whatever its latency.
    let mut b = Balance::builder()
        .picker(pick::RoundRobin::new())
        .seed(index as u64)
        .routing(Routing::new().subset(Subset::new(index, fleet, k)));
    for key in keys {
        b = b.endpoint(key.clone(), svc());
    }
    b.build().expect("valid config")
}

async fn calls(lb: &Lb, n: usize) {
    for _ in 0..n {
        lb.clone().oneshot(()).await.expect("an endpoint");
    }
}

fn state(lb: &Lb, key: &str) -> Arc<EndpointState> {
    lb.handle()
        .endpoints()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, s)| s)
        .expect("a member")
}

#[tokio::test(start_paused = true)]
async fn a_fleet_spreads_its_connections_exactly() {
    let keys: Vec<String> = (0..12).map(|i| format!("10.0.0.{i}:8080")).collect();
    let mut used = vec![0usize; keys.len()];
    for i in 0..30 {
        let lb = member(30, i, 4, &keys);
        calls(&lb, 200).await;
        let mine: Vec<usize> = lb
            .handle()
            .endpoints()
            .iter()
            .enumerate()
            .filter(|(_, (_, s))| s.picks() > 0)
            .map(|(e, _)| e)
            .collect();
        assert_eq!(mine.len(), 4, "balancer {i} uses its 4 endpoints only");
        for e in mine {
            used[e] += 1;
        }
        assert_eq!(lb.handle().len(), 12, "every endpoint stays a member");
    }
    // 30 · 4 / 12 = 10 balancers per endpoint, exactly.
    assert_eq!(used, [10; 12]);
}

#[tokio::test(start_paused = true)]
async fn a_model_survives_leaving_and_reentering_the_subset() {
    let keys: Vec<String> = (0..6).map(|i| format!("e{i}")).collect();
    let lb = member(3, 0, 2, &keys);
    calls(&lb, 50).await;
    let (x, served) = lb
        .handle()
        .endpoints()
        .into_iter()
        .find(|(_, s)| s.picks() > 0)
        .map(|(k, s)| (k, s.requests()))
        .expect("a subset member");
    let model = state(&lb, &x);
    // New endpoints shift the windows until x is out of this subset.
    let h = lb.handle();
    let mut added = Vec::new();
    for n in 0..40 {
        let key = format!("new{n}");
        h.insert(key.clone(), svc());
        added.push(key);
        let before = model.picks();
        calls(&lb, 40).await;
        if model.picks() == before {
            break;
        }
    }
    let out = model.picks();
    calls(&lb, 40).await;
    assert_eq!(
        model.picks(),
        out,
        "{x} left the subset after {} inserts",
        added.len()
    );
    for key in &added {
        assert!(h.remove(key));
    }
    calls(&lb, 50).await;
    let back = state(&lb, &x);
    assert!(Arc::ptr_eq(&back, &model), "the same model, not a new one");
    assert!(back.requests() > served, "it serves again, counting on");
}

#[tokio::test(start_paused = true)]
async fn active_checks_probe_the_subset_only() {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    use tower_lb::check::{self, HealthCheck};

    let keys: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
    let lb = member(5, 2, 3, &keys);
    calls(&lb, 30).await;
    let used: BTreeSet<String> = lb
        .handle()
        .endpoints()
        .into_iter()
        .filter(|(_, s)| s.picks() > 0)
        .map(|(k, _)| k)
        .collect();
    assert_eq!(used.len(), 3);
    let probed = Arc::new(Mutex::new(BTreeSet::new()));
    let p = probed.clone();
    let config = HealthCheck::builder().build().unwrap();
    let checks = check::spawn(&lb, config, move |key: &String, _: Svc| {
        p.lock().unwrap().insert(key.clone());
        async { Ok::<(), Infallible>(()) }
    })
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    assert_eq!(*probed.lock().unwrap(), used, "only the subset is probed");
    drop(checks);
}

#[test]
fn bad_subsets_are_config_errors() {
    let build = |s: Subset| {
        Balance::<String, Svc>::builder()
            .routing(Routing::new().subset(s))
            .build()
            .map(|_| ())
    };
    let field = |r: Result<(), ConfigError>| r.unwrap_err().field();
    assert_eq!(field(build(Subset::new(0, 4, 0))), "routing.subset.size");
    assert_eq!(field(build(Subset::new(4, 4, 2))), "routing.subset.index");
    assert_eq!(
        field(build(Subset::new(0, 0, 2))),
        "routing.subset.fleet_size"
    );
}
