//! Outlier detection: each rule ejects the host it should and no other;
//! ejection times, caps, jitter and decay; the ejection limit; config errors.
//!
//! Time is driven by hand (`now_ns`): the detector has no clock.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tower_lb::classify::{FailureKind, Outcome};
use tower_lb::outlier::{
    self, Consecutive, Detector, EjectionReason, FailurePercentage, HostStats, LatencyOutlier,
    OutlierDetection, SuccessRate, max_ejections,
};

const SEC: u64 = 1_000_000_000;
const MS: Duration = Duration::from_millis(1);

const ERR: Outcome = Outcome::Failure(FailureKind::Error);
const GATEWAY: Outcome = Outcome::Failure(FailureKind::Gateway { retry_after: None });
const OK: Outcome = Outcome::Success;

fn pool(n: usize) -> Vec<HostStats> {
    (0..n).map(|_| HostStats::default()).collect()
}

/// A builder with every rule off and no jitter, so each test turns on what
/// it exercises.
fn none() -> outlier::Builder {
    OutlierDetection::builder()
        .max_ejection_jitter(Duration::ZERO)
        .consecutive_failures(None)
        .consecutive_gateway_failures(None)
        .success_rate(None)
        .failure_percentage(None)
        .latency(None)
}

/// Feeds `count` outcomes of one kind to `pool[i]` at `now`.
#[allow(clippy::too_many_arguments)]
fn feed(
    d: &Detector,
    cfg: &OutlierDetection,
    pool: &[HostStats],
    i: usize,
    outcome: Outcome,
    count: usize,
    latency: Duration,
    now: u64,
) -> Option<EjectionReason> {
    let mut last = None;
    for k in 0..count {
        last = last.or(d.on_response(cfg, pool, i, outcome, latency, now, k as u64));
    }
    last
}

fn ejected(pool: &[HostStats], now: u64) -> Vec<usize> {
    (0..pool.len())
        .filter(|&i| pool[i].is_ejected(now))
        .collect()
}

// ---------------------------------------------------------------- rules

#[test]
fn consecutive_failures_eject_the_failing_host_only() {
    let cfg = none()
        .consecutive_failures(Some(Consecutive::new(5)))
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(10));
    // Four failures, a success, four more: the streak never reaches 5.
    assert_eq!(feed(&d, &cfg, &p, 3, ERR, 4, MS, 0), None);
    feed(&d, &cfg, &p, 3, OK, 1, MS, 0);
    assert_eq!(feed(&d, &cfg, &p, 3, ERR, 4, MS, 0), None);
    assert_eq!(p[3].consecutive_failures(), 4);
    assert!(ejected(&p, 1).is_empty());
    // Other hosts' failures do not count toward host 3.
    feed(&d, &cfg, &p, 4, ERR, 3, MS, 0);
    assert_eq!(
        d.on_response(&cfg, &p, 3, ERR, MS, 0, 0),
        Some(EjectionReason::ConsecutiveFailures)
    );
    assert_eq!(ejected(&p, 1), vec![3]);
    assert_eq!(p[3].consecutive_failures(), 0, "streak resets on ejection");
    assert_eq!(p[3].ejections(EjectionReason::ConsecutiveFailures), 1);
    assert_eq!(d.ejections(EjectionReason::ConsecutiveFailures), 1);
    assert_eq!(d.total_ejections(), 1);
}

#[test]
fn consecutive_gateway_failures_count_gateway_connect_and_timeout() {
    let cfg = none()
        .consecutive_gateway_failures(Some(Consecutive::new(3)))
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(10));
    let connect = Outcome::Failure(FailureKind::Connect);
    let timeout = Outcome::Failure(FailureKind::Timeout);
    // A generic error breaks a gateway streak.
    feed(&d, &cfg, &p, 1, GATEWAY, 2, MS, 0);
    feed(&d, &cfg, &p, 1, ERR, 1, MS, 0);
    assert_eq!(p[1].consecutive_gateway_failures(), 0);
    assert_eq!(p[1].consecutive_failures(), 3);
    assert!(
        ejected(&p, 1).is_empty(),
        "consecutive-failures rule is off"
    );
    feed(&d, &cfg, &p, 1, GATEWAY, 1, MS, 0);
    feed(&d, &cfg, &p, 1, connect, 1, MS, 0);
    assert_eq!(
        d.on_response(&cfg, &p, 1, timeout, MS, 0, 0),
        Some(EjectionReason::ConsecutiveGatewayFailures)
    );
    assert_eq!(ejected(&p, 1), vec![1]);
}

#[test]
fn gateway_reason_wins_when_both_consecutive_rules_trip() {
    let cfg = OutlierDetection::default();
    let (d, p) = (Detector::new(), pool(10));
    assert_eq!(
        feed(&d, &cfg, &p, 0, GATEWAY, 5, MS, 0),
        Some(EjectionReason::ConsecutiveGatewayFailures)
    );
    assert_eq!(d.ejections(EjectionReason::ConsecutiveFailures), 0);
}

