use super::probe::PROBE_MISSES;
use super::*;

const TAU: f64 = 10e9;
/// No floor latency known: no excess fades.
const NO_FLOOR: Floor = Floor::UNKNOWN;

const RATES: Rates = Rates {
    latency: 1.0 / TAU,
    failure: 1.0 / 2e9,
    sample: 1.0 / TAU,
    penalty: 1e9,
};

#[test]
fn abandoned_calls_only_raise_the_estimate() {
    let e = Ewma::new(30e6, 0);
    e.observe(50e6, false, 0, RATES, NO_FLOOR);
    // Cut after 10 ms: no news.
    e.observe_lower_bound(10e6, 1_000, RATES, NO_FLOOR);
    assert!((e.read(1_000, RATES).est - 50e6).abs() < 1e3);
    // Cut after 1 s: it takes at least that long.
    e.observe_lower_bound(1e9, 2_000, RATES, NO_FLOOR);
    assert!((e.read(2_000, RATES).est - 1e9).abs() < 1e3);
}

#[test]
fn first_sample_replaces_the_default() {
    let e = Ewma::new(30e6, 0);
    assert_eq!(e.read(0, RATES).spread, 0.0);
    e.observe(1e6, false, 1_000, RATES, NO_FLOOR);
    let r = e.read(1_000, RATES);
    assert!((r.est - 1e6).abs() < 1.0, "{}", r.est);
    assert_eq!(r.spread, 0.0);
    // From then on, lower samples only pull it down with time.
    e.observe(0.0, false, 2_000, RATES, NO_FLOOR);
    assert!(e.read(2_000, RATES).est > 0.99e6);
}

#[test]
fn peak_replaces_at_once() {
    let e = Ewma::new(30e6, 0);
    e.observe(500e6, false, 1_000, RATES, NO_FLOOR);
    let est = e.read(1_000, RATES).est;
    assert!((est - 500e6).abs() < 1e3, "{est}");
}

#[test]
fn lower_samples_pull_down_with_time_weight() {
    let e = Ewma::new(30e6, 0);
    e.observe(100e6, false, 0, RATES, NO_FLOOR);
    // One τ later (still current for a 50 ms sample), a 50 ms sample:
    // est = 100 ms · e^-1 + 50 ms · (1 − e^-1).
    e.observe(50e6, false, 10_000_000_000, RATES, NO_FLOOR);
    let r = e.read(10_000_000_000, RATES);
    let (est, spread) = (r.est, r.spread);
    let w = (-1f64).exp();
    assert!((est - (100e6 * w + 50e6 * (1.0 - w))).abs() < 1e3, "{est}");
    assert!((spread - 50e6 * (1.0 - w)).abs() < 1e3);
}

#[test]
fn samples_follow_the_sample_decay_and_idleness_the_decay() {
    // Samples blend with τₛ = 1 s, idleness fades with τ = 10 s.
    let rates = Rates {
        sample: 1.0 / 1e9,
        ..RATES
    };
    let e = Ewma::new(30e6, 0);
    e.observe(100e6, false, 0, rates, NO_FLOOR);
    // One τₛ later, a 50 ms sample: weight e^-1, not e^-0.1.
    e.observe(50e6, false, 1_000_000_000, rates, NO_FLOOR);
    let est = e.read(1_000_000_000, rates).est;
    let w = (-1f64).exp();
    assert!((est - (100e6 * w + 50e6 * (1.0 - w))).abs() < 1e3, "{est}");
    // Ten seconds without a sample: one τ of fading, not ten of τₛ.
    let idle = e.read(11_000_000_000, rates).est;
    assert!((idle - est * (-1f64).exp()).abs() < 1e3, "{idle}");
}

#[test]
fn read_projects_decay_without_mutating() {
    let e = Ewma::new(100e6, 0);
    let a = e.read(20_000_000_000, RATES).est;
    assert!((a - 100e6 * (-2f64).exp()).abs() < 1e3);
    // Reading again at an earlier time gives the undecayed value back.
    let b = e.read(0, RATES).est;
    assert!((b - 100e6).abs() < 1.0);
}

