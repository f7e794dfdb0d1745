//! `PeakEwma`'s claims, through a real `Balance` on the paused clock: the
//! spread term changes picks in the documented direction, and `classic()`
//! is the formula its docs give.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt, service_fn};
use tower_lb::Balance;
use tower_lb::pick::PeakEwma;

type Svc = BoxCloneSyncService<(), &'static str, Infallible>;

/// Answers after `latency(n)` for its n-th call.
fn replica(name: &'static str, latency: fn(u64) -> u64) -> Svc {
    let calls = Arc::new(AtomicU64::new(0));
    BoxCloneSyncService::new(service_fn(move |()| {
        let n = calls.fetch_add(1, Ordering::Relaxed);
        async move {
            tokio::time::sleep(Duration::from_millis(latency(n))).await;
            Ok(name)
        }
    }))
}

/// The share of "steady" (always 50 ms) against "jumpy" (20 and 80 ms in
/// turn: the same mean, a 30 ms deviation), 8 closed-loop users for 60 s.
async fn steady_share(picker: PeakEwma) -> f64 {
    let lb = Balance::builder()
        .picker(picker)
        .seed(3)
        .endpoint("steady", replica("steady", |_| 50))
        .endpoint(
            "jumpy",
            replica("jumpy", |n| if n % 2 == 0 { 20 } else { 80 }),
        )
        .build()
        .unwrap();
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut users = JoinSet::new();
    for _ in 0..8 {
        let mut lb = lb.clone();
        users.spawn(async move {
            let (mut steady, mut all) = (0u64, 0u64);
            while tokio::time::Instant::now() < end {
                let who = lb.ready().await.unwrap().call(()).await.unwrap();
                steady += u64::from(who == "steady");
                all += 1;
            }
            (steady, all)
        });
    }
    let (mut steady, mut all) = (0, 0);
    while let Some(r) = users.join_next().await {
        let (s, a) = r.unwrap();
        steady += s;
        all += a;
    }
    steady as f64 / all as f64
}

/// The spread term charges a replica whose latency swings: the larger `k`,
/// the larger the steady replica's share, although both have the same
/// mean (with the peak-sensitive estimate alone, `k = 0`, the jumpy one's
/// 80 ms peaks already cost it most of its share; the spread term takes
/// more).
#[tokio::test(start_paused = true)]
async fn the_spread_term_favours_the_steady_replica() {
    let mut shares = Vec::new();
    for k in [0.0, 1.0, 3.0] {
        shares.push(steady_share(PeakEwma::default().spread_factor(k)).await);
    }
    assert!(
        shares[0] + 0.01 < shares[1] && shares[1] + 0.01 < shares[2],
        "steady share for k = 0, 1, 3: {shares:.3?}"
    );
}

/// `classic()` is tower's and Finagle's cost, `est · (in_flight + 1)`, when
/// weights are equal and nothing fails: over two endpoints (both are
/// candidates) every pick of 8 closed-loop users takes the endpoint with
/// the lower cost computed from the endpoints' public estimates.
#[tokio::test(start_paused = true)]
async fn classic_is_the_formula_it_claims() {
    let lb = Balance::builder()
        .picker(PeakEwma::classic())
        .seed(5)
        .endpoint("fast", replica("fast", |n| 10 + n % 7))
        .endpoint("slow", replica("slow", |n| 30 + n % 11))
        .build()
        .unwrap();
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut users = JoinSet::new();
    for _ in 0..8 {
        let mut lb = lb.clone();
        users.spawn(async move {
            let (mut checked, mut wrong) = (0u32, 0u32);
            while tokio::time::Instant::now() < end {
                let now = tokio::time::Instant::now();
                let cost: Vec<(&str, f64)> = lb
                    .handle()
                    .endpoints()
                    .iter()
                    .map(|(k, s)| (*k, s.estimate(now).mean_ns * (s.in_flight() as f64 + 1.0)))
                    .collect();
                let (a, b) = (cost[0], cost[1]);
                let expected = if a.1 < b.1 { a.0 } else { b.0 };
                let clear = (a.1 - b.1).abs() > 1e-6 * a.1.max(b.1);
                let got = lb.ready().await.unwrap().call(()).await.unwrap();
                if clear {
                    checked += 1;
                    wrong += u32::from(got != expected);
                }
            }
            (checked, wrong)
        });
    }
    let (mut checked, mut wrong) = (0, 0);
    while let Some(r) = users.join_next().await {
        let (c, w) = r.unwrap();
        checked += c;
        wrong += w;
    }
    assert!(checked > 1_000, "{checked}");
    assert_eq!(
        wrong, 0,
        "{wrong} of {checked} picks disagreed with est · (in_flight + 1)"
    );
}
