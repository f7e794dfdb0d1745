//! Slow start for every picker that takes weights, on the paused clock:
//! a new endpoint's share follows Envoy's ramp
//! `weight · max(min%, (t / window)^(1/aggression))`, and an endpoint that
//! flaps keeps its ramp position (`SlowStart::memory`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt, service_fn};
use tower_lb::pick::{self, Picker};
use tower_lb::{Balance, SlowStart};

type Svc = BoxCloneSyncService<bool, &'static str, Infallible>;
type Fut = Pin<Box<dyn Future<Output = Result<&'static str, Infallible>> + Send>>;

/// Answers its name at once, or (`hold = true`) never: held calls stay in
/// flight as long as their futures live.
fn replica(name: &'static str) -> Svc {
    BoxCloneSyncService::new(service_fn(move |hold: bool| -> Fut {
        if hold {
            Box::pin(std::future::pending())
        } else {
            Box::pin(async move { Ok(name) })
        }
    }))
}

const OLD: [&str; 4] = ["a", "b", "c", "d"];
const WINDOW: Duration = Duration::from_secs(10);

/// Four endpoints serving from the start, then `new` inserted (ramping).
fn balancer<P: Picker + pick::Pick<bool>>(picker: P) -> Balance<&'static str, Svc, P> {
    let mut b = Balance::builder()
        .picker(picker)
        .seed(7)
        .slow_start(SlowStart::new(WINDOW));
    for name in OLD {
        b = b.endpoint(name, replica(name));
    }
    let lb = b.build().unwrap();
    lb.handle().insert("new", replica("new"));
    lb
}

/// The new endpoint's expected share at `t`: Envoy's factor over the pool.
fn expected(t: Duration) -> f64 {
    let f = (t.as_secs_f64() / WINDOW.as_secs_f64()).clamp(0.1, 1.0);
    f / (OLD.len() as f64 + f)
}

const TIMES: [u64; 5] = [0, 2500, 5000, 7500, 10_000];

/// Pickers that choose by configured weight: the share of 20,000
/// immediate calls.
async fn immediate_shares<P: Picker + pick::Pick<bool>>(picker: P) {
    let mut lb = balancer(picker);
    let mut at = 0;
    for ms in TIMES {
        tokio::time::advance(Duration::from_millis(ms - at)).await;
        at = ms;
        let n = 20_000;
        let mut new = 0;
        for _ in 0..n {
            new += usize::from(lb.ready().await.unwrap().call(false).await.unwrap() == "new");
        }
        let share = new as f64 / n as f64;
        let want = expected(Duration::from_millis(ms));
        assert!(
            (share - want).abs() <= 0.01 + 0.05 * want,
            "{} at {ms} ms: {share:.4}, Envoy's ramp {want:.4}",
            lb.picker().name()
        );
    }
}

