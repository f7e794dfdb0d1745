//! The health owner: each endpoint counted once, timeouts as failures,
//! half-open that always resolves, refusals that say why. Paused clock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::breaker::{CircuitBreakerConfig, CircuitBreakerLayer, Jitter, Reason, State};
use tower_lb::health::{HealthChange, HealthEvent, PanicMode};
use tower_lb::outlier::{Consecutive, OutlierDetection};
use tower_lb::retry::{CloneRequest, RetryLayer};
use tower_lb::{Balance, Error, Refusal, pick};

type Svc = BoxCloneSyncService<(), &'static str, &'static str>;

/// Answers after 10 ms; fails while `bad` is set; counts calls in `calls`.
fn endpoint(name: &'static str, bad: Arc<AtomicBool>, calls: Arc<AtomicUsize>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| {
        calls.fetch_add(1, Ordering::Relaxed);
        let fail = bad.load(Ordering::Relaxed);
        async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if fail { Err(name) } else { Ok(name) }
        }
    }))
}

fn healthy(name: &'static str) -> Svc {
    endpoint(name, Arc::default(), Arc::default())
}

/// Accepts every call and never answers; counts them.
fn black_hole(calls: Arc<AtomicUsize>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| {
        calls.fetch_add(1, Ordering::Relaxed);
        std::future::pending()
    }))
}

fn breaker() -> CircuitBreakerConfig {
    CircuitBreakerConfig::builder()
        .count_window(10)
        .minimum_calls(5)
        .failure_rate_threshold(50.0)
        .open_wait(Duration::from_secs(5))
        .open_wait_cap(Duration::from_secs(60))
        .jitter(Jitter::None)
        .half_open_probes(2)
        .half_open_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

fn ejection() -> OutlierDetection {
    OutlierDetection::builder()
        .max_ejection_jitter(Duration::ZERO)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn one_bad_endpoint_of_three_never_panics_two_do() {
    let (bad_b, bad_c) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(true)),
    );
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker())
        .outlier_detection(ejection())
        .panic_mode(PanicMode::FailFast)
        .endpoint("a", healthy("a"))
        .endpoint("b", endpoint("b", bad_b.clone(), Arc::default()))
        .endpoint("c", endpoint("c", bad_c.clone(), Arc::default()))
        .build()
        .unwrap();
    let c = lb.handle().endpoints()[2].1.clone();
    let mut panics = 0;
    for _ in 0..60 {
        if let Err(Error::Panic) = lb.clone().oneshot(()).await {
            panics += 1;
        }
    }
    // c is unhealthy for two reasons at once, and counts once: 2 of 3
    // healthy is above the 50% threshold.
    let now = Instant::now();
    assert!(c.is_ejected(now), "c should be ejected");
    assert_eq!(c.breaker().unwrap().state(), State::Open);
    assert!(c.is_unhealthy());
    assert_eq!(panics, 0, "one bad endpoint of three must not panic");

    // b fails too: 1 of 3 healthy is under 50%, so every call fails fast
    // once b is unhealthy (its breaker opens: the ejection limit of a
    // 3-host pool is one host).
    bad_b.store(true, Ordering::Relaxed);
    let b = lb.handle().endpoints()[1].1.clone();
    for _ in 0..40 {
        let _ = lb.clone().oneshot(()).await;
        if b.is_unhealthy() {
            break;
        }
    }
    assert!(b.is_unhealthy());
    for _ in 0..10 {
        let r = lb.clone().oneshot(()).await;
        assert!(matches!(r, Err(Error::Panic)), "{r:?}");
    }
}

/// Drives `n` sequential calls through `svc`; returns each caller-visible
/// latency and whether it succeeded.
async fn run<S>(svc: &S, n: usize) -> Vec<(Duration, bool)>
where
    S: Service<()> + Clone,
{
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let ok = svc.clone().oneshot(()).await.is_ok();
        out.push((start.elapsed(), ok));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    out
}

