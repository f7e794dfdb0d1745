//! The control plane failing: a watch resumed after a lost connection, a
//! compacted revision re-listed, an etcd rebuilt from nothing re-listed,
//! etcd killed and restarted under load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::ServiceExt;
use tower_lb::discover::{self, Source};
use tower_lb_etcd::{Endpoint, register};

use crate::backend::Backend;
use crate::events::Capture;
use crate::support::{Gate, addr, balancer, etcd, figure, members, source, until};

const TARGET: &str = "services/search";

fn key(i: usize) -> String {
    format!("{TARGET}/{}", addr(i))
}

#[tokio::test(flavor = "current_thread")]
async fn a_lost_watch_resumes_and_a_compacted_one_relists_with_nothing_lost() {
    let Some(etcd) = etcd().await else { return };
    let (capture, _guard) = Capture::install();
    let mut kv = etcd.client().await.unwrap();
    for i in 1..=3 {
        kv.put(key(i), Endpoint::new(addr(i)).to_json(), None)
            .await
            .unwrap();
    }
    // The source reaches etcd through a gate the test can close.
    let gate = Gate::start(&etcd.endpoint()).await;
    let through_gate = etcd_client::Client::connect([gate.endpoint()], None)
        .await
        .unwrap();
    let (lb, make) = balancer();
    let h = lb.handle();
    let etcd_source = source(through_gate, TARGET).build().unwrap();
    let stats = etcd_source.stats();
    let _driver = etcd_source.spawn(lb.handle(), make);
    until("the list", || members(&h) == [addr(1), addr(2), addr(3)]).await;
    let kept = h
        .endpoints()
        .into_iter()
        .find(|(k, _)| *k == addr(3))
        .unwrap()
        .1;

    // Cut off: the last good set stays while keys change; back, the watch
    // resumes and etcd replays what it missed.
    gate.cut();
    until("the lost watch counted", || stats.errors() >= 1).await;
    kv.delete(key(1), None).await.unwrap();
    kv.put(key(4), Endpoint::new(addr(4)).to_json(), None)
        .await
        .unwrap();
    assert_eq!(
        members(&h),
        [addr(1), addr(2), addr(3)],
        "the last good set"
    );
    gate.reopen();
    until("resumed", || members(&h) == [addr(2), addr(3), addr(4)]).await;
    assert!(
        capture
            .events("etcd")
            .iter()
            .all(|e| !e.error.contains("compacted")),
        "resumed without a re-list"
    );

    // Cut off again, and the history it would resume from compacted away.
    gate.cut();
    let errors = stats.errors();
    until("the lost watch counted", || stats.errors() > errors).await;
    kv.delete(key(2), None).await.unwrap();
    kv.put(key(5), Endpoint::new(addr(5)).to_json(), None)
        .await
        .unwrap();
    let now = kv.put(key(5), Endpoint::new(addr(5)).weight(2.0).to_json(), None);
    let revision = now.await.unwrap().header().unwrap().revision();
    kv.compact(revision, None).await.unwrap();
    let at = Instant::now();
    gate.reopen();
    until("re-listed", || members(&h) == [addr(3), addr(4), addr(5)]).await;
    figure(
        "connection back -> re-listed after compaction",
        at.elapsed(),
    );
    let events = capture.events("etcd");
    assert!(
        events.iter().any(|e| e.error.contains("compacted")),
        "{events:?}"
    );

    // Nothing lost: the endpoint that stayed kept its model, the new
    // value's weight applied, and the source still watches.
    let three = h
        .endpoints()
        .into_iter()
        .find(|(k, _)| *k == addr(3))
        .unwrap()
        .1;
    assert!(Arc::ptr_eq(&three, &kept), "kept across the re-list");
    let five = h
        .endpoints()
        .into_iter()
        .find(|(k, _)| *k == addr(5))
        .unwrap()
        .1;
    assert_eq!(five.weight(), 2.0);
    kv.put(key(6), Endpoint::new(addr(6)).to_json(), None)
        .await
        .unwrap();
    until("watching again", || members(&h).len() == 4).await;
    assert_eq!(stats.endpoints(), 4);
}

