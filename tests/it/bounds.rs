//! Every builder's extremes — NaN, ±∞, zero, negative, huge — are a
//! `ConfigError` naming the field, or a documented bound that then works:
//! never a panic, at build time or on the first request.

use std::time::Duration;

use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt, service_fn};
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::outlier::{Consecutive, LatencyOutlier, OutlierDetection, SuccessRate};
use tower_lb::pick::{self, Maglev, PeakEwma, RingHash};
use tower_lb::retry::{Backoff, Budget, CloneRequest, Hedge, RetryLayer};
use tower_lb::{Balance, ConfigError, SlowStart};

type Svc = BoxCloneSyncService<u32, u32, std::io::Error>;

fn echo() -> Svc {
    BoxCloneSyncService::new(service_fn(|x: u32| async move { Ok(x) }))
}

const MAX: Duration = Duration::MAX;
const ZERO: Duration = Duration::ZERO;
const YEAR_AND_A_DAY: Duration = Duration::from_secs(366 * 24 * 3600);
const BAD_F64: [f64; 5] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 0.0];

/// The field a failed build names (and its message names it too).
fn field<T>(r: Result<T, ConfigError>) -> &'static str {
    match r {
        Ok(_) => "accepted",
        Err(e) => {
            assert!(e.to_string().contains(e.field()), "{e}");
            e.field()
        }
    }
}

fn balance() -> tower_lb::balance::Builder<&'static str, Svc> {
    Balance::builder().endpoint("a", echo())
}

#[test]
fn balance_builder_extremes() {
    for w in BAD_F64 {
        let b = Balance::builder().weighted_endpoint("a", echo(), w).build();
        assert_eq!(field(b), "weight", "{w}");
    }
    for d in [ZERO, MAX, YEAR_AND_A_DAY] {
        assert_eq!(field(balance().decay(d).build()), "decay", "{d:?}");
        assert_eq!(field(balance().sample_decay(d).build()), "sample_decay");
        assert_eq!(field(balance().failure_decay(d).build()), "failure_decay");
        assert_eq!(field(balance().timeout(d).build()), "timeout");
    }
    for d in [MAX, YEAR_AND_A_DAY] {
        assert_eq!(field(balance().default_rtt(d).build()), "default_rtt");
        assert_eq!(
            field(balance().failure_penalty(d).build()),
            "failure_penalty"
        );
    }
    for p in [f64::NAN, f64::INFINITY, -1.0, 100.5] {
        assert_eq!(
            field(balance().panic_threshold(p).build()),
            "panic_threshold"
        );
    }
    assert_eq!(field(balance().max_in_flight(0).build()), "max_in_flight");
    for n in [0, 17, usize::MAX] {
        let b = balance().picker(PeakEwma::new().choices(n)).build();
        assert_eq!(field(b), "choices", "{n}");
    }
    for k in [f64::NAN, f64::INFINITY, -1.0] {
        let b = balance().picker(PeakEwma::new().spread_factor(k)).build();
        assert_eq!(field(b), "spread_factor", "{k}");
    }
    for ss in [SlowStart::new(ZERO), SlowStart::new(MAX)] {
        assert_eq!(field(balance().slow_start(ss).build()), "slow_start.window");
    }
    let ss = SlowStart::new(Duration::from_secs(1));
    for a in BAD_F64 {
        let b = balance().slow_start(ss.aggression(a)).build();
        assert_eq!(field(b), "slow_start.aggression", "{a}");
    }
    for p in [f64::NAN, -1.0, 100.5, f64::INFINITY] {
        let b = balance().slow_start(ss.min_weight_percent(p)).build();
        assert_eq!(field(b), "slow_start.min_weight_percent", "{p}");
    }
    for m in [MAX, YEAR_AND_A_DAY] {
        let b = balance().slow_start(ss.memory(m)).build();
        assert_eq!(field(b), "slow_start.memory", "{m:?}");
    }
    assert!(balance().slow_start(ss.memory(ZERO)).build().is_ok());
    let key = || pick::key_fn(|r: &u32| Some(u64::from(*r)));
    for n in [0, 10_001, usize::MAX] {
        let b = balance().picker(RingHash::new(key()).vnodes(n)).build();
        assert_eq!(field(b), "vnodes", "{n}");
    }
    for m in [0, 100, 65_536, usize::MAX] {
        let b = balance().picker(Maglev::new(key()).table_size(m)).build();
        assert_eq!(field(b), "table_size", "{m}");
    }
    for c in [f64::NAN, f64::INFINITY, 0.5, -1.0] {
        let b = balance()
            .picker(RingHash::new(key()).bounded_load(c))
            .build();
        assert_eq!(field(b), "bounded_load", "{c}");
    }
}