#[test]
fn failures_never_lower_the_estimate_and_raise_the_ratio() {
    let e = Ewma::new(30e6, 0);
    e.observe(100e6, false, 0, RATES, NO_FLOOR);
    // A 1 ms failure one τ_f later: the estimate does not move down
    // (it is not even decayed: a failure is no evidence of speed).
    e.observe(1e6, true, 2_000_000_000, RATES, NO_FLOOR);
    let r = e.read(2_000_000_000, RATES);
    assert!((r.est - 100e6).abs() < 1e3, "{}", r.est);
    assert!(
        (r.failure - (1.0 - (-1f64).exp())).abs() < 1e-6,
        "{}",
        r.failure
    );
    // Idle for another τ_f: the ratio is forgiven by a factor e.
    let later = e.read(4_000_000_000, RATES);
    assert!((later.failure - r.failure * (-1f64).exp()).abs() < 1e-6);
    // Time-weighted: a success after Δt weighs what Δt of idleness
    // does, and a failure then pulls the ratio back up.
    e.observe(50e6, false, 4_000_000_000, RATES, NO_FLOOR);
    let after = e.read(4_000_000_000, RATES).failure;
    assert!((after - later.failure).abs() < 1e-12);
    e.observe(50e6, true, 6_000_000_000, RATES, NO_FLOOR);
    assert!(e.read(6_000_000_000, RATES).failure > after);
}

/// The default rates: τ 10 s, τ_f 2 s, τₛ 1 s.
const DEFAULTS: Rates = Rates {
    latency: 1.0 / 10e9,
    failure: 1.0 / 2e9,
    sample: 1.0 / 1e9,
    penalty: 1e9,
};

#[test]
fn a_failed_endpoint_is_due_a_probe_after_one_and_a_half_failure_constants() {
    let e = Ewma::new(30e6, 0);
    e.observe(1e6, false, 0, DEFAULTS, NO_FLOOR);
    // A failure leaves the 1 s penalty (`EndpointState::record` sends it).
    e.observe(1e9, true, 1_000_000_000, DEFAULTS, NO_FLOOR);
    let at = |dt: f64| e.read_idle(1_000_000_000 + (dt * 1e9) as u64, DEFAULTS, NO_FLOOR);
    assert!(!at(0.0).due);
    assert!(!at(2.999).due);
    let due = at(3.0);
    assert!(due.due);
    // The reading a picker sees then: the floor faded like an idle
    // endpoint's for 3 s, nothing forgiven left to pay.
    let r = due.probe(1e6);
    assert!((r.est - 1e6 * (-0.3f64).exp()).abs() < 1.0, "{}", r.est);
    assert_eq!((r.spread, r.weight, r.failure), (0.0, 1.0, 0.0));
    // Never above what the fade alone gives: a slow floor keeps the
    // (lower) faded penalty.
    assert!(due.probe(10e9).est <= due.est * due.weight);
}

#[test]
fn a_retry_after_longer_than_the_wait_is_honoured() {
    let e = Ewma::new(30e6, 0);
    // A 10 s penalty (a `Retry-After: 10`): due after 10 s, not 3.
    e.observe(10e9, true, 0, DEFAULTS, NO_FLOOR);
    assert!(!e.read_idle(9_999_000_000, DEFAULTS, NO_FLOOR).due);
    assert!(e.read_idle(10_000_000_000, DEFAULTS, NO_FLOOR).due);
}

#[test]
fn the_probes_answer_decides() {
    let e = Ewma::new(30e6, 0);
    e.observe(1e6, false, 0, DEFAULTS, NO_FLOOR);
    e.observe(1e9, true, 0, DEFAULTS, NO_FLOOR);
    let probe = 4_000_000_000;
    // A success replaces the stale penalty outright: no blend with it.
    e.observe(2e6, false, probe, DEFAULTS, NO_FLOOR);
    let r = e.read(probe, DEFAULTS);
    assert!((r.est - 2e6).abs() < 1.0, "{}", r.est);
    assert!(!e.read_idle(probe + 10_000_000_000, DEFAULTS, NO_FLOOR).due);
    // A failure restarts the wait.
    e.observe(1e9, true, probe, DEFAULTS, NO_FLOOR);
    assert!(!e.read_idle(probe + 2_000_000_000, DEFAULTS, NO_FLOOR).due);
    assert!(e.read_idle(probe + 3_000_000_000, DEFAULTS, NO_FLOOR).due);
}

#[test]
fn a_success_before_the_probe_blends_as_before() {
    // A busy endpoint's success microseconds after a failure is no probe.
    let e = Ewma::new(30e6, 0);
    e.observe(1e6, false, 0, DEFAULTS, NO_FLOOR);
    e.observe(1e9, true, 1_000, DEFAULTS, NO_FLOOR);
    e.observe(1e6, false, 2_000, DEFAULTS, NO_FLOOR);
    assert!(e.read(2_000, DEFAULTS).est > 0.99e9);
}

