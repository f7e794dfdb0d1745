//! The panic threshold (Envoy's healthy panic): the balancer panics when
//! the healthy share of its endpoints falls below the configured
//! percentage, and leaves panic as soon as it is back at or above it,
//! exactly, for every pool size and threshold (property, paused clock).

use std::convert::Infallible;
use std::sync::Arc;

use proptest::prelude::*;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt, service_fn};
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::endpoint::EndpointState;
use tower_lb::health::PanicMode;
use tower_lb::{Balance, Error, pick};

type Svc = BoxCloneSyncService<(), (), Infallible>;

fn replica() -> Svc {
    BoxCloneSyncService::new(service_fn(|()| async { Ok(()) }))
}

/// Envoy's rule, written out: panic when some endpoint is unhealthy and
/// the healthy share is under the threshold.
fn expect_panic(healthy: usize, total: usize, threshold: f64) -> bool {
    healthy < total && (healthy as f64) < threshold / 100.0 * total as f64
}

/// Marks endpoints `0..unhealthy` unhealthy (their breakers forced open),
/// the rest healthy, and says whether a call fails with `Error::Panic`.
async fn in_panic<S>(
    lb: &mut Balance<usize, Svc, S>,
    states: &[Arc<EndpointState>],
    unhealthy: usize,
) -> bool
where
    S: pick::Picker + pick::Pick<()>,
{
    for (i, s) in states.iter().enumerate() {
        let breaker = s.breaker().expect("every endpoint has a breaker");
        if i < unhealthy {
            breaker.force_open();
        } else {
            breaker.reset();
        }
    }
    let ready = lb.ready().await.expect("ready");
    match ready.call(()).await {
        Ok(()) => false,
        Err(Error::Panic) => true,
        // All forced open and no panic (threshold 0): nothing admits.
        Err(Error::AllUnavailable(_)) => false,
        Err(e) => panic!("unexpected: {e}"),
    }
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

async fn check(total: usize, threshold: f64) -> Result<(), TestCaseError> {
    let mut b = Balance::builder()
        .picker(pick::RoundRobin::new())
        .circuit_breaker(CircuitBreakerConfig::default())
        .panic_threshold(threshold)
        .panic_mode(PanicMode::FailFast);
    for i in 0..total {
        b = b.endpoint(i, replica());
    }
    let mut lb = b.build().expect("a valid balancer");
    let states: Vec<_> = lb
        .handle()
        .endpoints()
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    // Engages on the way down, releases on the way up, at the same step.
    let down = 0..=total;
    let up = (0..=total).rev();
    for unhealthy in down.chain(up) {
        let got = in_panic(&mut lb, &states, unhealthy).await;
        let want = expect_panic(total - unhealthy, total, threshold);
        prop_assert_eq!(
            got,
            want,
            "{}/{} healthy, threshold {}",
            total - unhealthy,
            total,
            threshold
        );
    }
    Ok(())
}

/// Promise: the thresholds users set most, over pools of 1 to 10, at every
/// healthy count going down and coming back up.
#[test]
fn the_panic_threshold_engages_and_releases_at_exactly_the_healthy_share() {
    let rt = paused();
    for total in 1..=10 {
        for threshold in [0.0, 10.0, 33.0, 50.0, 70.0, 100.0] {
            if let Err(e) = rt.block_on(check(total, threshold)) {
                panic!("{e}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Promise, for any pool size and any threshold in 0..=100.
    #[test]
    fn the_panic_threshold_is_exact_for_any_share(total in 1usize..40, threshold in 0.0f64..=100.0) {
        paused().block_on(check(total, threshold))?;
    }
}