#[test]
fn slow_overloaded_and_ignored_calls_never_eject() {
    let cfg = OutlierDetection::default();
    let (d, p) = (Detector::new(), pool(10));
    let slow = Outcome::Failure(FailureKind::Slow);
    let shed = Outcome::Failure(FailureKind::Overloaded { retry_after: None });
    assert_eq!(feed(&d, &cfg, &p, 0, slow, 100, MS, 0), None);
    assert_eq!(feed(&d, &cfg, &p, 0, shed, 100, MS, 0), None);
    assert_eq!(feed(&d, &cfg, &p, 0, Outcome::Ignore, 100, MS, 0), None);
    assert_eq!(p[0].interval_counts(), (100, 0), "slow counts as success");
    // Neutral outcomes neither reset nor advance a streak.
    feed(&d, &cfg, &p, 1, ERR, 4, MS, 0);
    feed(&d, &cfg, &p, 1, shed, 3, MS, 0);
    assert_eq!(p[1].consecutive_failures(), 4);
    assert_eq!(
        feed(&d, &cfg, &p, 1, ERR, 1, MS, 0),
        Some(EjectionReason::ConsecutiveFailures)
    );
}

/// Four hosts at 100% success, `rates[i]` successes of 100 for the rest.
fn success_rate_pool(
    cfg: &OutlierDetection,
    d: &Detector,
    rates: &[(usize, usize)],
) -> Vec<HostStats> {
    let p = pool(rates.len());
    for &(i, ok) in rates {
        feed(d, cfg, &p, i, OK, ok, MS, 0);
        feed(d, cfg, &p, i, ERR, 100 - ok, MS, 0);
    }
    p
}

#[test]
fn success_rate_ejects_the_low_outlier_with_five_hosts() {
    let cfg = none()
        .success_rate(Some(SuccessRate::default()))
        .build()
        .unwrap();
    let d = Detector::new();
    // Rates 100,100,100,100,70: mean 94, σ 12, threshold 94 − 1.9·12 = 71.2.
    let p = success_rate_pool(&cfg, &d, &[(0, 100), (1, 100), (2, 70), (3, 100), (4, 100)]);
    let ev = d.maybe_evaluate(&cfg, &p, 10 * SEC, 0).unwrap();
    assert_eq!(ev.ejected, 1);
    assert_eq!(ejected(&p, 10 * SEC), vec![2]);
    assert_eq!(p[2].ejections(EjectionReason::SuccessRate), 1);
    // Spread-out rates 100,90,80,100,90: mean 92, σ 7.48, threshold 77.8;
    // the lowest (80) is kept.
    let d = Detector::new();
    let p = success_rate_pool(&cfg, &d, &[(0, 100), (1, 90), (2, 80), (3, 100), (4, 90)]);
    d.maybe_evaluate(&cfg, &p, 10 * SEC, 0);
    assert!(ejected(&p, 10 * SEC).is_empty());
}

#[test]
fn success_rate_spares_hosts_above_the_ejection_threshold() {
    // With 5 hosts, a single host that differs at all is exactly 2 σ below
    // the mean: Envoy would eject a host for one failure in 100.
    let rates = [(0, 100), (1, 100), (2, 99), (3, 100), (4, 100)];
    let cfg = none()
        .success_rate(Some(SuccessRate::default()))
        .build()
        .unwrap();
    let d = Detector::new();
    let p = success_rate_pool(&cfg, &d, &rates);
    d.maybe_evaluate(&cfg, &p, 10 * SEC, 0);
    assert!(ejected(&p, 10 * SEC).is_empty());
    // Envoy's behaviour on request.
    let envoy = SuccessRate::default().ejection_threshold(100.0);
    let cfg = none().success_rate(Some(envoy)).build().unwrap();
    let d = Detector::new();
    let p = success_rate_pool(&cfg, &d, &rates);
    d.maybe_evaluate(&cfg, &p, 10 * SEC, 0);
    assert_eq!(ejected(&p, 10 * SEC), vec![2]);
}

#[test]
fn success_rate_respects_minimum_hosts_and_request_volume() {
    let cfg = none()
        .success_rate(Some(SuccessRate::default()))
        .build()
        .unwrap();
    // Four hosts only.
    let d = Detector::new();
    let p = success_rate_pool(&cfg, &d, &[(0, 100), (1, 100), (2, 10), (3, 100)]);
    d.maybe_evaluate(&cfg, &p, 10 * SEC, 0);
    assert!(ejected(&p, 10 * SEC).is_empty());
    // Five hosts, but host 4 has 99 requests: only four qualify.
    let volume = |i| if i == 4 { 99 } else { 100 };
    let (d, p) = (Detector::new(), pool(5));
    for i in 0..5 {
        let ok = if i == 2 { 10 } else { volume(i) };
        feed(&d, &cfg, &p, i, OK, ok, MS, 0);
        feed(&d, &cfg, &p, i, ERR, volume(i) - ok, MS, 0);
    }
    d.maybe_evaluate(&cfg, &p, 10 * SEC, 0);
    assert!(ejected(&p, 10 * SEC).is_empty());
    // The next interval, with host 4 at 100 requests, ejects host 2.
    for i in 0..5 {
        let ok = if i == 2 { 10 } else { 100 };
        feed(&d, &cfg, &p, i, OK, ok, MS, 10 * SEC);
        feed(&d, &cfg, &p, i, ERR, 100 - ok, MS, 10 * SEC);
    }
    d.maybe_evaluate(&cfg, &p, 20 * SEC, 0);
    assert_eq!(ejected(&p, 20 * SEC), vec![2]);
}

