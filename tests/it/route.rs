//! The route step through a real balancer: Envoy's priority spill at each
//! healthy share, per-level panic, the zone-aware rule on Envoy's worked
//! examples, locality weights, callers updated at run time, and affinity.
//! Paused clock; seeded balancers.

use std::collections::HashMap;
use std::convert::Infallible;

use tower::util::BoxCloneSyncService;
use tower::{ServiceExt, service_fn};
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::endpoint::{EndpointMeta, Locality};
use tower_lb::health::PanicMode;
use tower_lb::pick::{self, Pick};
use tower_lb::route::{Callers, Routing, ZoneAware};
use tower_lb::{Balance, Error};

type Svc = BoxCloneSyncService<u64, String, Infallible>;

fn named(name: String) -> Svc {
    BoxCloneSyncService::new(service_fn(move |_: u64| {
        let name = name.clone();
        async move { Ok(name) }
    }))
}

/// Endpoints `{prefix}{i}` for `i` in `0..n`, at `priority` in `zone`.
fn group(prefix: &str, n: usize, zone: &str, priority: u32) -> Vec<(String, EndpointMeta)> {
    (0..n)
        .map(|i| {
            let meta = EndpointMeta::new()
                .with_locality(Locality::in_zone(zone))
                .with_priority(priority);
            (format!("{prefix}{i}"), meta)
        })
        .collect()
}

fn balance<P: pick::Picker>(
    picker: P,
    routing: Routing,
    endpoints: Vec<(String, EndpointMeta)>,
) -> Balance<String, Svc, P> {
    let mut b = Balance::builder()
        .picker(picker)
        .seed(7)
        .routing(routing)
        .circuit_breaker(CircuitBreakerConfig::default());
    for (key, meta) in endpoints {
        b = b.endpoint_with(key.clone(), named(key), 1.0, meta);
    }
    b.build().expect("valid config")
}

/// Opens the breakers of endpoints `{prefix}0` to `{prefix}{n-1}`.
fn break_first<P: pick::Picker>(lb: &Balance<String, Svc, P>, prefix: &str, n: usize) {
    for i in 0..n {
        let key = format!("{prefix}{i}");
        let (_, state) = lb
            .handle()
            .endpoints()
            .into_iter()
            .find(|(k, _)| *k == key)
            .expect("a member");
        state.breaker().expect("breakers on").force_open();
    }
}