fn p99(v: &[(Duration, bool)]) -> Duration {
    let mut l: Vec<Duration> = v.iter().map(|x| x.0).collect();
    l.sort();
    l[(l.len() * 99 / 100).min(l.len() - 1)]
}

/// Four endpoints, one black-holed, round robin: the stack's timeouts make
/// the hole a failing endpoint that is ejected and whose breaker opens.
async fn black_hole_case(with_retry: bool) {
    let hole_calls = Arc::new(AtomicUsize::new(0));
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker())
        .outlier_detection(
            OutlierDetection::builder()
                .max_ejection_jitter(Duration::ZERO)
                .max_ejection_percent(25)
                .consecutive_local_origin_failures(Some(Consecutive::new(3)))
                .build()
                .unwrap(),
        )
        .endpoint("a", healthy("a"))
        .endpoint("b", healthy("b"))
        .endpoint("c", healthy("c"))
        .endpoint("hole", black_hole(hole_calls.clone()));
    let per_try = Duration::from_millis(200);
    let lb = if with_retry { lb } else { lb.timeout(per_try) };
    let lb = lb.build().unwrap();
    let hole = lb.handle().endpoints()[3].1.clone();
    let hb = hole.breaker().unwrap();

    let results = if with_retry {
        let retry = RetryLayer::builder()
            .replay(CloneRequest)
            .per_try_timeout(per_try)
            .build()
            .unwrap();
        let svc = retry.layer(lb.clone());
        let warm = run(&svc, 40).await;
        assert!(warm.iter().all(|r| r.1), "retries hide the hole");
        run(&svc, 2_000).await
    } else {
        let warm = run(&lb, 40).await;
        let timeouts = warm.iter().filter(|r| !r.1).count();
        assert!((3..=5).contains(&timeouts), "{timeouts} timeouts");
        run(&lb, 2_000).await
    };
    // The hole's timeouts are failures: three in a row ejected it, and its
    // breaker (5 calls at 100% failures) opened.
    assert!(
        hole.outlier()
            .ejections(tower_lb::outlier::EjectionReason::ConsecutiveLocalOriginFailures)
            >= 1
    );
    assert!(hb.transitions_to(State::Open) >= 1);
    assert!(
        hole.failures() >= 3,
        "timeouts count as failures: {}",
        hole.failures()
    );
    // After that, calls reach it only as breaker probes: at most two per
    // half-open period.
    let half_opens = hb.transitions_to(State::HalfOpen) as usize;
    let calls = hole_calls.load(Ordering::Relaxed);
    assert!(
        calls <= 5 + 2 * half_opens,
        "{calls} calls, {half_opens} half-open periods"
    );
    // Callers no longer pay the timeout.
    assert!(p99(&results) < per_try, "p99 {:?}", p99(&results));
    assert_eq!(hole.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_black_holed_endpoint_is_ejected_under_per_try_timeouts() {
    black_hole_case(true).await;
}

#[tokio::test(start_paused = true)]
async fn a_black_holed_endpoint_is_ejected_under_the_balancers_timeout() {
    black_hole_case(false).await;
}

/// Collects the health events a balancer reports through its hook.
fn recorder() -> (
    Arc<Mutex<Vec<HealthEvent>>>,
    impl Fn(&HealthEvent) + Send + Sync + 'static,
) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    (events, move |e: &HealthEvent| {
        sink.lock().unwrap().push(e.clone())
    })
}

