use super::*;

#[test]
fn every_bad_setting_names_its_field() {
    let field = |c: AdaptiveConcurrency| c.validate().map_err(|e| e.field()).err();
    let c = AdaptiveConcurrency::new();
    assert_eq!(field(c), None);
    assert_eq!(
        field(c.min_limit(0)),
        Some("adaptive_concurrency.min_limit")
    );
    assert_eq!(
        field(c.max_limit(0)),
        Some("adaptive_concurrency.max_limit")
    );
    assert_eq!(
        field(c.max_limit(MAX_LIMIT + 1)),
        Some("adaptive_concurrency.max_limit")
    );
    assert_eq!(
        field(c.initial_limit(1001)),
        Some("adaptive_concurrency.initial_limit")
    );
    for t in [f64::NAN, f64::INFINITY, 0.5, 101.0] {
        assert_eq!(
            field(c.tolerance(t)),
            Some("adaptive_concurrency.tolerance")
        );
    }
    for g in [f64::NAN, -0.1, 1.5] {
        assert_eq!(field(c.growth(g)), Some("adaptive_concurrency.growth"));
    }
    for s in [f64::NAN, 0.0, 1.5] {
        assert_eq!(
            field(c.smoothing(s)),
            Some("adaptive_concurrency.smoothing")
        );
    }
}

/// A scripted latency series: the limit rises while latency stays at
/// the floor, falls once it doubles, and rises again after.
#[test]
fn rises_near_the_floor_and_falls_with_queueing() {
    let cfg = AdaptiveConcurrency::new();
    let l = Limit::new(Some(&cfg));
    let floor = 50e6;
    let mut seen = vec![l.get()];
    let mut run = |latency: f64, n: usize, l: &Limit| {
        for _ in 0..n {
            let busy = l.get() as usize; // the caller fills the limit
            l.observe(&cfg, latency, floor, busy);
        }
        seen.push(l.get());
    };
    run(50e6, 50, &l);
    run(60e6, 50, &l); // within the 1.25 tolerance: still rising
    run(100e6, 50, &l); // 2x the floor: queueing
    run(50e6, 50, &l);
    assert!(seen[1] > seen[0] * 2.0, "{seen:?}");
    assert!(seen[2] > seen[1], "{seen:?}");
    assert!(seen[3] < seen[2] / 2.0, "{seen:?}");
    assert!(seen[4] > seen[3] * 2.0, "{seen:?}");
}

#[test]
fn settles_where_latency_is_tolerance_times_growth_above_the_floor() {
    // A 16-worker endpoint at 50 ms behind one caller that always has
    // `limit` requests in flight: latency = 50 ms · max(1, limit / 16).
    let cfg = AdaptiveConcurrency::new();
    let l = Limit::new(Some(&cfg));
    for _ in 0..2000 {
        let k = l.get();
        l.observe(&cfg, 50e6 * (k / 16.0).max(1.0), 50e6, k as usize);
    }
    let want = 16.0 * DEFAULT_TOLERANCE * (1.0 + DEFAULT_GROWTH);
    assert!((l.get() - want).abs() < 1.0, "{} vs {want}", l.get());
}

#[test]
fn does_not_grow_when_app_limited_and_stays_in_bounds() {
    let cfg = AdaptiveConcurrency::new().min_limit(2).max_limit(30);
    let l = Limit::new(Some(&cfg));
    for _ in 0..100 {
        l.observe(&cfg, 50e6, 50e6, 1);
    }
    assert_eq!(l.get(), 20.0);
    for _ in 0..100 {
        l.observe(&cfg, 50e6, 50e6, 30);
    }
    assert_eq!(l.get(), 30.0);
    for _ in 0..100 {
        l.dropped(&cfg);
    }
    assert_eq!(l.get(), 2.0);
    l.observe(&cfg, 50e6, f64::INFINITY, 30);
    l.observe(&cfg, f64::NAN, 50e6, 30);
    assert_eq!(l.get(), 2.0);
    assert_eq!(Limit::new(None).get(), f64::INFINITY);
}

#[test]
fn an_app_limited_caller_keeps_its_limit_through_latency_noise() {
    // One call at a time, latency jittering to 3x the floor: the limit
    // does not bind, so it does not move; drops still cut it.
    let cfg = AdaptiveConcurrency::new();
    let l = Limit::new(Some(&cfg));
    for i in 0..1000 {
        let latency = if i % 2 == 0 { 150e3 } else { 50e3 };
        l.observe(&cfg, latency, 50e3, 1);
    }
    assert_eq!(l.get(), 20.0);
    l.dropped(&cfg);
    assert_eq!(l.get(), 18.0);
}