#[test]
fn failure_percentage_ejects_hosts_above_threshold() {
    let cfg = none()
        .failure_percentage(Some(FailurePercentage::default()))
        .max_ejection_percent(100)
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(6));
    for i in 0..6 {
        let failures = match i {
            1 => 45, // 90%
            4 => 43, // 86%
            5 => 42, // 84%: under 85%
            _ => 0,
        };
        feed(&d, &cfg, &p, i, ERR, failures, MS, 0);
        feed(&d, &cfg, &p, i, OK, 50 - failures, MS, 0);
    }
    let ev = d.maybe_evaluate(&cfg, &p, 10 * SEC, 0).unwrap();
    assert_eq!(ev.ejected, 2);
    assert_eq!(ejected(&p, 10 * SEC), vec![1, 4]);
    assert_eq!(d.ejections(EjectionReason::FailurePercentage), 2);
}

#[test]
fn failure_percentage_respects_minimum_hosts_and_request_volume() {
    let cfg = none()
        .failure_percentage(Some(FailurePercentage::default()))
        .build()
        .unwrap();
    // Five hosts, one with 49 requests: only four qualify.
    let (d, p) = (Detector::new(), pool(5));
    for i in 0..5 {
        let volume = if i == 4 { 49 } else { 50 };
        let failures = if i == 0 { 50 } else { 0 };
        feed(&d, &cfg, &p, i, ERR, failures, MS, 0);
        feed(&d, &cfg, &p, i, OK, volume - failures, MS, 0);
    }
    d.maybe_evaluate(&cfg, &p, 10 * SEC, 0);
    assert!(ejected(&p, 10 * SEC).is_empty());
    // Next interval, all five at volume: host 0 goes.
    for i in 0..5 {
        let failures = if i == 0 { 50 } else { 0 };
        feed(&d, &cfg, &p, i, ERR, failures, MS, 10 * SEC);
        feed(&d, &cfg, &p, i, OK, 50 - failures, MS, 10 * SEC);
    }
    d.maybe_evaluate(&cfg, &p, 20 * SEC, 0);
    assert_eq!(ejected(&p, 20 * SEC), vec![0]);
}

/// One interval of latency samples: host `i` answers in `means[i]` ms.
fn latency_interval(
    d: &Detector,
    cfg: &OutlierDetection,
    p: &[HostStats],
    means: &[u64],
    n: usize,
    now: u64,
) {
    for (i, &ms) in means.iter().enumerate() {
        feed(d, cfg, p, i, OK, n, Duration::from_millis(ms), now);
    }
}

#[test]
fn latency_outlier_is_ejected_after_consecutive_intervals() {
    let cfg = none()
        .latency(Some(LatencyOutlier::default()))
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(5));
    // Host 4 at 5× the median; host 3 at 2.9× (under the 3× factor).
    let means = [10, 10, 12, 29, 50];
    for k in 1..=2 {
        latency_interval(&d, &cfg, &p, &means, 50, (k - 1) * 10 * SEC);
        d.maybe_evaluate(&cfg, &p, k * 10 * SEC, 0).unwrap();
        assert!(ejected(&p, k * 10 * SEC).is_empty(), "interval {k}");
    }
    latency_interval(&d, &cfg, &p, &means, 50, 20 * SEC);
    d.maybe_evaluate(&cfg, &p, 30 * SEC, 0).unwrap();
    assert_eq!(ejected(&p, 30 * SEC), vec![4]);
    assert_eq!(p[4].ejections(EjectionReason::Latency), 1);
}

#[test]
fn latency_strikes_reset_when_the_host_recovers_for_an_interval() {
    let cfg = none()
        .latency(Some(LatencyOutlier::default()))
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(5));
    let slow = [10, 10, 10, 10, 50];
    let fine = [10; 5];
    for (k, means) in [slow, slow, fine, slow, slow].iter().enumerate() {
        let now = k as u64 * 10 * SEC;
        latency_interval(&d, &cfg, &p, means, 50, now);
        d.maybe_evaluate(&cfg, &p, now + 10 * SEC, 0).unwrap();
        assert!(ejected(&p, now + 10 * SEC).is_empty(), "interval {k}");
    }
    latency_interval(&d, &cfg, &p, &slow, 50, 50 * SEC);
    d.maybe_evaluate(&cfg, &p, 60 * SEC, 0).unwrap();
    assert_eq!(ejected(&p, 60 * SEC), vec![4]);
}

