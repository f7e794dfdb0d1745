//! Circuit breakers, outlier ejection and the panic threshold inside
//! `Balance`, on tokio's paused clock.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tower::util::BoxCloneSyncService;
use tower::{ServiceExt, service_fn};
use tower_lb::breaker::{CircuitBreakerConfig, State};
use tower_lb::health::PanicMode;
use tower_lb::outlier::OutlierDetection;
use tower_lb::{Balance, ConfigError, Error, pick};

type Svc = BoxCloneSyncService<(), &'static str, &'static str>;

/// An endpoint answering after 10 ms, failing while `bad` is set.
fn switchable(name: &'static str, bad: Arc<AtomicBool>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| {
        let fail = bad.load(Ordering::Relaxed);
        async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if fail { Err(name) } else { Ok(name) }
        }
    }))
}

fn healthy(name: &'static str) -> Svc {
    switchable(name, Arc::new(AtomicBool::new(false)))
}

/// Sends `n` sequential requests; counts successes per endpoint and errors.
async fn drive<P: pick::Pick<()>>(
    lb: &Balance<&'static str, Svc, P>,
    n: usize,
) -> (HashMap<&'static str, usize>, HashMap<String, usize>) {
    let (mut ok, mut err) = (HashMap::new(), HashMap::new());
    for _ in 0..n {
        match lb.clone().oneshot(()).await {
            Ok(who) => *ok.entry(who).or_insert(0) += 1,
            Err(Error::Inner(who)) => *err.entry(format!("inner:{who}")).or_insert(0) += 1,
            Err(e) => *err.entry(e.to_string()).or_insert(0) += 1,
        }
    }
    (ok, err)
}

fn breaker() -> CircuitBreakerConfig {
    CircuitBreakerConfig::builder()
        .count_window(10)
        .minimum_calls(5)
        .failure_rate_threshold(50.0)
        .open_wait(Duration::from_secs(5))
        .open_wait_cap(Duration::from_secs(5))
        .half_open_probes(2)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_takes_its_endpoint_out_until_probes_pass() {
    let bad = Arc::new(AtomicBool::new(true));
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker())
        .panic_threshold(0.0)
        .endpoint("a", healthy("a"))
        .endpoint("b", switchable("b", bad.clone()))
        .build()
        .unwrap();
    let b_state = lb.handle().endpoints()[1].1.clone();
    let (ok, err) = drive(&lb, 20).await;
    // b fails its minimum 5 calls, opens, and is skipped from then on.
    assert_eq!(err.get("inner:b"), Some(&5), "{err:?}");
    assert_eq!(ok["a"], 15);
    assert_eq!(b_state.breaker().unwrap().state(), State::Open);

    // It recovers; after the open wait, exactly two probes go to it and
    // close the breaker.
    bad.store(false, Ordering::Relaxed);
    tokio::time::advance(Duration::from_secs(6)).await;
    let (ok, err) = drive(&lb, 20).await;
    assert!(err.is_empty(), "{err:?}");
    assert_eq!(b_state.breaker().unwrap().state(), State::Closed);
    assert_eq!(ok["b"], 10, "{ok:?}");
}

#[tokio::test(start_paused = true)]
async fn a_guard_set_later_replaces_the_one_of_its_kind() {
    // `guard` takes a breaker's configuration as `circuit_breaker` does,
    // and the last one set is the endpoints' breaker: here one that needs
    // 100 calls before it judges, so 5 failures leave it closed.
    let bad = Arc::new(AtomicBool::new(true));
    let patient = CircuitBreakerConfig::builder()
        .minimum_calls(100)
        .build()
        .unwrap();
    let two = |first: CircuitBreakerConfig, then: CircuitBreakerConfig| {
        Balance::builder()
            .picker(pick::RoundRobin::new())
            .circuit_breaker(first)
            .guard(then)
            .endpoint("a", healthy("a"))
            .endpoint("b", switchable("b", bad.clone()))
            .build()
            .unwrap()
    };
    let lb = two(breaker(), patient);
    let b_state = lb.handle().endpoints()[1].1.clone();
    let (ok, err) = drive(&lb, 20).await;
    assert_eq!(err.get("inner:b"), Some(&10), "{err:?}");
    assert_eq!(ok["a"], 10);
    assert_eq!(b_state.breaker().unwrap().state(), State::Closed);

    // The other way round, the first test's breaker opens after 5.
    let lb = two(CircuitBreakerConfig::default(), breaker());
    let (ok, err) = drive(&lb, 20).await;
    assert_eq!(err.get("inner:b"), Some(&5), "{err:?}");
    assert_eq!(ok["a"], 15);
}

