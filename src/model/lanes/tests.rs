use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::admission::{Cap, InFlight, Lane, Route, Terms, admit};
use crate::outcome::{FailureKind, Outcome};
use crate::pick::testing::Fixture;

#[test]
fn mask_is_a_power_of_two_minus_one_within_the_lanes() {
    let m = mask_for_cores();
    assert!(m < LANES);
    assert_eq!((m + 1).count_ones(), 1);
}

#[test]
fn a_thread_keeps_its_lane_and_threads_take_turns() {
    let here = current(LANES - 1);
    assert_eq!(current(LANES - 1), here);
    assert_eq!(current(0), 0);
    // Threads number themselves in the order they first pick (others may
    // start in between under the test harness: the numbers only grow).
    let number = || {
        std::thread::spawn(|| current(usize::MAX >> 1))
            .join()
            .unwrap()
    };
    let (a, b) = (number(), number());
    assert!(b > a, "{a} then {b}");
}

/// A call started in lane `lane` of endpoint 0.
fn start(f: &Fixture, lane: usize, now_ns: u64) -> InFlight {
    let terms = Terms::new(
        Route::Healthy,
        Cap::default(),
        &[],
        now_ns,
        f.model.clock.epoch(),
    );
    let handle = Lane::new(Arc::clone(&f.states[0]), lane, None);
    admit(&terms, &f.states[0], &handle, now_ns).expect("no cap")
}

#[test]
fn a_pick_counts_its_own_lane_and_the_endpoint_counts_all() {
    let f = Fixture::with_lanes(&[1.0, 1.0], 3);
    let _a = [start(&f, 0, 0), start(&f, 0, 0)];
    let b = start(&f, 2, 0);
    assert_eq!(b.concurrency(), 1, "lane 2 had nothing in flight");
    assert_eq!(f.cx_in(&(), 0).in_flight(0), 2);
    assert_eq!(f.cx_in(&(), 2).in_flight(0), 1);
    assert_eq!(f.cx_in(&(), 1).in_flight(0), 0);
    assert_eq!(f.states[0].in_flight(), 3);
    assert_eq!(f.states[0].picks(), 3);
    // A guard dropped on another thread gives its own lane's slot back.
    std::thread::spawn(move || drop(b)).join().unwrap();
    assert_eq!(f.cx_in(&(), 2).in_flight(0), 0);
    assert_eq!(f.states[0].in_flight(), 2);
}

/// The default RTT (30 ms) as a few ms of decay leave it: no sample.
fn is_default(mean_ns: f64) -> bool {
    (29.9e6..=30e6).contains(&mean_ns)
}

#[test]
fn a_success_stays_in_its_lane_and_a_failure_reaches_every_lane() {
    let f = Fixture::with_lanes(&[1.0], 1);
    let s = &f.states[0];
    let (rates, ms) = (f.model.rates, 1_000_000);
    s.record(&Outcome::Success, 2 * ms, 10 * ms, 1, 0);
    assert_eq!(s.estimate_with(10 * ms, rates, 0).mean_ns, 2e6);
    assert!(is_default(s.estimate_with(10 * ms, rates, 1).mean_ns));
    // The merged read is the lane sampled last.
    assert_eq!(s.estimate(f.model.clock.at(10 * ms)).mean_ns, 2e6);
    s.record(&Outcome::Failure(FailureKind::Error), ms, 11 * ms, 1, 0);
    for lane in 0..2 {
        let e = s.estimate_with(11 * ms, rates, lane);
        assert_eq!(e.mean_ns, 1e9, "lane {lane} has the penalty");
        assert!(e.failure_rate > 0.0, "lane {lane}");
    }
    assert_eq!((s.requests(), s.failures()), (2, 1));
    // A lane the endpoint does not have reads as lane 0.
    assert_eq!(s.lanes().count(), 2);
    assert_eq!(
        s.estimate_with(11 * ms, rates, 2),
        s.estimate_with(11 * ms, rates, 0)
    );
}

/// Whether lane `lane`'s kept fade rate is its floor's own, to the bit.
fn fade_is_the_floors(s: &EndpointState, lane: usize) -> bool {
    let floor = s.view(lane).floor;
    floor.fade.to_bits() == Floor::of(floor.ns).fade.to_bits()
}

#[test]
fn a_lanes_fade_rate_follows_its_floor() {
    let f = Fixture::with_lanes(&[1.0], 1);
    let s = &f.states[0];
    let ms = 1_000_000;
    // No floor yet: nothing fades.
    assert_eq!(s.view(0).floor.ns, f64::INFINITY);
    assert_eq!(s.view(0).floor.fade, 0.0);
    // A 1 ms floor: its excess fades within 1000 floors, a second.
    s.record(&Outcome::Success, ms, 10 * ms, 1, 0);
    assert_eq!(s.view(0).floor.ns, 1e6);
    assert_eq!(s.view(0).floor.fade, 1e-9);
    assert_eq!(s.view(1).floor.fade, 0.0, "lane 1 has no floor");
    // Queued answers creep the floor up, and the rate with it.
    for i in 0..4_000 {
        s.record(&Outcome::Success, 10 * ms, (11 + i) * ms, 1, 0);
    }
    assert!(s.view(0).floor.ns > 1.5e6, "{:?}", s.view(0).floor);
    assert!(fade_is_the_floors(s, 0), "{:?}", s.view(0).floor);
}