#[test]
fn latency_rule_respects_minimum_hosts_and_request_volume() {
    let rule = LatencyOutlier::default().consecutive_intervals(1);
    let cfg = none().latency(Some(rule)).build().unwrap();
    // Two hosts: fewer than 3.
    let (d, p) = (Detector::new(), pool(2));
    latency_interval(&d, &cfg, &p, &[10, 100], 50, 0);
    d.maybe_evaluate(&cfg, &p, 10 * SEC, 0);
    assert!(ejected(&p, 10 * SEC).is_empty());
    // Three hosts, but the slow one has 49 samples.
    let (d, p) = (Detector::new(), pool(3));
    latency_interval(&d, &cfg, &p, &[10, 10, 100], 49, 0);
    feed(&d, &cfg, &p, 0, OK, 1, Duration::from_millis(10), 0);
    feed(&d, &cfg, &p, 1, OK, 1, Duration::from_millis(10), 0);
    d.maybe_evaluate(&cfg, &p, 10 * SEC, 0);
    assert!(ejected(&p, 10 * SEC).is_empty());
    // Hard failures are no latency samples: a fast-failing host is not "fast".
    latency_interval(&d, &cfg, &p, &[10, 10], 50, 10 * SEC);
    feed(
        &d,
        &cfg,
        &p,
        2,
        ERR,
        50,
        Duration::from_millis(100),
        10 * SEC,
    );
    d.maybe_evaluate(&cfg, &p, 20 * SEC, 0);
    assert!(ejected(&p, 20 * SEC).is_empty());
    // With 50 samples, host 2 goes.
    latency_interval(&d, &cfg, &p, &[10, 10, 100], 50, 20 * SEC);
    d.maybe_evaluate(&cfg, &p, 30 * SEC, 0);
    assert_eq!(ejected(&p, 30 * SEC), vec![2]);
}

#[test]
fn rules_that_are_off_do_nothing() {
    let cfg = none().build().unwrap();
    let (d, p) = (Detector::new(), pool(10));
    feed(&d, &cfg, &p, 0, GATEWAY, 1000, MS, 0);
    for i in 1..10 {
        feed(&d, &cfg, &p, i, OK, 200, MS, 0);
    }
    d.maybe_evaluate(&cfg, &p, 10 * SEC, 0);
    assert!(ejected(&p, 10 * SEC).is_empty());
    assert_eq!(d.total_ejections(), 0);
}

// ---------------------------------------------------------------- ejection time

/// Ejects `pool[0]` with five failures at `now`; returns its deadline.
fn eject0(d: &Detector, cfg: &OutlierDetection, p: &[HostStats], now: u64, rand: u64) -> u64 {
    for _ in 0..5 {
        d.on_response(cfg, p, 0, ERR, MS, now, rand);
    }
    assert!(p[0].is_ejected(now));
    p[0].ejected_until_ns().unwrap()
}

#[test]
fn ejection_time_grows_with_each_ejection_and_is_capped() {
    let cfg = none()
        .consecutive_failures(Some(Consecutive::new(5)))
        .base_ejection_time(Duration::from_secs(30))
        .max_ejection_time(Duration::from_secs(100))
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(10));
    let mut now = 0;
    let mut times = Vec::new();
    for _ in 0..6 {
        let until = eject0(&d, &cfg, &p, now, 0);
        times.push((until - now) / SEC);
        assert!(p[0].is_ejected(until - 1));
        assert!(!p[0].is_ejected(until));
        now = until; // fails again the moment it is back
    }
    assert_eq!(times, vec![30, 60, 90, 100, 100, 100]);
    assert_eq!(p[0].multiplier(), 4, "stops growing at ⌈max / base⌉");
}

#[test]
fn multiplier_decays_one_step_per_interval_while_the_host_behaves() {
    let cfg = none()
        .consecutive_failures(Some(Consecutive::new(5)))
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(10));
    let until = eject0(&d, &cfg, &p, 0, 0);
    let until = eject0(&d, &cfg, &p, until, 0);
    assert_eq!(until, 90 * SEC); // 30 s, then 60 s
    assert_eq!(p[0].multiplier(), 2);
    // Evaluations while ejected do not decay.
    d.maybe_evaluate(&cfg, &p, 40 * SEC, 0).unwrap();
    d.maybe_evaluate(&cfg, &p, 80 * SEC, 0).unwrap();
    assert_eq!(p[0].multiplier(), 2);
    // The evaluation that returns it does not decay either.
    let ev = d.maybe_evaluate(&cfg, &p, 90 * SEC, 0).unwrap();
    assert_eq!(ev.returned, 1);
    assert_eq!(p[0].ejected_until_ns(), None);
    assert_eq!(p[0].multiplier(), 2);
    d.maybe_evaluate(&cfg, &p, 100 * SEC, 0).unwrap();
    assert_eq!(p[0].multiplier(), 1);
    // Next ejection: 30 s × 2.
    let until = eject0(&d, &cfg, &p, 105 * SEC, 0);
    assert_eq!(until - 105 * SEC, 60 * SEC);
}

#[test]
fn a_late_evaluation_decays_by_every_interval_elapsed() {
    let cfg = none()
        .consecutive_failures(Some(Consecutive::new(5)))
        .max_ejection_time(Duration::from_secs(3000))
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(10));
    let mut now = 0;
    for _ in 0..5 {
        now = eject0(&d, &cfg, &p, now, 0);
    }
    assert_eq!(p[0].multiplier(), 5);
    d.maybe_evaluate(&cfg, &p, now, 0).unwrap(); // returns it
    // No traffic for 30 s: the next evaluation covers three intervals.
    d.maybe_evaluate(&cfg, &p, now + 30 * SEC, 0).unwrap();
    assert_eq!(p[0].multiplier(), 2);
    d.maybe_evaluate(&cfg, &p, now + 100 * SEC, 0).unwrap();
    assert_eq!(p[0].multiplier(), 0);
}

