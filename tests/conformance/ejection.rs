//! Outlier ejection never takes more of the pool than
//! `max_ejection_percent` allows (Envoy's rule, with at least one host
//! ejectable and never all: `outlier::max_ejections`), whatever the
//! failures (property over pool sizes, percentages and failure patterns;
//! paused clock; the README's stack, `stack.rs`, with outlier detection
//! added: every rule on, short times).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::outlier::{OutlierDetection, max_ejections};
use tower_lb::pick;

use crate::stack;

type Svc = BoxCloneSyncService<(), (), std::io::Error>;

/// How a replica answers in a phase.
const OK: u8 = 0;
const FAILING: u8 = 1;
const SLOW: u8 = 2;

fn replica(mode: Arc<AtomicU8>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| {
        let mode = mode.load(Ordering::Relaxed);
        async move {
            match mode {
                FAILING => Err(std::io::Error::other("down")),
                SLOW => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok(())
                }
                _ => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    Ok(())
                }
            }
        }
    }))
}

/// One phase of a failure pattern: each replica's mode, the calls made,
/// and the time that passes after them.
#[derive(Debug, Clone)]
struct Phase {
    modes: Vec<u8>,
    calls: usize,
    pause_ms: u64,
}

fn phases(n: usize) -> impl Strategy<Value = Vec<Phase>> {
    let phase = (
        prop::collection::vec(
            prop_oneof![4 => Just(OK), 3 => Just(FAILING), 1 => Just(SLOW)],
            n,
        ),
        10usize..150,
        0u64..4_000,
    )
        .prop_map(|(modes, calls, pause_ms)| Phase {
            modes,
            calls,
            pause_ms,
        });
    prop::collection::vec(phase, 1..8)
}

/// Runs the pattern; the most endpoints ejected at once.
async fn run(n: usize, percent: u32, pattern: Vec<Phase>) -> Result<usize, TestCaseError> {
    let modes: Vec<Arc<AtomicU8>> = (0..n).map(|_| Arc::new(AtomicU8::new(OK))).collect();
    // Every rule on, evaluated every second, short ejections: many
    // ejections and returns in a short run.
    let outlier = OutlierDetection::builder()
        .interval(Duration::from_secs(1))
        .base_ejection_time(Duration::from_secs(2))
        .max_ejection_percent(percent)
        .build()
        .expect("a valid config");
    let mut b = stack::balance()
        .picker(pick::RoundRobin::new())
        .outlier_detection(outlier)
        .seed(n as u64);
    for (i, m) in modes.iter().enumerate() {
        b = b.endpoint(i, replica(m.clone()));
    }
    let lb = b.build().expect("a valid balancer");
    let mut svc = stack::retry_clone().layer(lb.clone());
    let states: Vec<_> = lb
        .handle()
        .endpoints()
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    let bound = max_ejections(n, percent);
    let mut most = 0;
    for phase in pattern {
        for (m, &mode) in modes.iter().zip(&phase.modes) {
            m.store(mode, Ordering::Relaxed);
        }
        for _ in 0..phase.calls {
            if let Ok(ready) = svc.ready().await {
                let _ = ready.call(()).await;
            }
            let now = Instant::now();
            let ejected = states.iter().filter(|s| s.is_ejected(now)).count();
            most = most.max(ejected);
            prop_assert!(
                ejected <= bound,
                "{ejected} of {n} ejected at {percent}%: bound {bound}"
            );
        }
        tokio::time::sleep(Duration::from_millis(phase.pause_ms)).await;
    }
    Ok(most)
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Promise: at every moment, ejected endpoints ≤ `max_ejections(n, percent)`.
    #[test]
    fn ejection_never_exceeds_max_ejection_percent(
        (n, pattern) in (2usize..16).prop_flat_map(|n| (Just(n), phases(n))),
        percent in prop_oneof![Just(0u32), Just(10), Just(50), Just(100), 0u32..=100],
    ) {
        paused().block_on(run(n, percent, pattern))?;
    }
}

/// The bound is reached: with every replica failing, a pool of 10 at 30%
/// has exactly 3 ejected (so the property above is not passing vacuously).
#[tokio::test(start_paused = true)]
async fn the_bound_is_reached_when_everything_fails() {
    let pattern = vec![Phase {
        modes: vec![FAILING; 10],
        calls: 200,
        pause_ms: 0,
    }];
    let most = run(10, 30, pattern).await.expect("within the bound");
    assert_eq!(most, max_ejections(10, 30));
    assert_eq!(most, 3);
}