/// The reasons of the breaker transitions `events` report for `endpoint`.
fn breaker_moves(events: &Mutex<Vec<HealthEvent>>, endpoint: &str) -> Vec<(State, Reason)> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.endpoint.as_deref() == Some(endpoint))
        .filter_map(|e| match e.change {
            HealthChange::Breaker { to, reason, .. } => Some((to, reason)),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_overdue_probe_reopens_the_breaker_at_the_next_admit() {
    let hang = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicBool::new(true));
    let calls = Arc::new(AtomicUsize::new(0));
    let a = {
        let (hang, bad, calls) = (hang.clone(), bad.clone(), calls.clone());
        BoxCloneSyncService::new(service_fn(move |()| {
            calls.fetch_add(1, Ordering::Relaxed);
            let (hang, fail) = (hang.load(Ordering::Relaxed), bad.load(Ordering::Relaxed));
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                if fail { Err("a") } else { Ok("a") }
            }
        }))
    };
    let (events, hook) = recorder();
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker())
        .panic_threshold(0.0)
        .labels(|k: &&str| k.to_string())
        .on_health_change(hook)
        .endpoint("a", a)
        .endpoint("b", healthy("b"))
        .build()
        .unwrap();
    let a_state = lb.handle().endpoints()[0].1.clone();
    let ab = a_state.breaker().unwrap();
    for _ in 0..20 {
        let _ = lb.clone().oneshot(()).await;
    }
    assert_eq!(ab.state(), State::Open);
    // The wait ends; the two probes hang (their callers keep waiting).
    hang.store(true, Ordering::Relaxed);
    tokio::time::advance(Duration::from_secs(6)).await;
    let before = calls.load(Ordering::Relaxed);
    let mut stuck = Vec::new();
    for _ in 0..6 {
        let mut f = Box::pin(lb.clone().oneshot(()));
        if futures_poll(&mut f).is_none() {
            stuck.push(f);
        }
    }
    assert_eq!(ab.state(), State::HalfOpen);
    assert_eq!(
        calls.load(Ordering::Relaxed) - before,
        2,
        "exactly two probes"
    );
    // Past the half-open timeout, the next call's pick reopens the breaker
    // and goes elsewhere; the balancer never stays half-open on probes
    // that never answer.
    tokio::time::advance(Duration::from_millis(1_100)).await;
    assert_eq!(lb.clone().oneshot(()).await.unwrap(), "b");
    assert_eq!(ab.state(), State::Open);
    assert_eq!(
        breaker_moves(&events, "a"),
        [
            (State::Open, Reason::FailureRate),
            (State::HalfOpen, Reason::WaitElapsed),
            (State::Open, Reason::ProbeTimeout),
        ]
    );
    drop(stuck);
    assert_eq!(a_state.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_probe_cut_by_a_per_try_timeout_is_a_failed_probe() {
    // The standalone layer: the probe's call hangs, the retry layer's
    // per-try timeout cuts it, and the breaker reopens at once (a caller
    // who merely gave up would have freed the slot instead).
    let hang = Arc::new(AtomicBool::new(false));
    let backend = {
        let hang = hang.clone();
        service_fn(move |fail: bool| {
            let hang = hang.load(Ordering::Relaxed);
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                if fail { Err("down") } else { Ok("up") }
            }
        })
    };
    let one_probe = CircuitBreakerConfig::builder()
        .count_window(10)
        .minimum_calls(5)
        .open_wait(Duration::from_secs(5))
        .open_wait_cap(Duration::from_secs(5))
        .jitter(Jitter::None)
        .half_open_probes(1)
        .half_open_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let layer = CircuitBreakerLayer::new(one_probe);
    let cb = layer.breaker().clone();
    let svc = layer.layer(backend);
    for _ in 0..5 {
        let _ = svc.clone().oneshot(true).await;
    }
    assert_eq!(cb.state(), State::Open);
    tokio::time::advance(Duration::from_secs(6)).await;
    hang.store(true, Ordering::Relaxed);
    let retry = RetryLayer::builder()
        .replay(CloneRequest)
        .classify(tower_lb::classify::ErrIsFailure)
        .max_attempts(1)
        .per_try_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let r = retry.layer(svc.clone()).oneshot(false).await;
    assert!(r.is_err());
    assert_eq!(cb.state(), State::Open, "the timed-out probe failed");
    let m = cb.stats(Instant::now());
    assert_eq!(m.probes_failed, 1);

    // An overdue probe reopens it at the next admission in the layer too.
    tokio::time::advance(Duration::from_secs(6)).await;
    let mut probe = Box::pin(svc.clone().oneshot(false));
    assert!(futures_poll(&mut probe).is_none());
    assert_eq!(cb.state(), State::HalfOpen);
    tokio::time::advance(Duration::from_millis(1_100)).await;
    let refused = svc.clone().oneshot(false).await.unwrap_err();
    assert!(refused.is_open());
    assert_eq!(cb.state(), State::Open);
}