#[test]
fn routing_extremes() {
    use tower_lb::route::{Callers, Routing, Subset, ZoneAware};
    let routed = |r: Routing| balance().routing(r).build();
    for f in BAD_F64.into_iter().chain([0.5, 100.1, f64::MAX]) {
        let r = Routing::new().overprovisioning_factor(f);
        assert_eq!(field(routed(r)), "routing.overprovisioning_factor", "{f}");
    }
    for f in [1.0, 100.0] {
        let r = Routing::new().overprovisioning_factor(f);
        assert_eq!(field(routed(r)), "accepted", "{f}");
    }
    let zones = |shares: &[(&'static str, f64)]| Callers::new(shares.iter().copied());
    for s in BAD_F64.into_iter().filter(|s| *s != 0.0) {
        let z = ZoneAware::new("a", zones(&[("a", 1.0), ("b", s)]));
        let r = Routing::new().zone_aware(z);
        assert_eq!(field(routed(r)), "routing.zone_aware.callers", "{s}");
    }
    let z = ZoneAware::new("a", zones(&[("a", f64::MAX), ("b", f64::MAX)]));
    assert_eq!(
        field(routed(Routing::new().zone_aware(z))),
        "routing.zone_aware.callers"
    );
    for local in ["", "nowhere"] {
        let z = ZoneAware::new(local, zones(&[("a", 1.0)]));
        let r = Routing::new().zone_aware(z);
        assert_eq!(
            field(routed(r)),
            "routing.zone_aware.local_zone",
            "{local:?}"
        );
    }
    let z = ZoneAware::new("a", zones(&[("a", 1.0)])).min_cluster_size(usize::MAX);
    assert_eq!(field(routed(Routing::new().zone_aware(z))), "accepted");
    for (s, f) in [
        (Subset::new(0, 1, 0), "routing.subset.size"),
        (Subset::new(0, 0, 1), "routing.subset.fleet_size"),
        (
            Subset::new(usize::MAX, usize::MAX, 1),
            "routing.subset.index",
        ),
        (
            Subset::new(usize::MAX - 1, usize::MAX, usize::MAX),
            "accepted",
        ),
    ] {
        assert_eq!(field(routed(Routing::new().subset(s))), f, "{s:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn documented_bounds_work_on_the_first_request() {
    // The largest accepted values: a year-long timeout, a maximal weight
    // next to a tiny one, an enormous spread factor, an unbounded cap.
    let year = Duration::from_secs(365 * 24 * 3600);
    let lb = Balance::builder()
        .weighted_endpoint("a", echo(), f64::MAX)
        .weighted_endpoint("b", echo(), f64::MIN_POSITIVE)
        .picker(PeakEwma::new().spread_factor(f64::MAX).choices(16))
        .timeout(year)
        .decay(year)
        .sample_decay(year)
        .failure_decay(year)
        .default_rtt(year)
        .failure_penalty(year)
        .max_in_flight(usize::MAX)
        .build()
        .unwrap();
    for i in 0..20 {
        assert_eq!(lb.clone().oneshot(i).await.unwrap(), i);
    }
    // The largest subset and factor, on the first request.
    let routed = balance()
        .routing(
            tower_lb::route::Routing::new()
                .overprovisioning_factor(100.0)
                .subset(tower_lb::route::Subset::new(
                    usize::MAX - 1,
                    usize::MAX,
                    usize::MAX,
                )),
        )
        .build()
        .unwrap();
    assert_eq!(routed.oneshot(3).await.unwrap(), 3);
    let retry = RetryLayer::builder()
        .replay(CloneRequest)
        .per_try_timeout(year)
        .deadline(year)
        .max_retry_after(Duration::from_secs(3600))
        .backoff(Backoff::new(
            Duration::from_nanos(1),
            Duration::from_secs(3600),
        ))
        .hedge(Hedge::fixed(year).max_delay(year))
        .budget(Budget::new(Duration::from_secs(60), 1_000_000, 1.0).unwrap())
        .max_attempts(10)
        .build()
        .unwrap();
    let svc = retry.layer(lb);
    assert_eq!(svc.oneshot(7).await.unwrap(), 7);
}

#[test]
fn retry_builder_extremes() {
    let b = || RetryLayer::builder().replay(CloneRequest);
    for n in [0, 11, u32::MAX] {
        assert_eq!(field(b().max_attempts(n).build()), "max_attempts", "{n}");
    }
    for d in [ZERO, MAX, YEAR_AND_A_DAY] {
        assert_eq!(field(b().per_try_timeout(d).build()), "per_try_timeout");
        assert_eq!(field(b().deadline(d).build()), "deadline");
        assert_eq!(field(b().hedge(Hedge::fixed(d)).build()), "hedge.delay");
    }
    assert_eq!(field(b().max_retry_after(MAX).build()), "max_retry_after");
    assert_eq!(
        field(b().backoff(Backoff::new(ZERO, ZERO)).build()),
        "backoff.base"
    );
    assert_eq!(
        field(
            b().backoff(Backoff::new(Duration::from_secs(1), MAX))
                .build()
        ),
        "backoff.cap"
    );
    for p in [f64::NAN, f64::INFINITY, 0.0, -0.5, 1.5] {
        assert_eq!(
            field(b().hedge(Hedge::percentile(p)).build()),
            "hedge.percentile"
        );
    }
    let p = || Hedge::percentile(0.95);
    assert_eq!(
        field(b().hedge(p().min_delay(ZERO)).build()),
        "hedge.min_delay"
    );
    assert_eq!(
        field(b().hedge(p().max_delay(MAX)).build()),
        "hedge.max_delay"
    );
    for (ttl, min, ratio, f) in [
        (ZERO, 10, 0.2, "budget.ttl"),
        (MAX, 10, 0.2, "budget.ttl"),
        (Duration::from_secs(10), u32::MAX, 0.2, "budget.min_per_sec"),
        (Duration::from_secs(10), 10, f64::NAN, "budget.ratio"),
        (Duration::from_secs(10), 10, f64::INFINITY, "budget.ratio"),
        (Duration::from_secs(10), 10, -1.0, "budget.ratio"),
    ] {
        assert_eq!(
            field(Budget::new(ttl, min, ratio)),
            f,
            "{ttl:?} {min} {ratio}"
        );
    }
}

#[test]
fn breaker_builder_extremes() {
    let b = CircuitBreakerConfig::builder;
    for p in [f64::NAN, f64::INFINITY, 0.0, -1.0, 100.5] {
        assert_eq!(
            field(b().failure_rate_threshold(p).build()),
            "failure_rate_threshold"
        );
        assert_eq!(
            field(b().slow_call_rate_threshold(p).build()),
            "slow_call_rate_threshold"
        );
    }
    for d in [ZERO, MAX, YEAR_AND_A_DAY] {
        assert_eq!(
            field(b().slow_call_duration(d).build()),
            "slow_call_duration"
        );
        assert_eq!(field(b().open_wait(d).build()), "open_wait");
        assert_eq!(field(b().half_open_timeout(d).build()), "half_open_timeout");
        assert_eq!(field(b().time_window(d).build()), "time_window");
    }
    assert_eq!(field(b().open_wait_cap(MAX).build()), "open_wait_cap");
    assert_eq!(field(b().count_window(0).build()), "count_window");
    assert_eq!(field(b().count_window(usize::MAX).build()), "count_window");
    assert_eq!(field(b().minimum_calls(0).build()), "minimum_calls");
    assert_eq!(
        field(b().consecutive_failures(0).build()),
        "consecutive_failures"
    );
    assert_eq!(field(b().half_open_probes(0).build()), "half_open_probes");
    assert_eq!(
        field(b().half_open_probes(u32::MAX).build()),
        "half_open_probes"
    );
}

#[test]
fn outlier_builder_extremes() {
    let b = OutlierDetection::builder;
    for d in [ZERO, MAX, Duration::from_secs(3601)] {
        assert_eq!(field(b().interval(d).build()), "outlier.interval", "{d:?}");
    }
    for d in [ZERO, MAX, Duration::from_secs(86_401)] {
        assert_eq!(
            field(b().base_ejection_time(d).build()),
            "outlier.base_ejection_time"
        );
    }
    assert_eq!(
        field(b().max_ejection_time(MAX).build()),
        "outlier.max_ejection_time"
    );
    assert_eq!(
        field(b().max_ejection_jitter(MAX).build()),
        "outlier.max_ejection_jitter"
    );
    assert_eq!(
        field(b().max_ejection_percent(101).build()),
        "outlier.max_ejection_percent"
    );
    assert_eq!(
        field(b().consecutive_failures(Some(Consecutive::new(0))).build()),
        "outlier.consecutive_failures.threshold"
    );
    assert_eq!(
        field(
            b().consecutive_local_origin_failures(Some(Consecutive::new(3).enforcing_percent(101)))
                .build()
        ),
        "outlier.consecutive_local_origin_failures.enforcing_percent"
    );
    for k in [f64::NAN, f64::INFINITY, -1.0] {
        let r = b()
            .success_rate(Some(SuccessRate::default().stdev_factor(k)))
            .build();
        assert_eq!(field(r), "outlier.success_rate.stdev_factor", "{k}");
        let r = b()
            .latency(Some(LatencyOutlier::default().factor(k)))
            .build();
        assert_eq!(field(r), "outlier.latency.factor", "{k}");
    }
    // The bounds themselves are accepted.
    assert_eq!(
        field(
            b().interval(Duration::from_secs(3600))
                .base_ejection_time(Duration::from_secs(86_400))
                .max_ejection_time(Duration::from_secs(86_400))
                .max_ejection_jitter(Duration::from_secs(365 * 24 * 3600))
                .build()
        ),
        "accepted"
    );
}

#[test]
fn http_value_extremes() {
    use tower_lb::http::Classifier;
    assert_eq!(
        field(Classifier::new().slow_threshold(ZERO)),
        "slow_threshold"
    );
    assert_eq!(
        field(Classifier::new().slow_threshold(MAX)),
        "slow_threshold"
    );
    assert_eq!(
        field(Classifier::new().max_retry_after(MAX)),
        "max_retry_after"
    );
    let dns = |f: fn(tower_lb::discover::dns::Builder) -> tower_lb::discover::dns::Builder| {
        field(f(tower_lb::discover::dns::Dns::builder("h", 80)).build())
    };
    assert_eq!(dns(|b| b.interval(ZERO)), "dns.interval");
    assert_eq!(dns(|b| b.interval(MAX)), "dns.interval");
    assert_eq!(dns(|b| b.timeout(MAX)), "dns.timeout");
}

#[test]
fn load_report_and_adaptive_limit_extremes() {
    use tower_lb::endpoint::AdaptiveConcurrency;
    use tower_lb::pick::OrcaRoundRobin;
    // Reports: the expiry is > 0 and at most a year.
    for d in [ZERO, YEAR_AND_A_DAY, MAX] {
        assert_eq!(
            field(balance().load_report_expiry(d).build()),
            "load_report_expiry",
            "{d:?}"
        );
    }
    // A58's picker: blackout and update period at most a year (0 is
    // allowed: weights at once; update periods under 100 ms are raised to
    // it), the error penalty finite and >= 0.
    let orca = |p: OrcaRoundRobin| field(balance().picker(p).build());
    for d in [YEAR_AND_A_DAY, MAX] {
        assert_eq!(
            orca(OrcaRoundRobin::new().blackout_period(d)),
            "blackout_period"
        );
        assert_eq!(
            orca(OrcaRoundRobin::new().weight_update_period(d)),
            "weight_update_period"
        );
    }
    for k in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0] {
        assert_eq!(
            orca(OrcaRoundRobin::new().error_penalty(k)),
            "error_penalty",
            "{k}"
        );
    }
    assert_eq!(
        orca(
            OrcaRoundRobin::new()
                .blackout_period(ZERO)
                .weight_update_period(ZERO)
                .error_penalty(0.0)
        ),
        "accepted"
    );
    // PeakEwma's utilization fade: > 0 and at most a year.
    for d in [ZERO, MAX] {
        let p = PeakEwma::default().utilization(true).utilization_fade(d);
        assert_eq!(field(balance().picker(p).build()), "utilization_fade");
    }
    // Adaptive limits.
    let limits = |a: AdaptiveConcurrency| field(balance().adaptive_concurrency(a).build());
    let a = AdaptiveConcurrency::new;
    for k in BAD_F64 {
        assert_eq!(
            limits(a().tolerance(k)),
            "adaptive_concurrency.tolerance",
            "{k}"
        );
        assert_eq!(
            limits(a().smoothing(k)),
            "adaptive_concurrency.smoothing",
            "{k}"
        );
    }
    for k in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 1.5] {
        assert_eq!(limits(a().growth(k)), "adaptive_concurrency.growth", "{k}");
    }
    assert_eq!(limits(a().tolerance(0.5)), "adaptive_concurrency.tolerance");
    assert_eq!(
        limits(a().tolerance(101.0)),
        "adaptive_concurrency.tolerance"
    );
    assert_eq!(limits(a().smoothing(1.5)), "adaptive_concurrency.smoothing");
    assert_eq!(limits(a().min_limit(0)), "adaptive_concurrency.min_limit");
    assert_eq!(
        limits(a().max_limit(usize::MAX)),
        "adaptive_concurrency.max_limit"
    );
    assert_eq!(
        limits(a().min_limit(10).max_limit(5)),
        "adaptive_concurrency.max_limit"
    );
    assert_eq!(
        limits(a().initial_limit(0)),
        "adaptive_concurrency.initial_limit"
    );
    assert_eq!(
        limits(a().initial_limit(usize::MAX)),
        "adaptive_concurrency.initial_limit"
    );
    // The documented bounds themselves are accepted.
    assert_eq!(
        limits(
            a().min_limit(1)
                .max_limit(tower_lb::endpoint::MAX_LIMIT)
                .initial_limit(tower_lb::endpoint::MAX_LIMIT)
                .tolerance(100.0)
                .growth(0.0)
                .smoothing(1.0)
        ),
        "accepted"
    );
    assert_eq!(limits(a().tolerance(1.0).growth(1.0)), "accepted");
}

#[test]
fn a_detached_completions_latency_is_kept_in_nanoseconds() {
    use tower_lb::classify::Outcome;
    use tower_lb::endpoint::Completion;
    let at = |d: Duration| Completion::detached(Outcome::Success, d).latency();
    for d in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(250),
        Duration::new(86_400, 999_999_999),
        Duration::from_nanos(u64::MAX),
    ] {
        assert_eq!(at(d), d, "kept as it was");
    }
    // Beyond u64::MAX ns (about 584 years): the documented bound, no panic.
    assert_eq!(at(MAX), Duration::from_nanos(u64::MAX));
    assert_eq!(
        at(Duration::from_nanos(u64::MAX) + Duration::from_nanos(1)),
        Duration::from_nanos(u64::MAX)
    );
}
