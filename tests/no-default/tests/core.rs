//! The default build (no features): the balancer, every picker, health,
//! retry and the standalone breaker work.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tower::{Layer, ServiceExt, service_fn};
use tower_lb::Balance;
use tower_lb::breaker::{CircuitBreakerConfig, CircuitBreakerLayer};
use tower_lb::outlier::OutlierDetection;
use tower_lb::pick::{AnyPicker, NAMES, key_fn};
use tower_lb::retry::{CloneRequest, RetryLayer};

#[tokio::test(start_paused = true)]
async fn every_picker_balances_without_features() {
    for &name in NAMES {
        let picker = AnyPicker::by_name(name, key_fn(|r: &u32| Some(u64::from(*r)))).unwrap();
        let mut b = Balance::builder().picker(picker);
        for i in 0..4u32 {
            b = b.endpoint(
                i,
                service_fn(move |r: u32| async move { Ok::<_, std::io::Error>(r + i) }),
            );
        }
        let lb = b.build().unwrap();
        for r in 0..20u32 {
            let got = lb.clone().oneshot(r).await.unwrap();
            assert!((r..r + 4).contains(&got), "{name}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn retries_breakers_and_ejection_work_without_features() {
    let calls = Arc::new(AtomicUsize::new(0));
    let flaky = {
        let calls = calls.clone();
        service_fn(move |r: u32| {
            let n = calls.fetch_add(1, Ordering::Relaxed);
            async move {
                if n % 2 == 0 {
                    Err(std::io::Error::other("flaky"))
                } else {
                    Ok(r)
                }
            }
        })
    };
    let lb = Balance::builder()
        .circuit_breaker(CircuitBreakerConfig::default())
        .outlier_detection(OutlierDetection::default())
        .timeout(Duration::from_secs(1))
        .endpoint("a", flaky.clone())
        .endpoint("b", flaky)
        .build()
        .unwrap();
    let retry = RetryLayer::builder().replay(CloneRequest).build().unwrap();
    let svc = retry.layer(lb);
    for r in 0..10 {
        assert_eq!(svc.clone().oneshot(r).await.unwrap(), r);
    }
    let breaker = CircuitBreakerLayer::new(CircuitBreakerConfig::default());
    let svc = breaker.layer(service_fn(
        |r: u32| async move { Ok::<_, std::io::Error>(r) },
    ));
    assert_eq!(svc.oneshot(3).await.unwrap(), 3);
}