proptest! {
    /// Whatever answers a lane records (successes and failures, queued or
    /// not, new floors and creeping ones), the rate kept beside its floor
    /// is the floor's own.
    #[test]
    fn the_kept_fade_rate_is_always_the_floors(
        answers in proptest::collection::vec((0..2usize, 1e3f64..1e9, 1..16usize, 0..4u8), 1..80),
    ) {
        let f = Fixture::with_lanes(&[1.0], 1);
        let s = &f.states[0];
        for (t, (lane, latency, k, o)) in answers.into_iter().enumerate() {
            let outcome = match o {
                0 => Outcome::Failure(FailureKind::Error),
                _ => Outcome::Success,
            };
            s.record(&outcome, latency as u64, (t as u64 + 1) * 1_000_000, k, lane);
            prop_assert!(fade_is_the_floors(s, 0) && fade_is_the_floors(s, 1), "{:?}", s.view(lane).floor);
        }
    }
}

#[test]
fn without_per_thread_load_an_endpoint_has_one_lane() {
    let f = Fixture::with_lanes(&[1.0], 0);
    let s = &f.states[0];
    assert_eq!((s.lanes().count(), s.mask()), (1, 0));
    s.record(&Outcome::Failure(FailureKind::Error), 1, 5, 1, 0);
    assert!(
        s.estimate_with(5, f.model.rates, 0).mean_ns > 0.99e9,
        "the penalty"
    );
}

/// One step of a run over an endpoint with four lanes.
#[derive(Debug, Clone)]
enum Step {
    Start(usize),
    /// Ends the `n`th live call (modulo their number) as answered: a
    /// success, a failure or ignored.
    Finish(usize, u8),
    /// Drops the `n`th live call unanswered.
    Abandon(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..LANES).prop_map(Step::Start),
        (any::<usize>(), 0..3u8).prop_map(|(n, o)| Step::Finish(n, o)),
        any::<usize>().prop_map(Step::Abandon),
    ]
}

proptest! {
    /// Whatever threads start and end calls in whichever lanes, every lane
    /// counts exactly its live calls, the endpoint counts them all, and
    /// every call is counted once in the totals.
    #[test]
    fn lanes_count_every_call_exactly_once(steps in proptest::collection::vec(step(), 0..60)) {
        let f = Fixture::with_lanes(&[1.0], 3);
        let mut live: Vec<(usize, InFlight)> = Vec::new();
        let (mut started, mut answered) = (0u64, 0u64);
        for (t, s) in steps.into_iter().enumerate() {
            match s {
                Step::Start(lane) => {
                    live.push((lane & 3, start(&f, lane, t as u64)));
                    started += 1;
                }
                Step::Finish(n, o) if !live.is_empty() => {
                    let (_, g) = live.swap_remove(n % live.len());
                    let outcome = match o {
                        0 => Outcome::Success,
                        1 => Outcome::Failure(FailureKind::Error),
                        _ => Outcome::Ignore,
                    };
                    answered += u64::from(outcome != Outcome::Ignore);
                    g.finish(|_| outcome);
                }
                Step::Abandon(n) if !live.is_empty() => {
                    drop(live.swap_remove(n % live.len()));
                }
                _ => {}
            }
            let s = &f.states[0];
            for lane in 0..=3 {
                let mine = live.iter().filter(|(l, _)| *l == lane).count();
                prop_assert_eq!(s.view(lane).in_flight(), mine);
            }
            prop_assert_eq!(s.in_flight(), live.len());
            prop_assert_eq!(s.requests(), answered);
            prop_assert_eq!(s.picks(), started);
        }
    }
}

#[test]
fn lanes_are_opt_in_and_a_cap_or_adaptive_limits_keep_one() {
    use crate::balance::Balance;
    let svc = tower::service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(()) });
    let mask = |b: crate::balance::Builder<u8, _>| {
        b.endpoint(1, svc).build().unwrap().shared.model.lane_mask
    };
    let on = || Balance::builder().per_thread_load(true);
    assert_eq!(mask(Balance::builder()), 0);
    assert_eq!(mask(on()), mask_for_cores());
    assert_eq!(mask(on().per_thread_load(false)), 0);
    assert_eq!(mask(on().max_in_flight(4)), 0);
    let limits = crate::model::AdaptiveConcurrency::default();
    assert_eq!(mask(on().adaptive_concurrency(limits)), 0);
}
