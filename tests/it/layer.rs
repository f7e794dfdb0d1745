//! `BalanceLayer`: the balancer composed with `tower::ServiceBuilder` over a
//! base service, the same `Balance` as the builder's.

use std::convert::Infallible;
use std::time::Duration;

use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};
use tower_lb::retry::{CloneRequest, RetryLayer};
use tower_lb::{Balance, pick};

/// A base client: answers with the address it was pointed at.
#[derive(Clone)]
struct Base {
    fail: &'static str,
}

type Svc = BoxCloneSyncService<u32, String, &'static str>;

fn point(addr: &&'static str, base: &Base) -> Svc {
    let (addr, fail) = (*addr, base.fail);
    BoxCloneSyncService::new(service_fn(move |req: u32| async move {
        if addr == fail {
            Err(addr)
        } else {
            Ok(format!("{addr}:{req}"))
        }
    }))
}

#[tokio::test(start_paused = true)]
async fn a_stack_of_layers_over_a_base_service() {
    let balance = Balance::layer_builder()
        .picker(pick::RoundRobin::new())
        .layer(["a", "b", "c"], point)
        .unwrap();
    let retry = RetryLayer::builder().replay(CloneRequest).build().unwrap();
    let svc = ServiceBuilder::new()
        .layer(retry)
        .layer(balance.clone())
        .service(Base { fail: "b" });
    // Round robin over a, b, c; b fails and the retry goes elsewhere.
    let mut seen = Vec::new();
    for i in 0..6 {
        seen.push(svc.clone().oneshot(i).await.unwrap());
    }
    assert!(seen.iter().all(|s| !s.starts_with("b:")), "{seen:?}");
    assert!(seen.iter().any(|s| s.starts_with("a:")));
    assert!(seen.iter().any(|s| s.starts_with("c:")));

    // Each `layer` call makes an independent balancer.
    let one = balance.layer(Base { fail: "" });
    let two = balance.layer(Base { fail: "" });
    assert_eq!(one.clone().oneshot(1).await.unwrap(), "a:1");
    assert_eq!(two.clone().oneshot(1).await.unwrap(), "a:1");
    assert_eq!(one.handle().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn layer_and_builder_make_the_same_balancer() {
    let base = Base { fail: "" };
    let mut from_layer = Balance::layer_builder()
        .picker(pick::WeightedRoundRobin::new())
        .weighted_layer(
            vec![
                ("a", 3.0, Default::default()),
                ("b", 1.0, Default::default()),
            ],
            point,
        )
        .unwrap()
        .layer(base.clone());
    let mut from_builder = Balance::builder()
        .picker(pick::WeightedRoundRobin::new())
        .weighted_endpoint("a", point(&"a", &base), 3.0)
        .weighted_endpoint("b", point(&"b", &base), 1.0)
        .build()
        .unwrap();
    for i in 0..40 {
        let x = from_layer.ready().await.unwrap().call(i).await.unwrap();
        let y = from_builder.ready().await.unwrap().call(i).await.unwrap();
        assert_eq!(x, y);
    }
}

#[test]
fn a_bad_layer_configuration_is_refused_when_the_layer_is_made() {
    let dup = Balance::layer_builder().layer(["a", "a"], point);
    assert_eq!(dup.unwrap_err().field(), "endpoint");
    let bad = Balance::layer_builder()
        .decay(Duration::ZERO)
        .layer(["a"], point);
    assert_eq!(bad.unwrap_err().field(), "decay");
    let bad =
        Balance::layer_builder().weighted_layer(vec![("a", f64::NAN, Default::default())], point);
    assert_eq!(bad.unwrap_err().field(), "weight");
    let bad = Balance::layer_builder()
        .picker(pick::PeakEwma::new().choices(0))
        .layer(["a"], |_: &&str, _: &()| {
            service_fn(|_: ()| async { Ok::<_, Infallible>(()) })
        });
    assert_eq!(bad.unwrap_err().field(), "choices");
}