/// The estimate a reader sees after `idle_ns` without a sample.
fn seen(e: &Ewma, now_ns: u64, floor_ns: f64) -> f64 {
    let r = e.read_idle(now_ns, DEFAULTS, Floor::of(floor_ns));
    r.est * r.weight
}

#[test]
fn an_idle_estimates_excess_over_its_floor_fades_in_floors() {
    let long = |idle: f64| (-idle / 10e9).exp();
    // The excess's share left after `idle` when it fades within `fade`:
    // a line to zero, at the rate over the idle fade's (which the reader
    // applies to the whole estimate).
    let line = |idle: f64, fade: f64| (1.0 - idle * (1.0 / fade - 1.0 / 10e9)).max(0.0);
    // (floor, estimate, idle, what a reader sees): the excess over the
    // floor fades within 1000 floors (10 ms at least, the idle τ at most),
    // the floor itself with the idle τ (10 s).
    let cases: [(f64, f64, f64, f64); 9] = [
        // A 5 ms hiccup on a 100 µs replica: gone within 100 ms.
        (100e3, 5e6, 0.0, 5e6),
        (
            100e3,
            5e6,
            50e6,
            (100e3 + 4.9e6 * line(50e6, 100e6)) * long(50e6),
        ),
        (
            100e3,
            5e6,
            99e6,
            (100e3 + 4.9e6 * line(99e6, 100e6)) * long(99e6),
        ),
        (100e3, 5e6, 1e9, 100e3 * long(1e9)),
        // A floor of 0 (answers within the clock's tick): within 10 ms.
        (0.0, 1e6, 5e6, 1e6 * line(5e6, 10e6) * long(5e6)),
        (0.0, 1e6, 11e6, 0.0),
        // A 10 ms replica: 1000 floors is the idle τ, nothing changes.
        (10e6, 40e6, 5e9, 40e6 * long(5e9)),
        // An estimate at or below its floor only fades with the idle τ.
        (1e6, 1e6, 1e9, 1e6 * long(1e9)),
        (2e6, 1e6, 1e9, 1e6 * long(1e9)),
    ];
    for (floor, est, idle, want) in cases {
        let e = Ewma::new(30e6, 0);
        e.observe(est, false, 0, DEFAULTS, Floor::of(floor));
        let got = seen(&e, idle as u64, floor);
        assert!(
            (got - want).abs() <= want * 1e-5 + 1.0,
            "floor {floor}, est {est}, idle {idle}: {got} != {want}"
        );
    }
}

proptest::proptest! {
    /// However long it idles, an estimate's excess only falls, and never
    /// takes the estimate below its floor (or above what it was).
    #[test]
    fn the_excess_fade_only_falls_and_stops_at_the_floor(
        floor in 0.0f64..1e9,
        est in 0.0f64..1e10,
        a in 0u64..100_000_000_000,
        b in 0u64..100_000_000_000,
    ) {
        let (early, late) = (a.min(b), a.max(b));
        let at = |dt| fade_excess(est, Floor::of(floor), dt, 1.0 / TAU);
        proptest::prop_assert!(at(late) <= at(early));
        // Within rounding: floor + (est − floor) is est to the last bit.
        proptest::prop_assert!(at(early) <= est * (1.0 + 1e-15));
        proptest::prop_assert!(at(late) >= est.min(floor));
    }
}

#[test]
fn a_sample_after_idling_blends_into_the_faded_estimate() {
    // A 5 ms hiccup on a 100 µs replica, then a second without a call:
    // the next 100 µs sample finds about its floor, not the hiccup.
    let e = Ewma::new(30e6, 0);
    e.observe(100e3, false, 0, DEFAULTS, Floor::of(100e3));
    e.observe(5e6, false, 1_000, DEFAULTS, Floor::of(100e3));
    e.observe(100e3, false, 1_000_001_000, DEFAULTS, Floor::of(100e3));
    let est = seen(&e, 1_000_001_000, 100e3);
    assert!((est - 100e3).abs() < 1e3, "{est}");
}

#[test]
fn a_failure_keeps_its_penalty_on_the_failure_clock() {
    let e = Ewma::new(30e6, 0);
    e.observe(100e3, false, 0, DEFAULTS, Floor::of(100e3));
    e.observe(1e9, true, 1_000, DEFAULTS, Floor::of(100e3));
    // 100 ms later: the penalty has faded on τ_f = 2 s only.
    let r = e.read_idle(100_001_000, DEFAULTS, Floor::of(100e3));
    assert!((r.est * r.weight - 1e9 * (-0.05f64).exp()).abs() < 1e3);
}

