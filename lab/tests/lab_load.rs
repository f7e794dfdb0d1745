//! The lab's goals for server-reported load and adaptive limits (issue 13),
//! in `--sim` mode on scaled-down runs: `orca-many-clients`, `overload`,
//! and no regression of the pickers on `steady-capacity`, `many-clients`
//! and `seed-steady`.

use tower_lb_lab as lab;

use std::sync::OnceLock;
use std::time::Duration;

use lab::driver::{Options, run_scenario};
use lab::report::{PickerReport, Report};
use lab::scenario::{PickerName, Scenario};

fn sim(scenario: &str, secs: u64, pickers: &[&str]) -> Report {
    let sc = Scenario::load(scenario).expect("shipped scenario parses");
    let opts = Options {
        sim: true,
        duration: Some(Duration::from_secs(secs)),
        pickers: Some(
            pickers
                .iter()
                .map(|p| p.parse::<PickerName>().expect("known picker"))
                .collect(),
        ),
        seed: None,
        utilization: None,
        quiet: true,
        stream: false,
        warm_select: false,
        per_thread_load: false,
        metrics_addr: None,
        peers: None,
        ..Options::default()
    };
    run_scenario(&sc, &opts).expect("scenario runs")
}

fn run<'a>(r: &'a Report, picker: &str) -> &'a PickerReport {
    r.run(picker)
        .unwrap_or_else(|| panic!("{picker} did not run: {:?}", r.notes))
}

fn table(r: &Report) -> String {
    format!("\n{}", r.table())
}

// ----------------------------------------------------- orca-many-clients

fn orca_many_clients() -> &'static Report {
    static R: OnceLock<Report> = OnceLock::new();
    // 10 s measured after the scenario's 15 s warm-up.
    R.get_or_init(|| {
        sim(
            "orca-many-clients",
            10,
            &[
                "least_in_flight",
                "p2c_peak_ewma",
                "peak_ewma",
                "peak_ewma_orca",
                "orca_round_robin",
            ],
        )
    })
}

/// The best picker with reports (lowest p99, then mean).
fn best_with_reports(r: &Report) -> &PickerReport {
    ["peak_ewma_orca", "orca_round_robin"]
        .iter()
        .map(|p| run(r, p))
        .min_by(|a, b| {
            (a.latency_ms.p99, a.latency_ms.mean)
                .partial_cmp(&(b.latency_ms.p99, b.latency_ms.mean))
                .unwrap()
        })
        .unwrap()
}

#[test]
fn orca_many_clients_best_reporter_beats_two_choice_and_least_in_flight() {
    let r = orca_many_clients();
    let best = best_with_reports(r);
    for other in ["p2c_peak_ewma", "least_in_flight"] {
        let o = run(r, other);
        assert!(
            best.latency_ms.mean < o.latency_ms.mean && best.latency_ms.p99 < o.latency_ms.p99,
            "{} vs {other}{}",
            best.picker,
            table(r)
        );
    }
}

#[test]
fn orca_many_clients_mean_no_worse_than_peak_ewma() {
    let r = orca_many_clients();
    // The bar: today's peak_ewma in many-clients, 123 ms.
    let best = run(r, "peak_ewma_orca");
    assert!(best.latency_ms.mean <= 123.0, "{}", table(r));
    assert!(
        best.latency_ms.mean <= run(r, "peak_ewma").latency_ms.mean * 1.02,
        "{}",
        table(r)
    );
}

/// A p99 of 225 ms is not reachable together with a mean of 123 ms in this
/// scenario: a p99 under server-3's 300 ms leaves servers 3 and 4 under 1%
/// of the requests, and servers 1 and 2 alone serve at most 16/50 ms +
/// 16/150 ms = 427 requests/s; 100 closed-loop users with 100 ms think
/// time then wait at least 100/427 − 0.1 = 134 ms on average (the oracle,
/// which does exactly that, has 144 ms). What holds: no request of the
/// reporting pickers waits in a deep queue (p99 at most server-3's service
/// time, where `least_in_flight` and `p2c_peak_ewma` reach 500 ms and more),
/// and the slowest server gets almost nothing.
#[test]
fn orca_many_clients_reports_keep_requests_out_of_deep_queues() {
    let r = orca_many_clients();
    let x = run(r, "peak_ewma_orca");
    assert!(x.latency_ms.p99 <= 300.0, "{}", table(r));
    assert!(
        x.share[3] < 0.01,
        "server-4 share {}{}",
        x.share[3],
        table(r)
    );
    // orca_round_robin follows A58's weights: server-1 has the most.
    let o = run(r, "orca_round_robin");
    assert!(o.share[0] > 0.5 && o.share[3] < 0.1, "{}", table(r));
}

// -------------------------------------------------------------- overload

