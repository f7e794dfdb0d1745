//! Adaptive per-endpoint concurrency limits on the paused clock: the limit
//! rises while latency stays at the floor, falls as queueing appears, an
//! endpoint at its limit is skipped, and all at their limits is
//! `Overloaded` at once.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Service, ServiceExt, service_fn};
use tower_lb::endpoint::{AdaptiveConcurrency, EndpointState};
use tower_lb::{Balance, Error};

type Svc = tower::util::BoxCloneSyncService<(), usize, Infallible>;

/// An endpoint whose latency at time `t` (since `start`) is `latency(t)`.
fn scripted(i: usize, start: Instant, latency: fn(Duration) -> Duration) -> Svc {
    tower::util::BoxCloneSyncService::new(service_fn(move |()| async move {
        tokio::time::sleep(latency(start.elapsed())).await;
        Ok(i)
    }))
}

/// 10 ms for 5 s, 40 ms (queueing: 4× the floor) for 5 s, 10 ms again.
fn series(t: Duration) -> Duration {
    match t.as_secs() {
        0..5 => Duration::from_millis(10),
        5..10 => Duration::from_millis(40),
        _ => Duration::from_millis(10),
    }
}

fn limits() -> AdaptiveConcurrency {
    AdaptiveConcurrency::new()
        .initial_limit(4)
        .min_limit(1)
        .max_limit(60)
}

/// `callers` closed-loop callers for `until`; an `Overloaded` refusal waits
/// 1 ms. Returns the refusals.
async fn drive(lb: &Balance<usize, Svc>, callers: usize, until: Instant) -> u64 {
    let refused = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let mut lb = lb.clone();
            let refused = refused.clone();
            tokio::spawn(async move {
                while Instant::now() < until {
                    match lb.ready().await.unwrap().call(()).await {
                        Ok(_) => {}
                        Err(Error::Overloaded) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    refused.load(Ordering::Relaxed)
}

fn state(lb: &Balance<usize, Svc>) -> Arc<EndpointState> {
    lb.handle().endpoints().remove(0).1
}

#[tokio::test(start_paused = true)]
async fn the_limit_rises_at_the_floor_and_falls_with_queueing() {
    let start = Instant::now();
    let lb = Balance::builder()
        .adaptive_concurrency(limits())
        .endpoint(0usize, scripted(0, start, series))
        .build()
        .unwrap();
    let s = state(&lb);
    assert_eq!(s.concurrency_limit(), Some(4.0));
    let mut seen = Vec::new();
    // 100 callers: more than the limit ever allows, so it always binds.
    let mut refused = Vec::new();
    for second in 1..=15u64 {
        refused.push(drive(&lb, 100, start + Duration::from_secs(second)).await);
        seen.push(s.concurrency_limit().unwrap());
    }
    // Rising at the floor, from 4 to the maximum of 60.
    assert!(seen[4] >= 59.0, "{seen:?}");
    assert!(seen[..5].windows(2).all(|w| w[1] >= w[0]), "{seen:?}");
    // Falling at 4× the floor, to a few.
    assert!(seen[9] < 4.0, "{seen:?}");
    assert!(seen[5..10].windows(2).all(|w| w[1] <= w[0]), "{seen:?}");
    // Rising again once latency is back at the floor.
    assert!(seen[14] >= 59.0, "{seen:?}");
    // The callers above the limit were refused at once, every second.
    assert!(refused.iter().all(|&r| r > 0), "{refused:?}");
    // The floor the limit is measured against stayed at 10 ms.
    assert_eq!(s.floor_latency(), Some(Duration::from_millis(10)));
}

#[tokio::test(start_paused = true)]
async fn at_its_limit_an_endpoint_is_skipped_and_all_at_limits_is_overloaded_at_once() {
    let start = Instant::now();
    let slow = |_| Duration::from_secs(1);
    let lb = Balance::builder()
        .adaptive_concurrency(limits().initial_limit(2))
        .endpoint(0usize, scripted(0, start, slow))
        .endpoint(1usize, scripted(1, start, slow))
        .build()
        .unwrap();
    // Four calls fill both endpoints' limits of 2.
    let mut held = Vec::new();
    let mut on = [0usize; 2];
    for _ in 0..4 {
        let mut lb = lb.clone();
        let f = lb.ready().await.unwrap().call(());
        held.push(tokio::spawn(f));
        tokio::task::yield_now().await;
    }
    for (i, s) in lb.handle().endpoints() {
        on[i] = s.in_flight();
    }
    assert_eq!(on, [2, 2]);
    // The fifth is refused without waiting.
    let before = Instant::now();
    let r = lb.clone().oneshot(()).await;
    assert!(matches!(r, Err(Error::Overloaded)), "{r:?}");
    assert_eq!(Instant::now(), before);
    for h in held {
        assert!(h.await.unwrap().is_ok());
    }
}

#[tokio::test(start_paused = true)]
async fn without_adaptive_limits_there_is_no_limit() {
    let start = Instant::now();
    let lb = Balance::builder()
        .endpoint(0usize, scripted(0, start, series))
        .build()
        .unwrap();
    let refused = drive(&lb, 40, start + Duration::from_secs(2)).await;
    assert_eq!(refused, 0);
    assert_eq!(state(&lb).concurrency_limit(), None);
}

#[tokio::test(start_paused = true)]
async fn a_fixed_cap_below_the_adaptive_limit_wins() {
    let start = Instant::now();
    let lb = Balance::builder()
        .adaptive_concurrency(limits().initial_limit(50))
        .max_in_flight(3)
        .endpoint(0usize, scripted(0, start, |_| Duration::from_secs(1)))
        .build()
        .unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut lb = lb.clone();
        let f = lb.ready().await.unwrap().call(());
        held.push(tokio::spawn(f));
    }
    tokio::task::yield_now().await;
    assert!(matches!(
        lb.clone().oneshot(()).await,
        Err(Error::Overloaded)
    ));
    for h in held {
        assert!(h.await.unwrap().is_ok());
    }
}
