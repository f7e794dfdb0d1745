//! Keys become endpoints: added, changed, drained and removed as keys
//! change; bad values skipped and counted; the configuration checked.

use std::sync::Arc;
use std::time::Duration;

use tower::ServiceExt;
use tower_lb::discover::{Source, TargetState};
use tower_lb::endpoint::Locality;
use tower_lb::retry::Backoff;
use tower_lb_etcd::{Endpoint, Etcd, RegisterError, register};

use crate::events::Capture;
use crate::support::{addr, balancer, etcd, figure, members, source, until};

const TARGET: &str = "services/cart";

fn key(i: usize) -> String {
    format!("{TARGET}/{}", addr(i))
}

#[tokio::test(flavor = "current_thread")]
async fn endpoints_follow_the_keys_under_the_prefix() {
    let Some(etcd) = etcd().await else { return };
    let (capture, _guard) = Capture::install();
    let mut kv = etcd.client().await.unwrap();
    // Written before the source starts: the list finds it.
    kv.put(key(1), Endpoint::new(addr(1)).to_json(), None)
        .await
        .unwrap();
    // gRPC-go's own writer: `Metadata` null.
    let go = format!(r#"{{"Addr":"{}","Metadata":null}}"#, addr(2));
    kv.put(key(2), go, None).await.unwrap();
    // Outside the prefix: never read.
    kv.put("services/cart2/x", Endpoint::new(addr(9)).to_json(), None)
        .await
        .unwrap();
    kv.put("services/cartx", Endpoint::new(addr(9)).to_json(), None)
        .await
        .unwrap();

    let (lb, make) = balancer();
    let h = lb.handle();
    let etcd_source = source(etcd.client().await.unwrap(), TARGET)
        .build()
        .unwrap();
    let stats = etcd_source.stats();
    let _driver = etcd_source.spawn(lb.handle(), make);
    until("the list", || members(&h) == [addr(1), addr(2)]).await;
    assert_eq!(stats.updates(), 1, "the list is one update");

    // A new key reaches the pool.
    let at = std::time::Instant::now();
    let third = Endpoint::new(addr(3))
        .weight(2.0)
        .region("eu")
        .zone("eu-1a")
        .priority(1)
        .label("version", "v2");
    kv.put(key(3), third.to_json(), None).await.unwrap();
    until("a key added", || members(&h).len() == 3).await;
    figure("key put -> in the pool", at.elapsed());
    let state = h
        .endpoints()
        .into_iter()
        .find(|(k, _)| *k == addr(3))
        .unwrap()
        .1;
    assert_eq!(state.weight(), 2.0);
    assert_eq!(*state.meta().locality(), Locality::new("eu", "eu-1a", ""));
    assert_eq!(state.meta().priority(), 1);
    assert_eq!(state.meta().labels()["version"], "v2");

    // A changed value changes the endpoint in place: same model.
    kv.put(
        key(3),
        third.clone().weight(3.0).draining(true).to_json(),
        None,
    )
    .await
    .unwrap();
    until("weight and draining", || {
        state.weight() == 3.0 && state.is_draining()
    })
    .await;
    let now = h
        .endpoints()
        .into_iter()
        .find(|(k, _)| *k == addr(3))
        .unwrap()
        .1;
    assert!(Arc::ptr_eq(&now, &state), "the endpoint keeps its model");
    for _ in 0..10 {
        assert_ne!(lb.clone().oneshot(()).await.unwrap(), addr(3), "draining");
    }

    // A deleted key leaves the pool.
    let at = std::time::Instant::now();
    kv.delete(key(1), None).await.unwrap();
    until("a key deleted", || members(&h) == [addr(2), addr(3)]).await;
    figure("key deleted -> out of the pool", at.elapsed());
    assert_eq!(stats.errors(), 0);
    assert_eq!(capture.events("etcd"), []);
    assert_eq!((stats.endpoints(), stats.draining()), (2, 1));
}

#[tokio::test(flavor = "current_thread")]
async fn bad_values_are_skipped_and_counted() {
    let Some(etcd) = etcd().await else { return };
    let (capture, _guard) = Capture::install();
    let mut kv = etcd.client().await.unwrap();
    kv.put(key(1), Endpoint::new(addr(1)).to_json(), None)
        .await
        .unwrap();
    kv.put(format!("{TARGET}/listed-bad"), "{", None)
        .await
        .unwrap();

    let (lb, make) = balancer();
    let h = lb.handle();
    let etcd_source = source(etcd.client().await.unwrap(), TARGET)
        .build()
        .unwrap();
    let stats = etcd_source.stats();
    let _driver = etcd_source.spawn(lb.handle(), make);
    until("the list", || members(&h) == [addr(1)]).await;
    assert_eq!(stats.errors(), 1, "the listed bad value");

    // Bad values arriving through the watch.
    for (k, v) in [
        ("not-json", "hello".to_owned()),
        ("host-name", r#"{"Addr":"cart.internal:8080"}"#.to_owned()),
        ("no-addr", r#"{"Metadata":{"weight":2}}"#.to_owned()),
        (
            "weight",
            format!(r#"{{"Addr":"{}","Metadata":{{"weight":-1}}}}"#, addr(5)),
        ),
        (
            "binary",
            String::from_utf8_lossy(&[0xff, 0xfe, 0]).into_owned(),
        ),
    ] {
        kv.put(format!("{TARGET}/{k}"), v, None).await.unwrap();
    }
    until("five more errors", || stats.errors() == 6).await;
    assert_eq!(members(&h), [addr(1)], "nothing bad joined");
    assert_eq!(lb.clone().oneshot(()).await.unwrap(), addr(1));

    // A good key turned bad loses its endpoint, as a re-list would; fixed,
    // it is back.
    kv.put(key(1), r#"{"Addr":"10.0.0.1"}"#, None)
        .await
        .unwrap();
    until("the bad value removed it", || members(&h).is_empty()).await;
    kv.put(key(1), Endpoint::new(addr(1)).to_json(), None)
        .await
        .unwrap();
    until("fixed", || members(&h) == [addr(1)]).await;

    let events = capture.events("etcd");
    assert_eq!(events.len(), 7, "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| e.error.contains("skipped the value of")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| e.error.contains("cart.internal")),
        "{events:?}"
    );
    assert!(stats.last_error().unwrap().contains(&key(1)));
}

#[tokio::test(flavor = "current_thread")]
async fn bad_configuration_is_a_config_error() {
    // The client connects lazily: nothing listens here.
    let client = etcd_client::Client::connect(["http://127.0.0.1:1"], None)
        .await
        .unwrap();
    let field = |b: tower_lb_etcd::Builder| b.build().err().map(|e| e.field());
    assert_eq!(
        field(Etcd::builder(client.clone(), "")),
        Some("etcd.target")
    );
    assert_eq!(
        field(Etcd::builder(client.clone(), "a/")),
        Some("etcd.target")
    );
    for timeout in [Duration::ZERO, Duration::MAX] {
        let b = Etcd::builder(client.clone(), "a").request_timeout(timeout);
        assert_eq!(field(b), Some("etcd.request_timeout"));
    }
    let inverted = Backoff::new(Duration::from_secs(2), Duration::from_secs(1));
    let b = Etcd::builder(client.clone(), "a").reconnect_backoff(inverted);
    assert_eq!(field(b), Some("etcd.reconnect_backoff"));
    assert!(Etcd::builder(client.clone(), "a").build().is_ok());

    let me = || Endpoint::new(addr(1));
    for (target, ttl, want) in [
        ("", Duration::from_secs(5), "etcd.target"),
        ("a", Duration::ZERO, "etcd.ttl"),
        ("a", Duration::from_millis(999), "etcd.ttl"),
        ("a", Duration::MAX, "etcd.ttl"),
    ] {
        match register(&client, target, me(), ttl).await {
            Err(RegisterError::Config(e)) => assert_eq!(e.field(), want),
            other => panic!("{target:?} {ttl:?}: {other:?}"),
        }
    }
    // Valid, but nothing answers: an etcd error, not a hang or a panic.
    let refused = register(&client, "a", me(), Duration::from_secs(5)).await;
    assert!(
        matches!(refused, Err(RegisterError::Etcd(_))),
        "{refused:?}"
    );
    assert_eq!(me().target().state, TargetState::Serving);
}