#[test]
fn unejection_happens_when_the_time_is_up() {
    let cfg = OutlierDetection::builder()
        .max_ejection_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(10));
    let until = eject0(&d, &cfg, &p, SEC, 0);
    assert_eq!(until, 31 * SEC);
    assert_eq!(d.ejected_count(), 1);
    assert_eq!(d.ejected_count_at(&p, until - 1), 1);
    // At the deadline: back without an evaluation, and the count knows it.
    assert!(!p[0].is_ejected(until));
    assert_eq!(d.ejected_count_at(&p, until), 0);
    // It takes traffic again and can be ejected again.
    assert_eq!(feed(&d, &cfg, &p, 0, OK, 1, MS, until), None);
    assert_eq!(p[0].consecutive_failures(), 0);
}

#[test]
fn failures_finishing_while_ejected_do_not_extend_the_streak() {
    let cfg = OutlierDetection::builder()
        .max_ejection_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(10));
    let until = eject0(&d, &cfg, &p, 0, 0);
    // Ten calls picked before the ejection fail while it lasts.
    assert_eq!(feed(&d, &cfg, &p, 0, ERR, 10, MS, SEC), None);
    assert_eq!(p[0].consecutive_failures(), 0);
    assert_eq!(
        p[0].interval_counts(),
        (0, 15),
        "the interval rules still see them"
    );
    // Back: one failure is not enough, five are.
    assert_eq!(feed(&d, &cfg, &p, 0, ERR, 4, MS, until), None);
    assert_eq!(
        feed(&d, &cfg, &p, 0, ERR, 1, MS, until),
        Some(EjectionReason::ConsecutiveFailures)
    );
}

#[test]
fn evaluation_runs_once_per_interval() {
    let cfg = OutlierDetection::default();
    let (d, p) = (Detector::new(), pool(3));
    assert!(d.is_due(0));
    assert!(d.maybe_evaluate(&cfg, &p, 0, 0).is_some());
    assert!(!d.is_due(10 * SEC - 1));
    assert!(d.maybe_evaluate(&cfg, &p, 10 * SEC - 1, 0).is_none());
    feed(&d, &cfg, &p, 0, OK, 7, MS, SEC);
    assert_eq!(p[0].interval_counts(), (7, 0));
    assert!(d.maybe_evaluate(&cfg, &p, 10 * SEC, 0).is_some());
    assert_eq!(p[0].interval_counts(), (0, 0), "counts reset each interval");
    assert_eq!(d.evaluations(), 2);
}

proptest! {
    /// Every ejection lasts `min(base · m, max)` plus a jitter in `0..=jitter`.
    #[test]
    fn jitter_stays_within_bounds(rand in any::<u64>(), jitter_ms in 0u64..10_000, now in 0u64..1 << 50) {
        let cfg = none()
            .consecutive_failures(Some(Consecutive::new(5)))
            .max_ejection_jitter(Duration::from_millis(jitter_ms))
            .build()
            .unwrap();
        let (d, p) = (Detector::new(), pool(10));
        let until = eject0(&d, &cfg, &p, now, rand);
        let extra = until - now - 30 * SEC;
        prop_assert!(extra <= jitter_ms * 1_000_000, "extra {extra}");
    }
}

#[test]
fn jitter_spreads_deadlines() {
    let cfg = OutlierDetection::default();
    let mut deadlines = std::collections::HashSet::new();
    for rand in 0..50u64 {
        let (d, p) = (Detector::new(), pool(10));
        deadlines.insert(eject0(
            &d,
            &cfg,
            &p,
            0,
            rand.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ));
    }
    assert!(
        deadlines.len() > 40,
        "{} distinct deadlines",
        deadlines.len()
    );
    assert!(
        deadlines
            .iter()
            .all(|&u| (30 * SEC..=33 * SEC).contains(&u))
    );
}

// ---------------------------------------------------------------- limits

#[test]
fn three_host_pool_ejects_its_one_bad_host_and_no_second() {
    let cfg = OutlierDetection::default(); // 10%
    let (d, p) = (Detector::new(), pool(3));
    assert_eq!(
        feed(&d, &cfg, &p, 1, GATEWAY, 5, MS, 0),
        Some(EjectionReason::ConsecutiveGatewayFailures)
    );
    assert_eq!(feed(&d, &cfg, &p, 2, GATEWAY, 20, MS, 0), None);
    assert_eq!(ejected(&p, 1), vec![1]);
    assert!(d.refused_ejections() > 0);
    // Once host 1 is back, host 2's tripped rule ejects it on its next failure.
    let back = p[1].ejected_until_ns().unwrap();
    assert_eq!(
        d.on_response(&cfg, &p, 2, GATEWAY, MS, back, 0),
        Some(EjectionReason::ConsecutiveGatewayFailures)
    );
    assert_eq!(ejected(&p, back), vec![2]);
}

#[test]
fn max_ejection_percent_limits_interval_ejections_worst_first() {
    let cfg = none()
        .failure_percentage(Some(FailurePercentage::default().minimum_hosts(5)))
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(20)); // 10% of 20 = 2
    for (i, failures) in [(3, 46), (7, 50), (11, 48)] {
        feed(&d, &cfg, &p, i, ERR, failures, MS, 0);
        feed(&d, &cfg, &p, i, OK, 50 - failures, MS, 0);
    }
    for i in (0..20).filter(|i| ![3, 7, 11].contains(i)) {
        feed(&d, &cfg, &p, i, OK, 50, MS, 0);
    }
    let ev = d.maybe_evaluate(&cfg, &p, 10 * SEC, 0).unwrap();
    assert_eq!((ev.ejected, ev.refused), (2, 1));
    assert_eq!(ejected(&p, 10 * SEC), vec![7, 11], "the two worst");
}

