//! Scale-out through a real etcd (issue 40, item 4): `--discovery etcd`
//! registers each replica under a lease when it joins, the balancers take
//! their endpoints from a watch of the prefix, and a crashed replica (its
//! keep-alive stopped, its lease never revoked) leaves when the lease
//! expires. The http test needs feature `etcd` and the etcd binary
//! (skipped with a notice without it, unless `TOWER_LB_REQUIRE_ETCD` is
//! set, as CI sets it); the refusals need neither.

mod common;

use tower_lb_lab as lab;

use common::{parse, refused};
use lab::discovery::Discovery;
use lab::driver::{Options, run_scenario};

/// Three replicas of 8 workers at 5 ms under 20 users: `a` and `c` from
/// the start, `b` joining at 1 s, and `c` crashing at 2 s with a lease of
/// 2 s (etcd's shortest with its default timings).
const CRASH: &str = r#"
name = "etcd-crash"
duration = "7s"
pickers = ["round_robin", "tower_p2c"]
[load]
vus = 20
think = "10ms"
[[backend]]
name = "a"
delay = "5ms"
workers = 8
[[backend]]
name = "b"
delay = "5ms"
workers = 8
join = "1s"
[[backend]]
name = "c"
delay = "5ms"
workers = 8
[etcd]
ttl = "2s"
crash = { c = "2s" }
"#;

fn etcd_options(sim: bool) -> Options {
    Options {
        sim,
        quiet: true,
        discovery: Discovery::Etcd,
        ..Options::default()
    }
}

#[test]
fn etcd_discovery_is_refused_in_sim_and_without_joins() {
    let e = run_scenario(&parse(CRASH), &etcd_options(true)).expect_err("refused in --sim");
    assert!(e.message.contains("not --sim"), "{}", e.message);
    let static_fleet = CRASH
        .replace("join = \"1s\"", "")
        .replace("crash = { c = \"2s\" }", "");
    let e = run_scenario(&parse(&static_fleet), &etcd_options(false))
        .expect_err("refused without joins");
    assert!(e.message.contains("no replica"), "{}", e.message);
    let e = lab::args::parse(&["--discovery".into(), "dns".into()]).expect_err("unknown");
    assert!(e.message.contains("handle or etcd"), "{}", e.message);
}

#[test]
fn an_etcd_crash_must_name_a_backend_after_its_join() {
    let unknown = refused(&CRASH.replace("crash = { c", "crash = { z"));
    assert!(unknown.contains("etcd.crash.z"), "{unknown}");
    let early = refused(&CRASH.replace("crash = { c = \"2s\" }", "crash = { b = \"1s\" }"));
    assert!(early.contains("after its join"), "{early}");
    let ttl = refused(&CRASH.replace("ttl = \"2s\"", "ttl = \"500ms\""));
    assert!(ttl.contains("etcd.ttl"), "{ttl}");
}

/// The etcd binary, or `false` with a notice (a failure when CI requires
/// etcd).
#[cfg(feature = "etcd")]
fn have_etcd() -> bool {
    if tower_lb_etcd::local::LocalEtcd::binary().is_some() {
        return true;
    }
    assert!(
        std::env::var_os("TOWER_LB_REQUIRE_ETCD").is_none(),
        "TOWER_LB_REQUIRE_ETCD is set but there is no etcd binary (apt-get install etcd-server)"
    );
    eprintln!("skipped: no etcd binary (apt-get install etcd-server to run this test)");
    false
}

#[cfg(feature = "etcd")]
#[test]
fn a_registered_replica_takes_its_share_and_a_crashed_one_leaves_when_its_lease_expires() {
    if !have_etcd() {
        return;
    }
    let sc = parse(CRASH);
    let r = run_scenario(&sc, &etcd_options(false)).expect("the lab runs");
    let (a, b, c) = (0, 1, 2);
    for x in &r.runs {
        let why = format!("{}\n{}", x.picker, r.table());
        let e = x.etcd.as_ref().expect("the etcd block");
        assert!(e.errors.is_empty(), "{why}");
        let joined = &e.replicas[b];
        let crashed = &e.replicas[c];
        assert_eq!(
            (joined.backend.as_str(), crashed.backend.as_str()),
            ("b", "c")
        );

        // b registered at its join (not before), reached the pool, then
        // took a share; before its join it had none.
        let registered = joined.registered_s.expect("b registered");
        assert!(registered >= 1.0, "{why}");
        let in_pool = joined.in_pool_s.expect("b reached the balancers");
        assert!(in_pool >= registered, "{why}");
        assert!(x.timeline[0].share[b] == 0.0, "{why}");
        assert!(x.timeline[1..].iter().any(|s| s.share[b] > 0.1), "{why}");
        if x.rival.is_none() {
            let first = joined.first_pick_s.expect("b was picked");
            println!(
                "figure: {}: registration -> first request: {:.0} ms",
                x.picker,
                (first - registered) * 1e3
            );
        }

        // c crashed at 2 s: its key stayed until its lease expired (a
        // revoke would delete it within milliseconds; a lease renewed a
        // third of its TTL before the crash runs at least 1.33 s more),
        // it kept its share meanwhile, then had none.
        assert_eq!(crashed.leave.as_deref(), Some("crash"), "{why}");
        let left = crashed.left_s.expect("c crashed");
        assert!(left >= 2.0, "{why}");
        let deleted = crashed.key_deleted_s.expect("c's lease expired");
        let out = crashed.out_of_pool_s.expect("c left the balancers");
        assert!(deleted >= left + 1.0 && out >= left + 1.0, "{why}");
        assert!(
            x.timeline[2].share[c] > 0.1,
            "served after its crash: {why}"
        );
        let gone = out.ceil() as usize;
        assert!(
            gone < x.timeline.len(),
            "c left before the row's end: {why}"
        );
        for s in &x.timeline[gone..] {
            assert_eq!(s.share[c], 0.0, "{why}");
            assert!(s.share[a] > 0.0 && s.share[b] > 0.0, "{why}");
        }
        println!(
            "figure: {}: crash {left:.2} s, key deleted (lease expired) {deleted:.2} s, out of every pool {out:.2} s: {:.0} ms after the deletion",
            x.picker,
            (out - deleted) * 1e3
        );

        // The crashed replica's server kept answering: nothing failed.
        assert_eq!(x.errors, 0, "{why}");
        assert!(x.timeline.iter().all(|s| s.errors == 0), "{why}");
    }
}