#[test]
fn under_load_a_failed_endpoint_is_probed_after_half_a_second() {
    // (misses counted, penalty left, ms since the failure, due)
    let cases = [
        (0, 1e9, 2_999, false),
        (0, 1e9, 3_000, true),
        (PROBE_MISSES - 1, 1e9, 1_000, false),
        (PROBE_MISSES, 1e9, 499, false),
        (PROBE_MISSES, 1e9, 500, true),
        (PROBE_MISSES + 10, 1e9, 500, true),
        // A `Retry-After` (a penalty above the plain one) is honoured.
        (PROBE_MISSES, 10e9, 3_000, false),
        (PROBE_MISSES, 10e9, 10_000, true),
    ];
    for (misses, penalty, ms, due) in cases {
        let e = Ewma::new(30e6, 0);
        e.observe(1e6, false, 0, DEFAULTS, Floor::of(1e6));
        e.observe(penalty, true, 0, DEFAULTS, Floor::of(1e6));
        for _ in 0..misses {
            e.miss();
        }
        let r = e.read_idle(ms * 1_000_000, DEFAULTS, Floor::of(1e6));
        assert_eq!(r.due, due, "{misses} misses, penalty {penalty}, {ms} ms");
        assert_eq!(r.waiting, !due);
    }
}

#[test]
fn misses_count_only_while_failed_and_restart_with_each_sample() {
    let e = Ewma::new(30e6, 0);
    e.observe(1e6, false, 0, DEFAULTS, Floor::of(1e6));
    for _ in 0..PROBE_MISSES {
        e.miss();
    }
    e.observe(1e9, true, 1_000, DEFAULTS, Floor::of(1e6));
    // Misses before the failure do not count.
    assert!(!e.read_idle(600_000_000, DEFAULTS, Floor::of(1e6)).due);
    for _ in 0..PROBE_MISSES {
        e.miss();
    }
    assert!(e.read_idle(600_000_000, DEFAULTS, Floor::of(1e6)).due);
    // A new failure restarts the count.
    e.observe(1e9, true, 2_000, DEFAULTS, Floor::of(1e6));
    assert!(!e.read_idle(600_000_000, DEFAULTS, Floor::of(1e6)).due);
}

#[test]
fn a_stale_estimate_is_replaced_by_the_next_sample() {
    // (estimate, sample, seconds since the estimate, replaced): stale after
    // 1000 of the sample's latencies, 10 ms at least.
    let cases = [
        (5e6, 100e3, 0.099, false),
        (5e6, 100e3, 0.1, true),
        (100e6, 10e6, 9.9, false),
        (100e6, 10e6, 10.0, true),
        (1e6, 0.0, 0.01, true),
    ];
    for (est, x, secs, replaced) in cases {
        let e = Ewma::new(30e6, 0);
        e.observe(est, false, 0, RATES, NO_FLOOR);
        let at = (secs * 1e9) as u64;
        e.observe(x, false, at, RATES, NO_FLOOR);
        let got = e.read(at, RATES).est;
        assert_eq!(
            (got - x).abs() < 1.0,
            replaced,
            "{est} then {x} after {secs} s: {got}"
        );
    }
}

#[test]
fn the_answer_to_a_probe_forgives_the_failures_before_it() {
    let e = Ewma::new(30e6, 0);
    e.observe(1e6, false, 0, DEFAULTS, Floor::of(1e6));
    // A failure every 100 ms for 2 s.
    for t in 1..=20 {
        e.observe(1e9, true, t * 100_000_000, DEFAULTS, Floor::of(1e6));
    }
    let before = e.read(5_000_000_000, DEFAULTS).failure;
    assert!(before > 0.1, "{before}");
    // The probe (due 3 s after the last failure) answers.
    e.observe(1e6, false, 5_000_000_000, DEFAULTS, Floor::of(1e6));
    assert_eq!(e.read(5_000_000_000, DEFAULTS).failure, 0.0);
    // A success that is no probe (microseconds after a failure) blends.
    let f = Ewma::new(30e6, 0);
    f.observe(1e9, true, 1_000_000_000, DEFAULTS, Floor::of(1e6));
    f.observe(1e6, false, 1_000_001_000, DEFAULTS, Floor::of(1e6));
    assert!(f.read(1_000_001_000, DEFAULTS).failure > 0.3);
}
