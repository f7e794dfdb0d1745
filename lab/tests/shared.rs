//! Shared resources, errors by kind, POSTs and the retry layer (issue
//! 31), in `--sim`: deterministic, on tokio's paused clock.

mod common;

use common::{parse, refused, row, sim};

/// `n` replicas (1 ms, 100 workers: never the limit) sharing one pool of
/// 5 slots held 10 ms each: 500 requests/s at most.
fn pooled(n: u32, wait: &str) -> lab::scenario::Scenario {
    parse(&format!(
        r#"
name = "pool"
duration = "10s"
pickers = ["round_robin"]
[load]
vus = 100
think = "1ms"
[[resource]]
name = "db"
slots = 5
hold = "10ms"
{wait}
[[backend]]
name = "r"
count = {n}
delay = "1ms"
workers = 100
uses = ["db"]
"#
    ))
}

use tower_lb_lab as lab;

#[test]
fn a_shared_pool_holds_throughput_at_slots_over_hold_whatever_the_replicas() {
    // slots / hold = 5 / 10 ms = 500/s. In the sim each hold lasts exactly
    // 10 ms and the pool never idles (100 users wait on it), so the only
    // loss is at the window's edges: at most the 5 holds in progress at
    // each, 10 of 5,000 requests (0.2%). 1% covers it.
    for n in [2, 4] {
        let r = sim(&pooled(n, ""), &["round_robin", "peak_ewma"], 10);
        for p in ["round_robin", "peak_ewma"] {
            let x = row(&r, p);
            assert!(
                (x.rps - 500.0).abs() <= 5.0,
                "{n} replicas, {p}: {}",
                r.table()
            );
            assert_eq!(x.errors, 0);
        }
    }
}

#[test]
fn a_pool_that_makes_requests_wait_too_long_fails_them_with_its_status() {
    let r = sim(
        &pooled(4, "wait = \"50ms\"\nstatus = 503"),
        &["round_robin"],
        5,
    );
    let x = row(&r, "round_robin");
    assert!(x.errors > 0);
    assert_eq!(x.errors_by.get("503"), Some(&x.errors), "{:?}", x.errors_by);
    // What succeeds still passes at the pool's rate.
    assert!((x.rps * (1.0 - x.error_rate) - 500.0).abs() <= 5.0);
    assert!(r.table().contains("errors 503"));
}

#[test]
fn errors_are_counted_by_status_and_kind() {
    let sc = parse(
        r#"
name = "kinds"
duration = "5s"
pickers = ["round_robin"]
[load]
vus = 12
think = "10ms"
[resilience.retry]
max_attempts = 1
per_try_timeout = "50ms"
[[backend]]
name = "conflicts"
delay = "5ms"
events = [{ at = "0s", error_rate = 0.5, status = 409 }]
[[backend]]
name = "down"
delay = "5ms"
events = [{ at = "0s", down = true }]
[[backend]]
name = "slow"
delay = "200ms"
"#,
    );
    let r = sim(&sc, &["round_robin"], 5);
    let x = row(&r, "round_robin");
    let by = &x.errors_by;
    for k in ["409", "connect", "timeout"] {
        assert!(by.get(k).is_some_and(|n| *n > 0), "{k}: {by:?}");
    }
    assert_eq!(by.values().sum::<u64>(), x.errors, "{by:?}");
    let json = r.to_json();
    assert!(json.contains("\"errors_by\""), "the JSON carries the split");
}

/// A replica that fails half its requests with a fast 503, under a retry
/// layer of 3 attempts; requests of `method`.
fn flaky(method: &str, non_idempotent: bool) -> lab::scenario::Scenario {
    parse(&format!(
        r#"
name = "posts"
duration = "5s"
pickers = ["round_robin"]
[load]
vus = 10
think = "10ms"
method = "{method}"
body = 512
[resilience.retry]
max_attempts = 3
non_idempotent = {non_idempotent}
[[backend]]
name = "a"
delay = "5ms"
events = [{{ at = "0s", error_rate = 0.5, status = 503, error_delay = "1ms" }}]
[[backend]]
name = "b"
delay = "5ms"
"#
    ))
}

#[test]
fn posts_are_not_replayed_unless_the_switch_is_on() {
    let retries = |sc: &lab::scenario::Scenario| {
        let r = sim(sc, &["round_robin"], 5);
        let x = row(&r, "round_robin");
        (
            x.retries.unwrap(),
            x.not_replayable.unwrap(),
            x.errors,
            r.table(),
        )
    };
    let (get, get_not, get_errors, _) = retries(&flaky("GET", false));
    assert!(get > 0 && get_not == 0);
    let (post, post_not, post_errors, table) = retries(&flaky("POST", false));
    assert_eq!(post, 0, "a POST is not replayed");
    assert!(post_not > 0, "the failures it could not retry are counted");
    assert!(table.contains("not replayed"), "{table}");
    assert!(post_errors > get_errors);
    let (opted, opted_not, _, _) = retries(&flaky("POST", true));
    assert!(opted > 0 && opted_not == 0, "non_idempotent = true replays");
}

#[test]
fn the_shipped_shared_bottleneck_holds_at_the_pool_with_2_and_4_replicas() {
    let sc = lab::scenario::Scenario::load("shared-bottleneck").unwrap();
    let r = sim(&sc, &["peak_ewma"], 20);
    let m = row(&r, "peak_ewma").membership.clone().unwrap();
    let [two, four] = &m.phases[..] else {
        panic!("{m:?}")
    };
    assert_eq!((two.replicas, four.replicas), (2, 4));
    // 10 slots / 20 ms = 500/s, with 2 replicas and with 4.
    for p in [two, four] {
        assert!((p.ok_rps - 500.0).abs() <= 10.0, "{p:?}\n{}", r.table());
    }
}

#[test]
fn bad_resources_are_refused_with_their_field() {
    let sc = |res: &str, uses: &str| {
        format!(
            "name = \"x\"\nduration = \"1s\"\npickers = [\"round_robin\"]\n[load]\nvus = 1\n[[resource]]\nname = \"db\"\n{res}\n[[backend]]\nname = \"a\"\ndelay = \"1ms\"\nuses = [\"{uses}\"]\n"
        )
    };
    let cases = [
        (sc("slots = 0\nhold = \"5ms\"", "db"), "`resource[0].slots`"),
        (sc("slots = 5\nhold = \"0ms\"", "db"), "`resource[0].hold`"),
        (sc("slots = 5\nhold = \"-5ms\"", "db"), "hold"),
        (
            sc("slots = 5\nhold = \"5ms\"\nwait = \"0s\"", "db"),
            "`resource[0].wait`",
        ),
        (
            sc("slots = 5\nhold = \"5ms\"\nstatus = 200", "db"),
            "`resource[0].status`",
        ),
        (
            sc("slots = 5\nhold = \"5ms\"", "cache"),
            "`backend[0].uses[0]`",
        ),
    ];
    for (text, field) in cases {
        let e = refused(&text);
        assert!(e.contains(field), "{field}: {e}");
    }
    let e = refused(
        &sc("slots = 5\nhold = \"5ms\"", "db").replace("vus = 1", "vus = 1\nbody = 2000000"),
    );
    assert!(e.contains("`load.body`"), "{e}");
}