/// Share of `n` calls that landed on keys starting with each prefix.
async fn shares<P: Pick<u64>>(lb: &Balance<String, Svc, P>, n: u64, prefixes: &[&str]) -> Vec<f64> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for k in 0..n {
        let name = lb.clone().oneshot(k).await.expect("an endpoint");
        *counts.entry(name).or_default() += 1;
    }
    prefixes
        .iter()
        .map(|p| {
            let hits: u64 = counts
                .iter()
                .filter(|(k, _)| k.starts_with(p))
                .map(|(_, c)| c)
                .sum();
            hits as f64 / n as f64
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn priority_spill_follows_envoys_rule_at_each_healthy_share() {
    let mut eps = group("p0-", 10, "a", 0);
    eps.extend(group("p1-", 10, "a", 1));
    let lb = balance(pick::PeakEwma::default(), Routing::new(), eps);
    for down in 0..=10 {
        break_first(&lb, "p0-", down);
        let healthy = 10 - down;
        // The documented rule, P1 fully healthy: P0 takes
        // min(100, ⌊140 · healthy / 10⌋) percent.
        let p0 = (140 * healthy / 10).min(100) as u32;
        let plan = lb.handle().route_plan();
        assert_eq!(plan.levels.len(), 2);
        assert_eq!(plan.levels[0].healthy, healthy);
        assert_eq!((plan.levels[0].load, plan.levels[1].load), (p0, 100 - p0));
        assert!(
            !plan.levels[0].panic && !plan.levels[1].panic,
            "P1 absorbs: no panic"
        );
        let s = shares(&lb, 4_000, &["p0-", "p1-"]).await;
        if healthy >= 8 {
            // At least 1/1.4 of P0 healthy: not one pick on P1.
            assert_eq!(s[1], 0.0, "{healthy}/10 healthy: {s:?}");
        } else {
            let want = f64::from(100 - p0) / 100.0;
            assert!(
                (s[1] - want).abs() < 0.03,
                "{healthy}/10 healthy: P1 {s:?}, want {want}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn levels_panic_only_when_all_of_them_are_short() {
    let mut eps = group("p0-", 10, "a", 0);
    eps.extend(group("p1-", 10, "a", 1));
    let mut b = Balance::builder()
        .seed(3)
        .panic_mode(PanicMode::FailFast)
        .circuit_breaker(CircuitBreakerConfig::default());
    for (key, meta) in eps {
        b = b.endpoint_with(key.clone(), named(key), 1.0, meta);
    }
    let lb = b.build().unwrap();
    // P0 at 30%, P1 at 40%: scores 42 + 56 < 100, both under 50%: every
    // level panics, loads follow the endpoint counts (50/50).
    break_first(&lb, "p0-", 7);
    break_first(&lb, "p1-", 6);
    let plan = lb.handle().route_plan();
    let l: Vec<_> = plan.levels.iter().map(|l| (l.load, l.panic)).collect();
    assert_eq!(l, [(50, true), (50, true)]);
    assert!(matches!(lb.clone().oneshot(1).await, Err(Error::Panic)));
    // P1 back to full health: total health 100, nobody panics, P0 takes 42.
    for i in 0..6 {
        let key = format!("p1-{i}");
        let (_, s) = lb
            .handle()
            .endpoints()
            .into_iter()
            .find(|(k, _)| *k == key)
            .unwrap();
        s.breaker().unwrap().reset();
    }
    let plan = lb.handle().route_plan();
    let l: Vec<_> = plan.levels.iter().map(|l| (l.load, l.panic)).collect();
    assert_eq!(l, [(42, false), (58, false)]);
    assert!(lb.clone().oneshot(1).await.is_ok());
}

/// Callers' shares, endpoints per zone, the caller's zone, expected shares.
type ZoneCase = (&'static [f64], &'static [usize], usize, &'static [f64]);

/// Zone-aware worked examples: (callers' shares, endpoints per zone, the
/// caller's zone, the expected share per zone), computed by hand from the
/// documented rule.
const ZONE_CASES: &[ZoneCase] = &[
    // Envoy's source example: callers 40/40/20, endpoints 25/50/25 %. Zone
    // 0 keeps 25/40; the residual 0.375 goes to the surpluses 10 and 5.
    (&[40.0, 40.0, 20.0], &[4, 8, 4], 0, &[0.625, 0.25, 0.125]),
    // The same, from zone 1: 50% of endpoints for 40% of callers: local.
    (&[40.0, 40.0, 20.0], &[4, 8, 4], 1, &[0.0, 1.0, 0.0]),
    // Envoy's doc: "local percentage is 20% and upstream is 10%: route
    // only 50% of requests directly"; the rest to the one surplus zone.
    (&[20.0, 80.0], &[1, 9], 0, &[0.5, 0.5]),
    // The lab's zones: callers 50/30/20, endpoints 34/33/33.
    (&[50.0, 30.0, 20.0], &[34, 33, 33], 0, &[0.68, 0.06, 0.26]),
    (&[50.0, 30.0, 20.0], &[34, 33, 33], 2, &[0.0, 0.0, 1.0]),
    // No endpoint in the caller's zone: all by surplus (zone 2 has none).
    (&[50.0, 25.0, 25.0], &[0, 6, 2], 0, &[0.0, 1.0, 0.0]),
];

const ZONES: [&str; 3] = ["z0", "z1", "z2"];

fn zone_routing(callers: &[f64], local: usize) -> Routing {
    let c = Callers::new(ZONES.iter().copied().zip(callers.iter().copied()));
    Routing::new().zone_aware(ZoneAware::new(ZONES[local], c))
}

#[tokio::test(start_paused = true)]
async fn zone_aware_matches_envoys_worked_examples() {
    for &(callers, endpoints, local, want) in ZONE_CASES {
        let mut eps = Vec::new();
        for (z, &n) in endpoints.iter().enumerate() {
            eps.extend(group(&format!("{}-", ZONES[z]), n, ZONES[z], 0));
        }
        let lb = balance(pick::RoundRobin::new(), zone_routing(callers, local), eps);
        let plan = lb.handle().route_plan();
        let got: Vec<f64> = ZONES[..endpoints.len()]
            .iter()
            .map(|z| {
                plan.levels[0]
                    .localities
                    .iter()
                    .find(|l| l.locality.zone() == *z)
                    .map_or(0.0, |l| l.share)
            })
            .collect();
        let close = got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9);
        assert!(
            close,
            "{callers:?} {endpoints:?} from zone {local}: {got:?}, want {want:?}"
        );
        let prefixes: Vec<String> = ZONES[..endpoints.len()]
            .iter()
            .map(|z| format!("{z}-"))
            .collect();
        let p: Vec<&str> = prefixes.iter().map(String::as_str).collect();
        let s = shares(&lb, 5_000, &p).await;
        for (got, want) in s.iter().zip(want) {
            assert!(
                (got - want).abs() < 0.03,
                "{callers:?} {endpoints:?}: {s:?} vs {want:?}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn zone_aware_is_off_below_the_minimum_pool_and_follows_new_callers() {
    let mut eps = group("z0-", 2, "z0", 0);
    eps.extend(group("z1-", 3, "z1", 0));
    // 5 healthy endpoints < 6: the whole level, no split.
    let lb = balance(
        pick::RoundRobin::new(),
        zone_routing(&[1.0, 1.0], 0),
        eps.clone(),
    );
    assert!(lb.handle().route_plan().levels[0].localities.is_empty());
    let routing = Routing::new().zone_aware(
        ZoneAware::new("z0", Callers::new([("z0", 1.0), ("z1", 1.0)])).min_cluster_size(5),
    );
    let lb = balance(pick::RoundRobin::new(), routing, eps);
    // 40% of endpoints for 50% of callers: 0.8 stays.
    let s = shares(&lb, 5_000, &["z0-", "z1-"]).await;
    assert!((s[0] - 0.8).abs() < 0.03, "{s:?}");
    // The callers move: 20% in z0 now. z0's 40% covers them: all local.
    let h = lb.handle();
    h.set_callers(Callers::new([("z0", 1.0), ("z1", 4.0)]))
        .unwrap();
    assert_eq!(shares(&lb, 1_000, &["z0-", "z1-"]).await, [1.0, 0.0]);
    let e = h.set_callers(Callers::new([("z1", 1.0)])).unwrap_err();
    assert_eq!(e.field(), "routing.zone_aware.local_zone");
    let plain = balance(
        pick::RoundRobin::new(),
        Routing::new(),
        group("x", 1, "z0", 0),
    );
    let e = plain
        .handle()
        .set_callers(Callers::new([("z0", 1.0)]))
        .unwrap_err();
    assert_eq!(e.field(), "routing.zone_aware");
}

#[tokio::test(start_paused = true)]
async fn locality_weights_times_availability() {
    let weighted = |zone: &str, w: u32, n: usize| -> Vec<(String, EndpointMeta)> {
        (0..n)
            .map(|i| {
                let meta = EndpointMeta::new()
                    .with_locality(Locality::new("r", zone, ""))
                    .with_locality_weight(w);
                (format!("{zone}-{i}"), meta)
            })
            .collect()
    };
    let mut eps = weighted("x", 1, 10);
    eps.extend(weighted("y", 2, 10));
    let lb = balance(
        pick::PeakEwma::default(),
        Routing::new().locality_weighted(),
        eps,
    );
    let s = shares(&lb, 6_000, &["x-", "y-"]).await;
    assert!((s[0] - 1.0 / 3.0).abs() < 0.03, "{s:?}");
    // X at 50%: effective weights 1·70 and 2·100.
    break_first(&lb, "x-", 5);
    let s = shares(&lb, 6_000, &["x-", "y-"]).await;
    assert!((s[0] - 70.0 / 270.0).abs() < 0.03, "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn a_key_keeps_its_endpoint_and_moves_only_with_its_band() {
    let mut eps = group("z0-", 4, "z0", 0);
    eps.extend(group("z1-", 4, "z1", 0));
    let ring = pick::RingHash::new(pick::key_fn(|k: &u64| Some(*k)));
    let lb = balance(ring, zone_routing(&[1.0, 1.0], 0), eps);
    let route = |lb: Balance<String, Svc, _>| async move {
        let mut to = Vec::new();
        for k in 0..2_000u64 {
            to.push(lb.clone().oneshot(k).await.unwrap());
        }
        to
    };
    let before = route(lb.clone()).await;
    assert_eq!(before, route(lb.clone()).await, "same keys, same endpoints");
    assert!(before.iter().all(|e| e.starts_with("z0-")), "all local");
    // One z0 endpoint breaks: z0 has 3/7 of the endpoints for 1/2 of the
    // callers, so 6/7 of the keys stay in z0 and 1/7 cross.
    break_first(&lb, "z0-", 1);
    let after = route(lb.clone()).await;
    let crossed = after.iter().filter(|e| e.starts_with("z1-")).count() as f64 / 2_000.0;
    assert!((crossed - 1.0 / 7.0).abs() < 0.03, "{crossed}");
    // Keys that stayed in z0 and were not on the broken endpoint kept it.
    for (b, a) in before.iter().zip(&after) {
        if a.starts_with("z0-") && b != "z0-0" {
            assert_eq!(a, b);
        }
    }
}
