//! The panic threshold (Envoy's healthy panic): the balancer panics when
//! the healthy share of its endpoints falls below the configured
//! percentage, and leaves panic as soon as it is back at or above it,
//! exactly, for every pool size and threshold, in both modes (property,
//! paused clock; the README's stack, `stack.rs`, with the threshold and
//! mode drawn).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use proptest::prelude::*;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::endpoint::EndpointState;
use tower_lb::health::{HealthChange, PanicMode};
use tower_lb::{Error, pick, retry};

use crate::stack;

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
/// the rest healthy, makes a call, and says whether the balancer was in
/// panic for it (`in_panic`, kept by its health events), checking that a
/// call in panic fails with `Error::Panic` exactly when the mode is
/// `FailFast`.
async fn in_panic<S>(
    svc: &mut S,
    states: &[Arc<EndpointState>],
    unhealthy: usize,
    in_panic: &AtomicBool,
    mode: PanicMode,
) -> bool
where
    S: Service<(), Response = (), Error = retry::Error<Error<Infallible>>>,
{
    for (i, s) in states.iter().enumerate() {
        let breaker = s.breaker().expect("every endpoint has a breaker");
        if i < unhealthy {
            breaker.force_open();
        } else {
            breaker.reset();
        }
    }
    let ready = svc.ready().await.expect("ready");
    let failed_fast = match ready.call(()).await.map_err(|e| e.into_inner()) {
        Ok(()) => false,
        Err(Some(Error::Panic)) => true,
        // All forced open: nothing admits, in panic (RouteAll) or not.
        Err(Some(Error::AllUnavailable(_))) => false,
        Err(e) => panic!("unexpected: {e:?}"),
    };
    let panic = in_panic.load(Ordering::SeqCst);
    assert_eq!(failed_fast, panic && mode == PanicMode::FailFast);
    panic
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

/// The README's stack (`stack.rs`) with `threshold` and `mode`.
async fn check(total: usize, threshold: f64, mode: PanicMode) -> Result<(), TestCaseError> {
    let panic = Arc::new(AtomicBool::new(false));
    let flag = panic.clone();
    let mut b = stack::balance()
        .picker(pick::RoundRobin::new())
        .panic_threshold(threshold)
        .panic_mode(mode)
        .on_health_change(move |e| match e.change {
            HealthChange::PanicEntered { .. } => flag.store(true, Ordering::SeqCst),
            HealthChange::PanicLeft { .. } => flag.store(false, Ordering::SeqCst),
            _ => {}
        });
    for i in 0..total {
        b = b.endpoint(i, replica());
    }
    let lb = b.build().expect("a valid balancer");
    let mut svc = stack::retry_clone().layer(lb.clone());
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
        let got = in_panic(&mut svc, &states, unhealthy, &panic, mode).await;
        let want = expect_panic(total - unhealthy, total, threshold);
        prop_assert_eq!(
            got,
            want,
            "{}/{} healthy, threshold {}, {:?}",
            total - unhealthy,
            total,
            threshold,
            mode
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
            for mode in [PanicMode::RouteAll, PanicMode::FailFast] {
                if let Err(e) = rt.block_on(check(total, threshold, mode)) {
                    panic!("{e}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Promise, for any pool size and any threshold in 0..=100.
    #[test]
    fn the_panic_threshold_is_exact_for_any_share(
        total in 1usize..40,
        threshold in 0.0f64..=100.0,
        fail_fast in any::<bool>(),
    ) {
        let mode = if fail_fast { PanicMode::FailFast } else { PanicMode::RouteAll };
        paused().block_on(check(total, threshold, mode))?;
    }
}