#[test]
fn a_thousand_concurrent_callers_admit_exactly_the_probes() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let bad = Arc::new(AtomicBool::new(true));
        let calls = Arc::new(AtomicUsize::new(0));
        let cfg = CircuitBreakerConfig::builder()
            .count_window(10)
            .minimum_calls(5)
            .open_wait(Duration::from_millis(50))
            .open_wait_cap(Duration::from_millis(50))
            .half_open_probes(3)
            .half_open_timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let hang = BoxCloneSyncService::new({
            let (bad, calls) = (bad.clone(), calls.clone());
            service_fn(move |()| {
                let fail = bad.load(Ordering::Relaxed);
                if !fail {
                    calls.fetch_add(1, Ordering::Relaxed);
                }
                async move {
                    if fail {
                        Err("a")
                    } else {
                        std::future::pending::<()>().await;
                        Ok("a")
                    }
                }
            })
        });
        let lb = Balance::builder()
            .picker(pick::RoundRobin::new())
            .circuit_breaker(cfg)
            .panic_threshold(0.0)
            .endpoint("a", hang)
            .endpoint("b", healthy("b"))
            .build()
            .unwrap();
        for _ in 0..20 {
            let _ = lb.clone().oneshot(()).await;
        }
        let a = lb.handle().endpoints()[0].1.clone();
        assert_eq!(a.breaker().unwrap().state(), State::Open);
        bad.store(false, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(80)).await;
        // 1,000 callers at once on four threads: exactly three probes.
        let start = Arc::new(tokio::sync::Barrier::new(1_000));
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..1_000 {
            let (lb, start) = (lb.clone(), start.clone());
            set.spawn(async move {
                start.wait().await;
                let call = lb.oneshot(());
                let _ = tokio::time::timeout(Duration::from_millis(200), call).await;
            });
        }
        while set.join_next().await.is_some() {}
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        assert_eq!(a.in_flight(), 0);
    });
}

#[tokio::test(start_paused = true)]
async fn refusals_say_why() {
    // Every breaker open: the refusal counts them and says when the first
    // admits a probe.
    let bad = Arc::new(AtomicBool::new(true));
    let lb = Balance::builder()
        .circuit_breaker(breaker())
        .panic_threshold(0.0)
        .endpoint("a", endpoint("a", bad.clone(), Arc::default()))
        .endpoint("b", endpoint("b", bad.clone(), Arc::default()))
        .build()
        .unwrap();
    for _ in 0..20 {
        let _ = lb.clone().oneshot(()).await;
    }
    let e = lb.clone().oneshot(()).await.unwrap_err();
    let Error::AllUnavailable(u) = &e else {
        panic!("{e:?}")
    };
    assert_eq!((u.breaker_open, u.ejected, u.capped), (2, 0, 0));
    assert_eq!(e.refusal(), Some(Refusal::BreakerOpen));
    let left = e.retry_in().unwrap();
    assert!(
        left > Duration::ZERO && left <= Duration::from_secs(5),
        "{left:?}"
    );
    assert!(e.to_string().contains("2 breaker open"), "{e}");

    // Ejected endpoints are told apart from open breakers: both fail, one
    // is ejected (the limit keeps the other), and both breakers open.
    let lb = Balance::builder()
        .picker(pick::RoundRobin::new())
        .circuit_breaker(breaker())
        .outlier_detection(
            OutlierDetection::builder()
                .max_ejection_percent(100)
                .max_ejection_jitter(Duration::ZERO)
                .build()
                .unwrap(),
        )
        .panic_threshold(0.0)
        .endpoint("a", endpoint("a", bad.clone(), Arc::default()))
        .endpoint("b", endpoint("b", bad.clone(), Arc::default()))
        .build()
        .unwrap();
    for _ in 0..20 {
        let _ = lb.clone().oneshot(()).await;
    }
    let e = lb.clone().oneshot(()).await.unwrap_err();
    assert!(
        matches!(&e, Error::AllUnavailable(u) if u.ejected == 1 && u.breaker_open == 1),
        "{e:?}"
    );

    // A full pool is `Overloaded`, an empty one `NoEndpoints`.
    let slow = BoxCloneSyncService::new(service_fn(|()| async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok::<_, &str>("x")
    }));
    let lb = Balance::builder()
        .max_in_flight(1)
        .endpoint("a", slow)
        .build()
        .unwrap();
    let mut first = Box::pin(lb.clone().oneshot(()));
    assert!(futures_poll(&mut first).is_none());
    let e = lb.clone().oneshot(()).await.unwrap_err();
    assert_eq!(e.refusal(), Some(Refusal::Overloaded));
    let empty: Balance<&str, Svc> = Balance::builder().build().unwrap();
    assert_eq!(
        empty.oneshot(()).await.unwrap_err().refusal(),
        Some(Refusal::NoEndpoints)
    );
}