/// Load-aware pickers: the share of 2,000 calls held in flight at once
/// (each pick sees the ones before it), which least-loaded-per-weight
/// spreads in proportion to the ramped weights.
async fn held_shares<P: Picker + pick::Pick<bool>>(picker: P, tolerance: f64) {
    let mut lb = balancer(picker);
    let mut at = 0;
    for ms in TIMES {
        tokio::time::advance(Duration::from_millis(ms - at)).await;
        at = ms;
        let n = 2_000;
        let held: Vec<_> = {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(lb.ready().await.unwrap().call(true));
            }
            v
        };
        let in_flight = |key: &str| {
            lb.handle()
                .endpoints()
                .into_iter()
                .find(|(k, _)| *k == key)
                .map_or(0, |(_, s)| s.in_flight())
        };
        let share = in_flight("new") as f64 / n as f64;
        let want = expected(Duration::from_millis(ms));
        assert!(
            (share - want).abs() <= tolerance * want + 0.005,
            "{} at {ms} ms: {share:.4}, Envoy's ramp {want:.4}",
            lb.picker().name()
        );
        drop(held);
        assert_eq!(in_flight("new"), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn weighted_round_robin_ramps_by_envoys_rule() {
    immediate_shares(pick::WeightedRoundRobin::new()).await;
}

#[tokio::test(start_paused = true)]
async fn random_ramps_by_envoys_rule() {
    immediate_shares(pick::Random::new()).await;
}

#[tokio::test(start_paused = true)]
async fn least_in_flight_ramps_by_envoys_rule() {
    held_shares(pick::LeastInFlight::new(), 0.05).await;
}

#[tokio::test(start_paused = true)]
async fn p2c_least_in_flight_ramps_by_envoys_rule() {
    held_shares(pick::P2cLeastInFlight::new(), 0.25).await;
}

#[tokio::test(start_paused = true)]
async fn peak_ewma_ramps_by_envoys_rule() {
    held_shares(pick::PeakEwma::default(), 0.25).await;
}

/// A hash picker's fallback ramps as the picker it is.
#[tokio::test(start_paused = true)]
async fn a_hash_pickers_fallback_ramps() {
    let fallback = pick::RingHash::new(pick::key_fn(|_: &bool| None)).fallback(pick::Random::new());
    immediate_shares(fallback).await;
}

/// Removed and inserted again every second (half a second in, half out):
/// with the memory the ramp resumes and reaches full weight after 10 s of
/// presence; without it every insertion restarts at 10%.
#[tokio::test(start_paused = true)]
async fn a_flapping_endpoint_still_reaches_full_weight() {
    for (memory, full) in [(None, true), (Some(Duration::ZERO), false)] {
        let mut ss = SlowStart::new(WINDOW);
        if let Some(m) = memory {
            ss = ss.memory(m);
        }
        let lb: Balance<&str, Svc> = Balance::builder()
            .slow_start(ss)
            .endpoint("a", replica("a"))
            .build()
            .unwrap();
        let h = lb.handle();
        let weight = || {
            let now = tokio::time::Instant::now();
            h.endpoints()
                .into_iter()
                .find(|(k, _)| *k == "flap")
                .map(|(_, s)| s.effective_weight(now))
        };
        for _ in 0..24 {
            h.insert("flap", replica("flap"));
            tokio::time::advance(Duration::from_millis(500)).await;
            h.remove(&"flap");
            tokio::time::advance(Duration::from_millis(500)).await;
        }
        h.insert("flap", replica("flap"));
        let w = weight().unwrap();
        if full {
            assert_eq!(w, 1.0, "resumed ramps add up to the window");
        } else {
            assert!((w - 0.1).abs() < 1e-9, "without memory it restarts: {w}");
        }
    }
}

/// An endpoint away for longer than the memory ramps from the start.
#[tokio::test(start_paused = true)]
async fn an_endpoint_gone_longer_than_the_memory_ramps_again() {
    let lb: Balance<&str, Svc> = Balance::builder()
        .slow_start(SlowStart::new(WINDOW).memory(Duration::from_secs(30)))
        .endpoint("a", replica("a"))
        .build()
        .unwrap();
    let h = lb.handle();
    let now = tokio::time::Instant::now;
    // Removed at full weight; back within 30 s: full weight at once.
    h.remove(&"a");
    tokio::time::advance(Duration::from_secs(29)).await;
    h.insert("a", replica("a"));
    assert_eq!(h.endpoints()[0].1.effective_weight(now()), 1.0);
    // Removed 5 s into nothing (full), gone 31 s: ramps from 10%.
    h.remove(&"a");
    tokio::time::advance(Duration::from_secs(31)).await;
    h.insert("a", replica("a"));
    assert!((h.endpoints()[0].1.effective_weight(now()) - 0.1).abs() < 1e-9);
}

/// A weight set while an endpoint ramps is the weight it reports, and the
/// ramp goes on scaling it; set after the ramp, it applies in full.
#[tokio::test(start_paused = true)]
async fn a_weight_set_during_the_ramp_keeps_the_ramp() {
    let lb: Balance<&str, Svc> = Balance::builder()
        .slow_start(SlowStart::new(WINDOW))
        .endpoint("a", replica("a"))
        .build()
        .unwrap();
    let h = lb.handle();
    h.insert("new", replica("new"));
    let state = || {
        h.endpoints()
            .into_iter()
            .find(|(k, _)| *k == "new")
            .map(|(_, s)| s)
            .unwrap()
    };
    let now = tokio::time::Instant::now;
    assert!((state().effective_weight(now()) - 0.1).abs() < 1e-9);
    tokio::time::advance(WINDOW / 2).await;
    assert!(h.set_weight(&"new", 4.0).unwrap());
    assert_eq!(state().weight(), 4.0);
    assert!((state().effective_weight(now()) - 2.0).abs() < 1e-9);
    tokio::time::advance(WINDOW).await;
    assert_eq!(state().effective_weight(now()), 4.0);
    assert!(h.set_weight(&"new", 0.5).unwrap());
    assert_eq!(
        (state().weight(), state().effective_weight(now())),
        (0.5, 0.5)
    );
    // The endpoint that never ramped takes a weight as it is.
    assert!(h.set_weight(&"a", 3.0).unwrap());
    let a = h
        .endpoints()
        .into_iter()
        .find(|(k, _)| *k == "a")
        .unwrap()
        .1;
    assert_eq!((a.weight(), a.effective_weight(now())), (3.0, 3.0));
}
