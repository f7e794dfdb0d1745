//! Scale-out (issue 31): replicas that join and leave through the
//! balancers' `Handle` (the rivals' `Discover` stream), throughput per
//! replica count, and each picker's time to give a newcomer its share.
//! `--sim`, paused clock, deterministic; one http-mode run.

mod common;

use std::time::Duration;

use common::{options, parse, refused, row, sim};
use tower_lb_lab as lab;

/// Two replicas of 8 workers at 20 ms (400/s each); the second joins at
/// 3 s (and, with `leave`, leaves at 6 s), under 100 users who keep both
/// busy.
fn two(extra: &str) -> lab::scenario::Scenario {
    parse(&format!(
        r#"
name = "join"
duration = "8s"
pickers = ["round_robin"]
{extra}
[load]
vus = 100
think = "10ms"
[[backend]]
name = "a"
delay = "20ms"
workers = 8
[[backend]]
name = "b"
delay = "20ms"
workers = 8
join = "3s"
"#
    ))
}

#[test]
fn a_joining_replica_gets_its_share_within_two_seconds_under_every_family() {
    let pickers = [
        "round_robin",
        "least_in_flight",
        "p2c_least_in_flight",
        "peak_ewma",
        "ring_hash",
        "tower_p2c",
    ];
    let r = sim(&two(""), &pickers, 8);
    for p in pickers {
        let x = row(&r, p);
        let m = x.membership.as_ref().expect("membership numbers");
        let join = &m.joins[0];
        assert_eq!((join.backend.as_str(), join.at_s), ("b", 3.0));
        assert_eq!(join.fair_share, 0.5);
        let t = join.time_to_share_s.expect("reaches its share");
        assert!(t <= 2.0, "{p}: {t} s\n{}", r.table());
        // One replica's 400/s, then two's 800/s: the join doubles the
        // throughput (within 10%: the queue the first built drains).
        let (one, both) = (&m.phases[0], &m.phases[1]);
        assert_eq!((one.replicas, both.replicas), (1, 2));
        assert!((one.rps - 400.0).abs() < 10.0, "{p}: {one:?}");
        assert!(both.rps > 1.8 * one.rps, "{p}: {both:?}");
        // Before the join, nothing reached it.
        assert!(x.timeline[..3].iter().all(|s| s.share[1] == 0.0), "{p}");
    }
}

#[test]
fn a_leaving_replica_gets_no_more_picks() {
    let mut sc = two("");
    sc.backends[1].leave = Some(lab::scenario::Dur(Duration::from_secs(6)));
    let r = sim(&sc, &["peak_ewma", "tower_p2c"], 8);
    for p in ["peak_ewma", "tower_p2c"] {
        let x = row(&r, p);
        assert!(x.timeline[4].share[1] > 0.3, "{p}");
        assert!(x.timeline[6..].iter().all(|s| s.share[1] == 0.0), "{p}");
        let m = x.membership.as_ref().unwrap();
        let replicas: Vec<usize> = m.phases.iter().map(|p| p.replicas).collect();
        assert_eq!(replicas, [1, 2, 1], "{p}");
    }
}

#[test]
fn slow_start_holds_back_a_weighted_picker() {
    let sc = two("[resilience.slow_start]\nwindow = \"4s\"\ncompare = true");
    let r = sim(&sc, &["weighted_round_robin"], 8);
    let time = |name: &str| {
        row(&r, name).membership.as_ref().unwrap().joins[0]
            .time_to_share_s
            .unwrap_or(f64::INFINITY)
    };
    let (bare, ramped) = (
        time("weighted_round_robin"),
        time("weighted_round_robin+slow_start"),
    );
    assert!(bare <= 1.0, "{}", r.table());
    assert!(
        ramped >= 2.0,
        "the ramp takes seconds: {ramped}\n{}",
        r.table()
    );
}

#[test]
fn the_same_seed_gives_the_same_scale_out() {
    let sc = two("");
    let a = lab::driver::run_scenario(&sc, &options(&["peak_ewma"], 8, 3)).unwrap();
    let b = lab::driver::run_scenario(&sc, &options(&["peak_ewma"], 8, 3)).unwrap();
    assert_eq!(a.to_json(), b.to_json());
}

#[test]
fn the_shipped_scale_out_scales_one_two_four() {
    let sc = lab::scenario::Scenario::load("scale-out").unwrap();
    let r = sim(&sc, &["peak_ewma"], 30);
    let m = row(&r, "peak_ewma").membership.clone().unwrap();
    let rps: Vec<f64> = m.phases.iter().map(|p| p.rps).collect();
    let replicas: Vec<usize> = m.phases.iter().map(|p| p.replicas).collect();
    assert_eq!(replicas, [1, 2, 4]);
    assert!(rps[2] > 3.8 * rps[0], "{rps:?}");
    assert!(r.table().contains("time to share"));
    // The report's chart draws each row's throughput over time.
    let svg = lab::report::svg::chart(&r, sc.has_events());
    assert_eq!(svg.matches(r#"class="rps-series""#).count(), r.runs.len());
}

#[test]
fn bad_membership_is_refused_with_its_field() {
    let base = |b: &str| {
        format!(
            "name = \"x\"\nduration = \"1s\"\npickers = [\"round_robin\"]\n[load]\nvus = 1\n[[backend]]\nname = \"a\"\ndelay = \"1ms\"\n{b}"
        )
    };
    let e = refused(&base("join = \"2s\"\nleave = \"1s\""));
    assert!(e.contains("`backend[0].leave`"), "{e}");
    let e = refused(&base("join = \"2s\""));
    assert!(
        e.contains("`backend`") && e.contains("from the start"),
        "{e}"
    );
    let e =
        refused(&base("").replace("[load]", "[resilience.slow_start]\nwindow = \"0s\"\n[load]"));
    assert!(e.contains("resilience.slow_start.window"), "{e}");
}

/// http mode: a replica's server runs from the start, joins the
/// balancer through its `Handle` at 1 s while the users run, and serves.
/// Round robin, so that the join, not a latency estimate on a machine busy
/// with other tests, decides whether it is picked (with `peak_ewma` the
/// newcomer's 30 ms default estimate against a fast 2 ms peer sometimes
/// kept it out for the two seconds left when the whole suite ran).
#[test]
fn http_mode_a_replica_joins_while_users_run() {
    let sc = parse(
        r#"
name = "join-http"
duration = "3s"
pickers = ["round_robin"]
[load]
vus = 8
think = "5ms"
[[backend]]
name = "a"
delay = "2ms"
[[backend]]
name = "b"
delay = "2ms"
join = "1s"
"#,
    );
    let opts = lab::driver::Options {
        sim: false,
        ..options(&["round_robin"], 3, 1)
    };
    let r = lab::driver::run_scenario(&sc, &opts).unwrap();
    let x = row(&r, "round_robin");
    assert_eq!(x.timeline[0].share[1], 0.0, "not before its join");
    // After the join round robin alternates: b takes about a third of the
    // run's picks (half of the last two seconds).
    let share = x.picks[1] as f64 / (x.picks[0] + x.picks[1]) as f64;
    assert!(
        share > 0.2 && share < 0.45,
        "the joined replica served {share}: {}",
        r.table()
    );
    assert_eq!(x.errors, 0, "{}", r.table());
    let m = x.membership.as_ref().unwrap();
    assert_eq!(m.joins[0].backend, "b");
}