fn overload() -> &'static Report {
    static R: OnceLock<Report> = OnceLock::new();
    // The scenario's 30 s: limits start at the default 20 per endpoint and
    // balancer (80 per 16-worker backend), so the first second or two
    // queue while they are learned; over 30 s that is under 1% of the
    // admitted requests (over 10 s it would set the p99).
    R.get_or_init(|| sim("overload", 30, &["round_robin", "peak_ewma"]))
}

#[test]
fn overload_with_limits_sheds_at_once_and_keeps_admitted_latency_near_service_time() {
    let r = overload();
    let service_ms = 50.0;
    for p in ["round_robin", "peak_ewma"] {
        let with = run(r, &format!("{p}+limits"));
        let without = run(r, p);
        // Admitted requests: within 2× the service time.
        assert!(with.latency_ms.p99 <= 2.0 * service_ms, "{p}{}", table(r));
        // The excess is refused (Overloaded, at once), not queued.
        assert!(with.error_rate > 0.3, "{p}{}", table(r));
        // Without limits nothing is refused and every request queues.
        assert_eq!(without.errors, 0, "{p}{}", table(r));
        assert!(without.latency_ms.p50 > 3.0 * service_ms, "{p}{}", table(r));
        assert!(
            without.latency_ms.mean > 2.0 * with.latency_ms.mean,
            "{p}{}",
            table(r)
        );
    }
}

// ----------------------------------------- no regression elsewhere (sim)

/// Each picker's (mean, p99) in ms with the same seeds and durations; sim
/// numbers are deterministic, and the build that recorded them reproduces
/// them exactly. 2% of slack for float noise.
///
/// Re-recorded on 2026-12-02 when the lab's random numbers moved to `rand`
/// (every user start, client IP and service time is drawn anew, so every
/// row moved: `least_in_flight` 133.1/500 → 134.5/519 on steady-capacity,
/// `weighted_round_robin` 200.8/714 → 200.8/738 on many-clients, with no
/// change to those pickers) and the default's samples got their own time
/// constant (`Builder::sample_decay`, 1 s). The default's change was judged
/// on every shipped scenario over seeds and 60 s runs, not on these 10 s
/// single-seed rows (`docs/lab.md`).
type Baseline = &'static [(&'static str, f64, f64)];

fn no_regression(scenario: &str, secs: u64, baseline: Baseline) {
    let pickers: Vec<&str> = baseline.iter().map(|b| b.0).collect();
    let r = sim(scenario, secs, &pickers);
    for &(p, mean, p99) in baseline {
        let x = run(&r, p);
        assert!(
            x.latency_ms.mean <= mean * 1.02 && x.latency_ms.p99 <= p99 * 1.02,
            "{scenario} {p}: {} / {} against {mean} / {p99}{}",
            x.latency_ms.mean,
            x.latency_ms.p99,
            table(&r)
        );
    }
}

#[test]
fn steady_capacity_no_picker_regresses() {
    no_regression("steady-capacity", 10, STEADY_CAPACITY_10S);
}

#[test]
fn many_clients_no_picker_regresses() {
    no_regression("many-clients", 10, MANY_CLIENTS_10S);
}

#[test]
fn seed_steady_no_picker_regresses() {
    no_regression("seed-steady", 30, SEED_STEADY_30S);
}

const STEADY_CAPACITY_10S: Baseline = &[
    ("round_robin", 525.431, 2382.0),
    ("weighted_round_robin", 199.593, 745.0),
    ("random", 516.29, 2390.0),
    ("least_in_flight", 134.474, 519.0),
    ("p2c_least_in_flight", 170.496, 828.0),
    ("key_hash", 539.102, 2450.0),
    ("ring_hash", 563.393, 2469.0),
    ("maglev", 537.115, 2383.0),
    ("least_response_time", 217.754, 1311.0),
    ("p2c_peak_ewma", 173.626, 616.0),
    ("peak_ewma", 128.902, 300.0),
    ("oracle", 141.868, 150.0),
];
const MANY_CLIENTS_10S: Baseline = &[
    ("round_robin", 513.084, 2392.0),
    ("weighted_round_robin", 200.814, 738.0),
    ("least_in_flight", 182.314, 861.0),
    ("p2c_least_in_flight", 265.513, 1240.0),
    ("least_response_time", 174.009, 1247.0),
    ("p2c_peak_ewma", 182.596, 1120.0),
    ("peak_ewma", 130.392, 819.0),
    ("oracle", 141.84, 150.0),
];
const SEED_STEADY_30S: Baseline = &[
    ("round_robin", 252.009, 503.0),
    ("weighted_round_robin", 156.571, 503.0),
    ("least_in_flight", 138.784, 503.0),
    ("key_hash", 254.706, 503.0),
    ("ring_hash", 252.592, 503.0),
    ("least_response_time", 60.465, 303.0),
    ("p2c_peak_ewma", 139.974, 503.0),
    ("peak_ewma", 78.881, 153.0),
    ("oracle", 53.0, 53.0),
];
