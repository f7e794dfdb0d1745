//! `--find-capacity` (issue 31): the search finds a knee computed by
//! hand, within one step; bad settings are refused with their field.

mod common;

use common::{options, parse, refused};
use tower_lb_lab as lab;

use lab::driver::find_capacity::find;

/// One replica of 10 workers at a fixed 10 ms: 1,000 requests/s. Arrivals
/// a fixed gap apart (`uniform`) never queue up to 1,000/s (each finds a
/// worker free, p99 = 10 ms) and queue without bound past it (the p99
/// grows by the second): the knee is 1,000/s exactly.
fn knee(search: &str) -> lab::scenario::Scenario {
    parse(&format!(
        r#"
name = "knee"
duration = "5s"
pickers = ["round_robin"]
[load]
rate = 500
arrivals = "uniform"
drain = "1s"
[capacity]
p99 = "50ms"
{search}
[[backend]]
name = "a"
delay = "10ms"
workers = 10
"#
    ))
}

#[test]
fn the_search_finds_the_hand_computed_knee_within_one_step() {
    let sc = knee("start = 200\nstep = 200\nbisect = 0");
    let found = find(&sc, &options(&["round_robin", "peak_ewma"], 5, 1)).unwrap();
    for c in &found.curves {
        assert!(c.limit_found, "{}", found.table());
        let cap = c.capacity.unwrap();
        // Coarse steps of 200: 1,000 holds, 1,200 fails.
        assert_eq!(cap, 1000.0, "{}", found.table());
        assert!(!c.points.last().unwrap().held);
    }
    assert_eq!(found.unit, "arrivals/s");
    let chart = found.chart();
    assert_eq!(chart.matches("<polyline").count(), 2, "a line per picker");
    assert!(chart.contains(r#"class="target""#), "the p99 target drawn");
}

#[test]
fn bisection_narrows_between_the_last_good_and_the_first_bad_step() {
    let sc = knee("start = 300\nstep = 300\nbisect = 3");
    let found = find(&sc, &options(&["round_robin"], 5, 1)).unwrap();
    let c = &found.curves[0];
    // 300, 600, 900 hold, 1,200 fails; then 1,050 fails, 975 holds,
    // 1,012.5 fails: 975, within 2.5% of the knee (a step was 30%).
    let cap = c.capacity.unwrap();
    assert!((cap - 1000.0).abs() <= 300.0 / 8.0, "{}", found.table());
    assert_eq!(c.points.len(), 7, "{}", found.table());
}

#[test]
fn a_closed_loop_steps_in_users_from_the_defaults() {
    // Users who think 90 ms and wait 10 ms send 10/s each: the replica's
    // 1,000/s serve 100 of them unqueued. Past that it serves 1,000/s and
    // N users each take N / 1,000 s a round: a latency of N / 1,000 − 90
    // ms. A p99 of 35 ms allows N ≤ 125. The default step is a quarter of
    // the scenario's 40 users (10), from 10: 120 holds, 130 (40 ms) fails.
    let sc = parse(
        r#"
name = "users"
duration = "5s"
pickers = ["round_robin"]
[load]
vus = 40
think = "90ms"
[capacity]
p99 = "35ms"
bisect = 0
[[backend]]
name = "a"
delay = "10ms"
workers = 10
"#,
    );
    let found = find(&sc, &options(&["round_robin"], 5, 1)).unwrap();
    let c = &found.curves[0];
    assert_eq!(found.unit, "users");
    assert_eq!(c.capacity, Some(120.0), "{}", found.table());
    assert!(c.limit_found);
}

#[test]
fn bad_capacity_settings_are_refused_with_their_field() {
    let sc = |c: &str| {
        format!(
            "name = \"x\"\nduration = \"1s\"\npickers = [\"round_robin\"]\n[load]\nvus = 4\n[capacity]\n{c}\n[[backend]]\nname = \"a\"\ndelay = \"1ms\"\n"
        )
    };
    let cases = [
        ("max_steps = 0", "`capacity.max_steps`"),
        ("max_steps = 101", "`capacity.max_steps`"),
        ("bisect = 11", "`capacity.bisect`"),
        ("errors = nan", "`capacity.errors`"),
        ("errors = 1.5", "`capacity.errors`"),
        ("p99 = \"0ms\"", "`capacity.p99`"),
        ("step = -1.0", "`capacity.step`"),
        ("start = inf", "`capacity.start`"),
        ("step = 2.5", "`capacity.step`"),
    ];
    for (text, field) in cases {
        let e = refused(&sc(text));
        assert!(e.contains(field), "{text}: {e}");
    }
}

#[test]
fn a_search_too_long_is_refused_before_it_runs() {
    let mut sc = knee("max_steps = 100\nbisect = 10");
    sc.duration = lab::scenario::Dur(std::time::Duration::from_secs(3600));
    let mut o = options(&["round_robin"], 3600, 1);
    o.duration = None;
    let e = find(&sc, &o).unwrap_err();
    assert!(e.input && e.message.contains("capacity.max_steps"), "{e}");
}
