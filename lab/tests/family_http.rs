//! Issue 36's no-starvation bound over real sockets, where it shows (a
//! connection set-up or a scheduler hiccup is as large as a LAN replica's
//! service time; the sim's service times carry no such noise): three
//! identical replicas answering in 200 µs, 8 closed-loop users, the
//! default picker, 10 s measured after a 1 s warm-up (the family's case
//! `l01`). After the first second no replica may get under a tenth of its
//! fair share for more than 1 s, and none over twice it in any 1 s
//! window (no herd: the issue reported 98% on one replica, 2.94 times the
//! fair share). Before the default credited a replica no more parallelism
//! than the load it spreads, it held whatever split of the users its
//! estimates first favoured, and one run in five went over 2; since, the
//! busiest window has stayed well under 2 (docs/lab.md has the runs).
//!
//! A test binary of its own: cargo runs test binaries one at a time, so no
//! other lab test competes with it for the cores while it measures. The lab
//! is compiled optimized even here (the workspace's `Cargo.toml` says why):
//! a debug lab's own overhead took the busiest window past 2 once in
//! thirteen runs.

use std::time::Duration;

use tower_lb_lab as lab;

use lab::family::{self, FamilyArgs};

#[test]
fn http_lan_three_replicas_default_no_starvation() {
    let a = FamilyArgs {
        cases: Some(vec!["l01".into()]),
        pickers: Some(vec!["peak_ewma".parse().unwrap()]),
        duration: Some(Duration::from_secs(10)),
        quiet: true,
        ..FamilyArgs::new("http")
    };
    let r = family::run(&a).unwrap().expect("a run");
    assert!(r.http, "the http family runs over real sockets");
    assert!(r.shares[0], "l01 is under the share bounds");
    let s = r
        .card("peak_ewma")
        .and_then(|c| c.shares.as_ref())
        .unwrap_or_else(|| panic!("no share figures\n{}", r.table()));
    let mut timeline = String::new();
    r.timelines(&mut timeline);
    assert!(
        s.starved_s <= 1 && s.max_mean <= 2.0,
        "a replica starved for {} s; the busiest 1 s window at {:.2} of the fair share\n{timeline}",
        s.starved_s,
        s.max_mean
    );
}