#[tokio::test(flavor = "current_thread")]
async fn an_etcd_rebuilt_from_nothing_is_listed_again() {
    let Some(mut etcd) = etcd().await else { return };
    let (capture, _guard) = Capture::install();
    let mut kv = etcd.client().await.unwrap();
    for i in 1..=4 {
        kv.put(key(i), Endpoint::new(addr(i)).to_json(), None)
            .await
            .unwrap();
    }
    let (lb, make) = balancer();
    let h = lb.handle();
    let _driver = source(etcd.client().await.unwrap(), TARGET)
        .build()
        .unwrap()
        .spawn(lb.handle(), make);
    until("the list", || h.len() == 4).await;

    // The data is gone: the new store's revision is behind the watch's.
    etcd.reset().await.unwrap();
    kv.put(key(7), Endpoint::new(addr(7)).to_json(), None)
        .await
        .unwrap();
    until("re-listed", || members(&h) == [addr(7)]).await;
    let events = capture.events("etcd");
    assert!(
        events
            .iter()
            .any(|e| e.error.contains("before 5 already read")),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_restarted_under_load_fails_no_request_and_the_pool_catches_up() {
    let Some(mut etcd) = etcd().await else { return };
    let backends = [
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
        Backend::start("d").await,
    ];
    let ttl = Duration::from_secs(5);
    let mut replicas = Vec::new();
    for b in &backends[..3] {
        let client = etcd.client().await.unwrap();
        replicas.push(
            register(&client, TARGET, Endpoint::new(b.addr), ttl)
                .await
                .unwrap(),
        );
    }
    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let lb = tower_lb::http::balance(http.clone(), Vec::<&str>::new())
        .unwrap()
        .build()
        .unwrap();
    let h = lb.handle();
    let etcd_source = source(etcd.client().await.unwrap(), TARGET)
        .build()
        .unwrap();
    let stats = etcd_source.stats();
    let make = discover::http_endpoints(http, "http").unwrap();
    let _driver = etcd_source.spawn(lb.handle(), make);
    until("three replicas", || h.len() == 3).await;

    // Load: four callers in a loop; every failure is counted.
    let (ok, failed, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let mut callers = Vec::new();
    for _ in 0..4 {
        let (lb, ok, failed, stop) = (lb.clone(), ok.clone(), failed.clone(), stop.clone());
        callers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let req = http::Request::get("http://search/")
                    .body(Empty::new())
                    .unwrap();
                match lb.clone().oneshot(req).await {
                    Ok(res) if res.status().is_success() => ok.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    let served = |n: u64| {
        let ok = ok.clone();
        let from = ok.load(Ordering::Relaxed);
        move || ok.load(Ordering::Relaxed) >= from + n
    };
    until("load before", served(200)).await;

    // etcd dies: the source notices, the pool stays, requests go on.
    etcd.kill();
    until("the lost watch counted", || stats.errors() >= 1).await;
    until("load while etcd is away", served(500)).await;
    assert_eq!(h.len(), 3, "no endpoint dropped for the outage");

    // etcd is back on the same data and port; the pool follows new
    // changes: one replica leaves, one joins.
    etcd.restart().await.unwrap();
    let at = Instant::now();
    let client = etcd.client().await.unwrap();
    let joined = register(&client, TARGET, Endpoint::new(backends[3].addr), ttl)
        .await
        .unwrap();
    replicas.remove(0).revoke().await.unwrap();
    let origins = || {
        let mut now: Vec<String> = h.endpoints().iter().map(|(o, _)| o.to_string()).collect();
        now.sort();
        now
    };
    let mut expected: Vec<String> = backends[1..].iter().map(|b| b.origin()).collect();
    expected.sort();
    until("caught up", || origins() == expected).await;
    figure("etcd restarted -> the pool caught up", at.elapsed());
    until("load after", served(200)).await;

    // The registrations survived: etcd restored their leases, and no
    // replica had to register again.
    for replica in &replicas {
        let lease = client
            .clone()
            .lease_time_to_live(replica.lease(), None)
            .await;
        assert!(lease.unwrap().ttl() > 0, "{replica:?}");
        assert_eq!(replica.rejoins(), 0, "{replica:?}");
    }
    stop.store(true, Ordering::Relaxed);
    for c in callers {
        c.await.unwrap();
    }
    println!(
        "figure: requests during the restart test: {} ok, {} failed",
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "no request failed for etcd"
    );
    drop((joined, replicas));
}