#[test]
fn zero_percent_ejects_nothing_but_counts_refusals() {
    let cfg = OutlierDetection::builder()
        .max_ejection_percent(0)
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(10));
    assert_eq!(feed(&d, &cfg, &p, 0, ERR, 10, MS, 0), None);
    assert!(ejected(&p, 1).is_empty());
    assert_eq!(d.refused_ejections(), 6);
}

#[test]
fn enforcing_zero_detects_without_ejecting() {
    let cfg = none()
        .consecutive_failures(Some(Consecutive::new(5).enforcing_percent(0)))
        .build()
        .unwrap();
    let (d, p) = (Detector::new(), pool(10));
    assert_eq!(feed(&d, &cfg, &p, 0, ERR, 12, MS, 0), None);
    assert!(ejected(&p, 1).is_empty());
    assert_eq!(
        p[0].consecutive_failures(),
        2,
        "each detection restarts the streak"
    );
}

#[test]
fn max_ejections_formula() {
    assert_eq!(max_ejections(0, 10), 0);
    assert_eq!(max_ejections(1, 100), 0);
    assert_eq!(max_ejections(2, 10), 1);
    assert_eq!(max_ejections(3, 10), 1);
    assert_eq!(max_ejections(19, 10), 1);
    assert_eq!(max_ejections(20, 10), 2);
    assert_eq!(max_ejections(10, 100), 9);
    assert_eq!(max_ejections(10, 0), 0);
}

proptest! {
    #[test]
    fn max_ejections_never_all_and_at_least_one(n in 0usize..10_000, pct in 0u32..=100) {
        let m = max_ejections(n, pct);
        prop_assert!(m < n.max(1));
        if n >= 2 && pct > 0 {
            prop_assert!(m >= 1);
            prop_assert!(m == 1 || m <= n * pct as usize / 100);
        }
    }
}

// ---------------------------------------------------------------- membership

#[test]
fn stale_indexes_and_shrinking_pools_are_harmless() {
    let cfg = OutlierDetection::default();
    let d = Detector::new();
    let p = pool(4);
    assert_eq!(d.on_response(&cfg, &p, 4, ERR, MS, 0, 0), None);
    assert_eq!(d.on_response(&cfg, &p[..0], 0, ERR, MS, 0, 0), None);
    assert!(d.maybe_evaluate(&cfg, &p[..0], 0, 0).is_some());
    assert_eq!(d.ejected_count_at(&p[..0], 0), 0);
    feed(&d, &cfg, &p, 3, ERR, 5, MS, 0);
    assert_eq!(ejected(&p, 1), vec![3]);
    assert_eq!(
        d.ejected_count_at(&p[..2], 1),
        0,
        "a shrunk pool is recounted"
    );
    d.maybe_evaluate(&cfg, &p[..1], 20 * SEC, 0);
}

#[test]
fn eject_finds_the_host_by_identity_not_index() {
    let cfg = OutlierDetection::default();
    let d = Detector::new();
    let hosts: Vec<Arc<HostStats>> = (0..4).map(|_| Arc::default()).collect();
    let stranger = HostStats::default();
    assert!(!d.eject(
        &cfg,
        &hosts,
        &stranger,
        EjectionReason::ConsecutiveFailures,
        0,
        0
    ));
    // The host was picked at index 3; the pool has since lost its first host.
    let target = Arc::clone(&hosts[3]);
    let mut reason = None;
    for _ in 0..5 {
        reason = reason.or(target.record(&cfg, ERR, MS, 0));
    }
    let reason = reason.unwrap();
    let moved = &hosts[1..];
    assert!(d.eject(&cfg, moved, &target, reason, 0, 0));
    assert!(target.is_ejected(1));
    assert!(!hosts[2].is_ejected(1));
}

#[test]
fn a_pool_left_with_only_ejected_hosts_gets_one_back() {
    let cfg = OutlierDetection::builder()
        .max_ejection_percent(100)
        .max_ejection_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let d = Detector::new();
    let hosts: Vec<Arc<HostStats>> = (0..4).map(|_| Arc::default()).collect();
    for i in 0..3 {
        feed_arc(&d, &cfg, &hosts, i, 5, i as u64 * SEC);
    }
    assert_eq!(d.ejected_count_at(&hosts, 3 * SEC), 3);
    // The healthy host is removed: the ejection ending first is cut short.
    let left = &hosts[..3];
    assert_eq!(d.ejected_count_at(left, 3 * SEC), 2);
    assert!(!left[0].is_ejected(3 * SEC));
    assert!(left[1].is_ejected(3 * SEC) && left[2].is_ejected(3 * SEC));
}

fn feed_arc(
    d: &Detector,
    cfg: &OutlierDetection,
    p: &[Arc<HostStats>],
    i: usize,
    n: usize,
    now: u64,
) {
    for _ in 0..n {
        d.on_response(cfg, p, i, ERR, MS, now, 0);
    }
}

