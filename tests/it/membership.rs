//! Membership through the `Handle`: batched edits, upserts that keep an
//! endpoint's model, metadata, and draining.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt, service_fn};
use tower_lb::balance::Upsert;
use tower_lb::endpoint::{EndpointMeta, Locality};
use tower_lb::{Balance, pick};

type Svc = BoxCloneSyncService<(), &'static str, &'static str>;

fn fixed(name: &'static str, delay: Duration) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| async move {
        tokio::time::sleep(delay).await;
        Ok(name)
    }))
}

fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(f).poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

async fn tally<P: pick::Pick<()>>(
    lb: &Balance<&'static str, Svc, P>,
    n: usize,
) -> HashMap<&'static str, usize> {
    let mut counts = HashMap::new();
    for _ in 0..n {
        let name = lb.clone().oneshot(()).await.unwrap();
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

#[tokio::test(start_paused = true)]
async fn upsert_keeps_the_model_and_updates_weight_and_meta() {
    let lb = Balance::builder()
        .picker(pick::WeightedRoundRobin::new())
        .endpoint("a", fixed("a", Duration::from_millis(5)))
        .build()
        .unwrap();
    let h = lb.handle();
    tally(&lb, 10).await;
    let a_before = h.endpoints()[0].1.clone();
    assert_eq!(a_before.requests(), 10);

    let zone = EndpointMeta::new()
        .with_locality(Locality::in_zone("z1"))
        .with_priority(2)
        .with_label("version", "v2");
    let r = h.edit(|set| {
        let a = set.upsert("a", 3.0, zone.clone(), || fixed("unused", Duration::ZERO))?;
        // At a's priority: priorities are honoured (a lower one would take
        // no traffic while the higher one is healthy).
        let b_meta = EndpointMeta::new().with_priority(2);
        let b = set.upsert("b", 1.0, b_meta, || fixed("b", Duration::ZERO))?;
        Ok::<_, tower_lb::ConfigError>((a, b))
    });
    assert_eq!(r.unwrap(), (Upsert::Updated, Upsert::Inserted));

    let eps = h.endpoints();
    assert!(Arc::ptr_eq(&eps[0].1, &a_before), "the model survives");
    assert_eq!(eps[0].1.requests(), 10);
    assert_eq!(eps[0].1.weight(), 3.0);
    assert_eq!(*eps[0].1.meta(), zone);
    assert_eq!(eps[0].1.meta().locality().zone(), "z1");
    // The new weights apply: 3 to 1.
    let c = tally(&lb, 400).await;
    assert_eq!((c["a"], c["b"]), (300, 100), "{c:?}");
}

#[tokio::test(start_paused = true)]
async fn a_bad_weight_in_an_edit_is_a_config_error_and_changes_nothing_else() {
    let lb = Balance::builder()
        .endpoint("a", fixed("a", Duration::ZERO))
        .build()
        .unwrap();
    let h = lb.handle();
    for w in [f64::NAN, 0.0, -1.0, f64::INFINITY] {
        let e = h
            .edit(|set| set.upsert("b", w, EndpointMeta::new(), || fixed("b", Duration::ZERO)))
            .unwrap_err();
        assert_eq!(e.field(), "weight");
        assert!(h.set_weight(&"a", w).is_err());
    }
    assert_eq!(h.len(), 1);
    assert_eq!(h.endpoints()[0].1.weight(), 1.0);
}

#[tokio::test(start_paused = true)]
async fn a_draining_endpoint_finishes_its_calls_and_takes_no_new_picks() {
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .endpoint("a", fixed("a", Duration::from_millis(100)))
        .endpoint("b", fixed("b", Duration::from_millis(100)))
        .build()
        .unwrap();
    let h = lb.handle();
    let a = h.endpoints()[0].1.clone();
    let mut first = Box::pin(lb.clone().oneshot(()));
    assert!(poll_once(&mut first).is_none());
    assert_eq!(a.in_flight(), 1);

    assert!(h.set_draining(&"a", true));
    assert!(a.is_draining());
    assert_eq!(h.len(), 2, "a draining endpoint stays a member");
    let c = tally(&lb, 6).await;
    assert_eq!(c.get("a"), None, "{c:?}");
    assert_eq!(first.await.unwrap(), "a");
    assert_eq!(a.in_flight(), 0);

    // Draining ends: it takes picks again, with its model intact.
    assert!(h.set_draining(&"a", false));
    let c = tally(&lb, 6).await;
    assert_eq!((c["a"], c["b"]), (3, 3), "{c:?}");
    assert_eq!(a.requests(), 4);
}

#[tokio::test(start_paused = true)]
async fn when_every_endpoint_drains_picks_use_the_draining_ones() {
    let lb = Balance::builder()
        .endpoint("a", fixed("a", Duration::ZERO))
        .build()
        .unwrap();
    assert!(lb.handle().set_draining(&"a", true));
    assert_eq!(lb.clone().oneshot(()).await.unwrap(), "a");
    assert!(!lb.handle().set_draining(&"missing", true));
}

#[tokio::test(start_paused = true)]
async fn one_edit_applies_many_changes_at_once() {
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .endpoint("a", fixed("a", Duration::ZERO))
        .endpoint("b", fixed("b", Duration::ZERO))
        .build()
        .unwrap();
    let h = lb.handle();
    let keys = h.edit(|set| {
        assert!(set.remove(&"a"));
        assert!(!set.remove(&"a"));
        assert!(
            !set.insert("c", fixed("c", Duration::ZERO), 1.0, EndpointMeta::new())
                .unwrap()
        );
        assert!(set.set_meta(&"b", EndpointMeta::new().with_priority(1)));
        assert!(set.contains(&"b") && !set.contains(&"a"));
        set.keys().copied().collect::<Vec<_>>()
    });
    assert_eq!(keys, ["b", "c"]);
    // b is now at priority 1: c (priority 0, healthy) takes every pick.
    let c = tally(&lb, 4).await;
    assert_eq!((c.get("b"), c["c"]), (None, 4), "{c:?}");
    assert_eq!(h.endpoints()[0].1.meta().priority(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_clone_that_already_called_sees_every_later_change() {
    let mut lb = Balance::builder()
        .endpoint("a", fixed("a", Duration::ZERO))
        .build()
        .unwrap();
    let mut older = lb.clone();
    let h = lb.handle();
    assert_eq!(lb.ready().await.unwrap().call(()).await.unwrap(), "a");
    assert_eq!(older.ready().await.unwrap().call(()).await.unwrap(), "a");
    for (add, gone) in [("b", "a"), ("c", "b"), ("a", "c")] {
        h.insert(add, fixed(add, Duration::ZERO));
        h.remove(&gone);
        for svc in [&mut lb, &mut older] {
            for _ in 0..3 {
                let name = svc.ready().await.unwrap().call(()).await.unwrap();
                assert_eq!(name, add, "the same clone, after {gone} left");
            }
        }
        let fresh = lb.clone().oneshot(()).await.unwrap();
        assert_eq!(fresh, add, "a clone made now");
    }
}