#[tokio::test(start_paused = true)]
async fn all_breakers_open_fail_fast_with_all_unavailable() {
    let bad = Arc::new(AtomicBool::new(true));
    let lb = Balance::builder()
        .circuit_breaker(breaker())
        .endpoint("a", switchable("a", bad.clone()))
        .endpoint("b", switchable("b", bad.clone()))
        .build()
        .unwrap();
    let (_, err) = drive(&lb, 10).await;
    assert_eq!(err.len(), 2, "{err:?}");
    let r = lb.clone().oneshot(()).await;
    // The refusal says why: both breakers are open, and when the first
    // admits a probe.
    assert!(
        matches!(&r, Err(Error::AllUnavailable(u)) if u.breaker_open == 2 && u.retry_in.is_some()),
        "{r:?}"
    );
    // No endpoint was left holding an in-flight slot or a probe.
    for (_, s) in lb.handle().endpoints() {
        assert_eq!(s.in_flight(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn abandoned_probe_frees_its_half_open_slot() {
    // A half-open breaker (two probes): a probe whose caller gives up frees
    // its slot for the next caller, records nothing, and the breaker stays
    // half-open until real probes answer.
    let bad = Arc::new(AtomicBool::new(true));
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker())
        .panic_threshold(0.0)
        .endpoint("a", switchable("a", bad.clone()))
        .endpoint("b", healthy("b"))
        .build()
        .unwrap();
    let state = lb.handle().endpoints()[0].1.clone();
    let b = state.breaker().unwrap();
    drive(&lb, 20).await;
    assert_eq!(b.state(), State::Open);
    bad.store(false, Ordering::Relaxed);
    tokio::time::advance(Duration::from_secs(6)).await;
    // Round robin offers "a" every other call; each probe is abandoned after
    // 1 ms (the endpoint takes 10).
    let mut abandoned = 0;
    for _ in 0..10 {
        let mut f = Box::pin(lb.clone().oneshot(()));
        if tokio::time::timeout(Duration::from_millis(1), &mut f)
            .await
            .is_err()
        {
            abandoned += 1;
        }
    }
    assert_eq!(b.state(), State::HalfOpen);
    assert!(abandoned >= 4, "{abandoned} calls abandoned");
    let m = b.stats(tokio::time::Instant::now());
    assert_eq!((m.probes_in_flight, m.probes_completed), (0, 0));
    assert_eq!(state.in_flight(), 0);
    // Probes that answer close the breaker.
    let (ok, err) = drive(&lb, 8).await;
    assert!(err.is_empty(), "{err:?}");
    assert!(ok["a"] >= 2, "{ok:?}");
    assert_eq!(b.state(), State::Closed);
}

fn ejection() -> OutlierDetection {
    OutlierDetection::builder()
        .max_ejection_jitter(Duration::ZERO)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn consecutive_failures_eject_and_the_host_returns_after_its_time() {
    let bad = Arc::new(AtomicBool::new(true));
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .outlier_detection(ejection())
        .endpoint("a", healthy("a"))
        .endpoint("b", healthy("b"))
        .endpoint("c", switchable("c", bad.clone()))
        .build()
        .unwrap();
    let c = lb.handle().endpoints()[2].1.clone();
    let (_, err) = drive(&lb, 30).await;
    // Five consecutive failures eject c (a 3-host pool may eject one).
    assert_eq!(err.get("inner:c"), Some(&5), "{err:?}");
    assert!(c.is_ejected(tokio::time::Instant::now()));
    assert_eq!(c.outlier().multiplier(), 1);
    bad.store(false, Ordering::Relaxed);
    // 30 s base ejection time; after it, c takes traffic again.
    tokio::time::advance(Duration::from_secs(31)).await;
    let (ok, err) = drive(&lb, 30).await;
    assert!(err.is_empty(), "{err:?}");
    assert_eq!(ok["c"], 10, "{ok:?}");
}

#[tokio::test(start_paused = true)]
async fn panic_routes_over_all_or_fails_fast() {
    let bad = Arc::new(AtomicBool::new(true));
    let od = OutlierDetection::builder()
        .max_ejection_percent(100)
        .max_ejection_jitter(Duration::ZERO)
        .build()
        .unwrap();
    for mode in [PanicMode::RouteAll, PanicMode::FailFast] {
        let lb = Balance::builder()
            .picker(pick::RoundRobin::new())
            .outlier_detection(od.clone())
            .panic_mode(mode)
            .endpoint("a", healthy("a"))
            .endpoint("b", switchable("b", bad.clone()))
            .endpoint("c", switchable("c", bad.clone()))
            .endpoint("d", switchable("d", bad.clone()))
            .build()
            .unwrap();
        let (_, err) = drive(&lb, 40).await;
        let now = tokio::time::Instant::now();
        let ejected: Vec<_> = lb
            .handle()
            .endpoints()
            .into_iter()
            .filter(|(_, s)| s.is_ejected(now))
            .map(|(k, _)| k)
            .collect();
        // Ejection never takes all hosts: b, c and d go, a stays.
        assert_eq!(ejected, ["b", "c", "d"], "{err:?}");
        // 1 of 4 healthy is under the 50% threshold.
        let (ok, err) = drive(&lb, 8).await;
        match mode {
            PanicMode::RouteAll => {
                // Traffic spreads over every endpoint instead of crushing a.
                assert_eq!(ok.get("a"), Some(&2), "{ok:?}");
                assert_eq!(err.values().sum::<usize>(), 6, "{err:?}");
            }
            PanicMode::FailFast => {
                assert!(ok.is_empty());
                assert_eq!(
                    err.get(&Error::<&str>::Panic.to_string()),
                    Some(&8),
                    "{err:?}"
                );
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn without_panic_the_last_healthy_endpoint_takes_everything() {
    let bad = Arc::new(AtomicBool::new(true));
    let od = OutlierDetection::builder()
        .max_ejection_percent(100)
        .build()
        .unwrap();
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .outlier_detection(od)
        .panic_threshold(0.0)
        .endpoint("a", healthy("a"))
        .endpoint("b", switchable("b", bad.clone()))
        .endpoint("c", switchable("c", bad.clone()))
        .build()
        .unwrap();
    drive(&lb, 30).await;
    let (ok, err) = drive(&lb, 9).await;
    assert_eq!(ok.get("a"), Some(&9), "{ok:?} {err:?}");
}

#[test]
fn panic_threshold_out_of_range_is_a_config_error() {
    for bad in [-1.0, 100.5, f64::NAN] {
        let e: ConfigError = Balance::<&str, Svc>::builder()
            .panic_threshold(bad)
            .build()
            .unwrap_err();
        assert_eq!(e.field(), "panic_threshold");
    }
}