#[derive(Debug, Clone)]
enum Op {
    Respond {
        host: usize,
        kind: u8,
        latency_ms: u64,
    },
    Advance {
        ms: u64,
    },
    Evaluate {
        rand: u64,
    },
    Remove {
        host: usize,
    },
    Add,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..16, 0u8..6, 1u64..200).prop_map(|(host, kind, latency_ms)| Op::Respond { host, kind, latency_ms }),
        2 => (0u64..20_000).prop_map(|ms| Op::Advance { ms }),
        2 => any::<u64>().prop_map(|rand| Op::Evaluate { rand }),
        1 => (0usize..16).prop_map(|host| Op::Remove { host }),
        1 => Just(Op::Add),
    ]
}

/// The limit written out independently of the library's `max_ejections`.
fn limit(n: usize, pct: u32) -> usize {
    if n <= 1 || pct == 0 {
        0
    } else {
        (n * pct as usize / 100).max(1).min(n - 1)
    }
}

fn outcome(kind: u8) -> Outcome {
    match kind {
        0 | 1 => OK,
        2 => ERR,
        3 => GATEWAY,
        4 => Outcome::Failure(FailureKind::Slow),
        _ => Outcome::Failure(FailureKind::Timeout),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// For any pool, outcomes, timing and configuration: the detector never
    /// ejects past the limit, and a pool always keeps an un-ejected host.
    #[test]
    fn never_all_hosts_ejected(
        n in 1usize..12,
        pct in prop_oneof![Just(0u32), Just(100u32), 0u32..=100],
        threshold in 1u32..4,
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        let cfg = OutlierDetection::builder()
            .interval(Duration::from_secs(1))
            .base_ejection_time(Duration::from_secs(2))
            .max_ejection_time(Duration::from_secs(10))
            .max_ejection_percent(pct)
            .consecutive_failures(Some(Consecutive::new(threshold)))
            .consecutive_gateway_failures(Some(Consecutive::new(threshold)))
            .success_rate(Some(SuccessRate::default().minimum_hosts(2).request_volume(1)))
            .failure_percentage(Some(FailurePercentage::default().threshold(30).minimum_hosts(1).request_volume(1)))
            .latency(Some(LatencyOutlier::default().factor(1.5).request_volume(1).consecutive_intervals(1)))
            .build()
            .unwrap();
        let d = Detector::new();
        let mut hosts: Vec<Arc<HostStats>> = (0..n).map(|_| Arc::default()).collect();
        let mut grew_only = true;
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Respond { host, kind, latency_ms } => {
                    let before = hosts.iter().filter(|h| h.is_ejected(now)).count();
                    let r = d.on_response(&cfg, &hosts, host, outcome(kind), Duration::from_millis(latency_ms), now, host as u64);
                    if r.is_some() {
                        prop_assert!(before < limit(hosts.len(), pct));
                    }
                }
                Op::Advance { ms } => now += ms * 1_000_000,
                Op::Evaluate { rand } => { d.maybe_evaluate(&cfg, &hosts, now, rand); }
                Op::Remove { host } => {
                    if host < hosts.len() {
                        hosts.remove(host);
                        grew_only = false;
                    }
                }
                Op::Add => hosts.push(Arc::default()),
            }
            // What the detector itself did: within the limit, never all.
            let actual = hosts.iter().filter(|h| h.is_ejected(now)).count();
            if grew_only {
                prop_assert!(actual <= limit(hosts.len(), pct), "{} of {}", actual, hosts.len());
                prop_assert!(actual == 0 || actual < hosts.len());
            }
            // The pick path's count (as the panic threshold reads it) is
            // exact, and repairs a pool that removals left all ejected.
            let counted = d.ejected_count_at(&hosts, now);
            let actual = hosts.iter().filter(|h| h.is_ejected(now)).count();
            prop_assert_eq!(counted, actual);
            prop_assert!(actual == 0 || actual < hosts.len(), "all {} hosts ejected", hosts.len());
        }
    }
}

// ---------------------------------------------------------------- config

#[test]
fn defaults_follow_envoy() {
    let cfg = OutlierDetection::default();
    assert_eq!(cfg, OutlierDetection::builder().build().unwrap());
    assert_eq!(cfg.interval(), Duration::from_secs(10));
    assert_eq!(cfg.base_ejection_time(), Duration::from_secs(30));
    assert_eq!(cfg.max_ejection_time(), Duration::from_secs(300));
    assert_eq!(cfg.max_ejection_jitter(), Duration::from_secs(3));
    assert_eq!(cfg.max_ejection_percent(), 10);
    assert_eq!(cfg.consecutive_failures(), Some(Consecutive::new(5)));
    assert_eq!(
        cfg.consecutive_gateway_failures(),
        Some(Consecutive::new(5))
    );
    assert_eq!(cfg.success_rate(), Some(SuccessRate::default()));
    assert_eq!(cfg.failure_percentage(), Some(FailurePercentage::default()));
    assert_eq!(cfg.latency(), Some(LatencyOutlier::default()));
}