#[tokio::test(start_paused = true)]
async fn in_flight_returns_to_zero_with_breakers_ejection_and_timeouts() {
    // 100,000 calls: endpoints answer late, fail or never; callers cancel,
    // the balancer's timeout and a retry layer's per-try timeout cut calls.
    let chaotic = |seed: u64| {
        let rng = Arc::new(Mutex::new(fastrand::Rng::with_seed(seed)));
        BoxCloneSyncService::new(service_fn(move |()| {
            let (ms, roll) = {
                let mut r = rng.lock().unwrap();
                (r.u64(0..30), r.u8(0..20))
            };
            async move {
                if roll == 0 {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if roll < 3 { Err("boom") } else { Ok("ok") }
            }
        }))
    };
    let lb = Balance::builder()
        .seed(9)
        .circuit_breaker(breaker())
        .outlier_detection(ejection())
        .timeout(Duration::from_millis(25))
        .endpoint("a", chaotic(1))
        .endpoint("b", chaotic(2))
        .endpoint("c", chaotic(3))
        .endpoint("d", chaotic(4))
        .build()
        .unwrap();
    let retry = RetryLayer::builder()
        .replay(CloneRequest)
        .per_try_timeout(Duration::from_millis(15))
        .build()
        .unwrap();
    let stack = retry.layer(lb.clone());
    let mut rng = fastrand::Rng::with_seed(5);
    let mut outcomes: HashMap<&str, usize> = HashMap::new();
    for _batch in 0..100 {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..1_000 {
            let limit = Duration::from_millis(rng.u64(1..40));
            let (lb, stack) = (lb.clone(), stack.clone());
            set.spawn(async move {
                let r = if i % 2 == 0 {
                    tokio::time::timeout(limit, lb.oneshot(()))
                        .await
                        .map(|r| r.is_ok())
                } else {
                    tokio::time::timeout(limit, stack.oneshot(()))
                        .await
                        .map(|r| r.is_ok())
                };
                match r {
                    Ok(true) => "ok",
                    Ok(false) => "err",
                    Err(_) => "cut",
                }
            });
        }
        while let Some(r) = set.join_next().await {
            *outcomes.entry(r.unwrap()).or_insert(0) += 1;
        }
    }
    assert_eq!(outcomes.values().sum::<usize>(), 100_000);
    assert!(outcomes.len() == 3, "{outcomes:?}");
    for (k, s) in lb.handle().endpoints() {
        assert_eq!(s.in_flight(), 0, "endpoint {k} leaked");
        if let Some(b) = s.breaker() {
            let m = b.stats(Instant::now());
            assert_eq!(m.probes_in_flight, 0, "endpoint {k} holds a probe");
        }
    }
}

fn futures_poll<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(f).poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}