#[test]
fn every_invalid_field_is_named() {
    let b = OutlierDetection::builder;
    let d0 = Duration::ZERO;
    let cases: Vec<(outlier::Builder, &str)> = vec![
        (b().interval(d0), "outlier.interval"),
        (b().base_ejection_time(d0), "outlier.base_ejection_time"),
        (
            b().base_ejection_time(Duration::from_secs(10))
                .max_ejection_time(Duration::from_secs(9)),
            "outlier.max_ejection_time",
        ),
        (
            b().max_ejection_percent(101),
            "outlier.max_ejection_percent",
        ),
        (
            b().consecutive_failures(Some(Consecutive::new(0))),
            "outlier.consecutive_failures.threshold",
        ),
        (
            b().consecutive_failures(Some(Consecutive::new(5).enforcing_percent(101))),
            "outlier.consecutive_failures.enforcing_percent",
        ),
        (
            b().consecutive_gateway_failures(Some(Consecutive::new(0))),
            "outlier.consecutive_gateway_failures.threshold",
        ),
        (
            b().consecutive_gateway_failures(Some(Consecutive::new(5).enforcing_percent(200))),
            "outlier.consecutive_gateway_failures.enforcing_percent",
        ),
        (
            b().success_rate(Some(SuccessRate::default().stdev_factor(0.0))),
            "outlier.success_rate.stdev_factor",
        ),
        (
            b().success_rate(Some(SuccessRate::default().stdev_factor(f64::NAN))),
            "outlier.success_rate.stdev_factor",
        ),
        (
            b().success_rate(Some(SuccessRate::default().minimum_hosts(1))),
            "outlier.success_rate.minimum_hosts",
        ),
        (
            b().success_rate(Some(SuccessRate::default().request_volume(0))),
            "outlier.success_rate.request_volume",
        ),
        (
            b().success_rate(Some(SuccessRate::default().enforcing_percent(101))),
            "outlier.success_rate.enforcing_percent",
        ),
        (
            b().failure_percentage(Some(FailurePercentage::default().threshold(101))),
            "outlier.failure_percentage.threshold",
        ),
        (
            b().failure_percentage(Some(FailurePercentage::default().minimum_hosts(0))),
            "outlier.failure_percentage.minimum_hosts",
        ),
        (
            b().failure_percentage(Some(FailurePercentage::default().request_volume(0))),
            "outlier.failure_percentage.request_volume",
        ),
        (
            b().failure_percentage(Some(FailurePercentage::default().enforcing_percent(101))),
            "outlier.failure_percentage.enforcing_percent",
        ),
        (
            b().success_rate(Some(SuccessRate::default().ejection_threshold(0.0))),
            "outlier.success_rate.ejection_threshold",
        ),
        (
            b().success_rate(Some(SuccessRate::default().ejection_threshold(100.5))),
            "outlier.success_rate.ejection_threshold",
        ),
        (
            b().success_rate(Some(SuccessRate::default().ejection_threshold(f64::NAN))),
            "outlier.success_rate.ejection_threshold",
        ),
        (
            b().latency(Some(LatencyOutlier::default().factor(1.0))),
            "outlier.latency.factor",
        ),
        (
            b().latency(Some(LatencyOutlier::default().factor(f64::INFINITY))),
            "outlier.latency.factor",
        ),
        (
            b().latency(Some(LatencyOutlier::default().minimum_hosts(2))),
            "outlier.latency.minimum_hosts",
        ),
        (
            b().latency(Some(LatencyOutlier::default().request_volume(0))),
            "outlier.latency.request_volume",
        ),
        (
            b().latency(Some(LatencyOutlier::default().consecutive_intervals(0))),
            "outlier.latency.consecutive_intervals",
        ),
        (
            b().latency(Some(LatencyOutlier::default().enforcing_percent(101))),
            "outlier.latency.enforcing_percent",
        ),
    ];
    for (builder, field) in cases {
        let err = builder.build().unwrap_err();
        assert_eq!(err.field(), field);
        assert!(err.to_string().contains(field), "{err}");
    }
    // Boundaries that are allowed.
    let ok = b()
        .max_ejection_percent(100)
        .max_ejection_time(Duration::from_secs(30))
        .max_ejection_jitter(Duration::from_secs(1_000_000))
        .failure_percentage(Some(
            FailurePercentage::default().threshold(0).minimum_hosts(1),
        ))
        .latency(Some(
            LatencyOutlier::default().minimum_hosts(3).factor(1.01),
        ))
        .build();
    assert!(ok.is_ok());
}

// ---------------------------------------------------------------- threads

#[test]
fn concurrent_failures_never_eject_past_the_limit() {
    let cfg = OutlierDetection::builder()
        .consecutive_failures(Some(Consecutive::new(1)))
        .consecutive_gateway_failures(None)
        .build()
        .unwrap();
    for round in 0..20u64 {
        let d = Detector::new();
        let p = pool(3); // limit 1
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (d, p, cfg) = (&d, &p, &cfg);
                s.spawn(move || {
                    for k in 0..2_000u64 {
                        let i = ((k + t) % 3) as usize;
                        d.on_response(cfg, p, i, ERR, MS, round, k ^ t);
                        assert!(ejected(p, round).len() <= 1);
                    }
                });
            }
        });
        assert_eq!(ejected(&p, round).len(), 1, "round {round}");
        assert_eq!(d.total_ejections(), 1);
        assert_eq!(d.ejected_count_at(&p, round), 1);
    }
}
