//! The time helpers' tests: the arithmetic against the standard library,
//! the decay against libm, and the request path's clock.

use super::*;

#[test]
fn epoch_nanoseconds_agree_with_the_standard_library() {
    let at = Instant::now();
    let epoch = Epoch::new(at);
    for ns in [
        0,
        1,
        999_999_999,
        1_000_000_000,
        1_234_567_891,
        86_400_000_000_123,
    ] {
        let t = at + Duration::from_nanos(ns);
        assert_eq!(epoch.nanos(t), ns);
        assert_eq!(epoch.nanos(t), nanos(t.saturating_duration_since(at)));
    }
    // Before the epoch: zero, as `saturating_duration_since`.
    let later = Epoch::new(at + Duration::from_secs(3));
    assert_eq!(later.nanos(at), 0);
    // A year on: still exact.
    let far = after(at, MAX_DURATION);
    assert_eq!(epoch.nanos(far), nanos(MAX_DURATION));
    assert_eq!(epoch.at(epoch.nanos(far)), far);
}

proptest::proptest! {
    /// `nanos` is `as_nanos` wherever that fits a `u64`, and saturates
    /// where it does not.
    #[test]
    fn nanos_is_as_nanos_saturated(secs in proptest::num::u64::ANY, sub in 0u32..1_000_000_000) {
        let d = Duration::new(secs, sub);
        let want = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        proptest::prop_assert_eq!(nanos(d), want);
    }
}

proptest::proptest! {
    /// `elapsed` is `saturating_duration_since`, in either order, also
    /// for instants too far for nanoseconds in a `u64`.
    #[test]
    fn elapsed_is_the_standard_librarys_difference(
        a in 0u64..1 << 62,
        b in 0u64..1 << 62,
        far in proptest::bool::ANY,
    ) {
        let at = Instant::now();
        let (start, now) = (at + Duration::from_nanos(a), at + Duration::from_nanos(b));
        // 600 years on: past the nanoseconds a `u64` holds (584 years).
        let now = if far { after(now, MAX_DURATION * 600) } else { now };
        proptest::prop_assert_eq!(elapsed(start, now), now.saturating_duration_since(start));
        proptest::prop_assert_eq!(elapsed(now, start), start.saturating_duration_since(now));
    }
}

#[tokio::test(start_paused = true)]
async fn the_epoch_follows_a_paused_clock() {
    let epoch = Epoch::new(Instant::now());
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert_eq!(epoch.nanos(Instant::now()), 1_500_000_000);
}

#[test]
fn decay_matches_exp_on_both_paths() {
    const TAU: f64 = 10e9;
    for x in [
        0.0,
        1e-9,
        1e-4,
        0.01,
        0.015,
        1.0 / 64.0,
        0.02,
        0.5,
        1.0,
        5.0,
        50.0,
    ] {
        let got = decay((x * TAU) as u64, 1.0 / TAU);
        let want = (-x).exp();
        assert!(
            (got - want).abs() <= 3e-7 * want + 1e-9,
            "x={x}: {got} vs {want}"
        );
    }
}

#[test]
fn exp_neg_is_close_everywhere() {
    let mut x = 0.0f64;
    while x < 800.0 {
        let (got, want) = (exp_neg(x), (-x).exp());
        assert!(
            (got - want).abs() <= 3e-7 * want + 1e-300,
            "x={x}: {got} vs {want}"
        );
        x = x * 1.01 + 0.001;
    }
    assert_eq!(exp_neg(1e6), 0.0);
}

#[test]
fn saturates_instead_of_panicking() {
    assert_eq!(nanos(Duration::MAX), u64::MAX);
    assert_eq!(nanos(Duration::from_nanos(7)), 7);
    let now = Instant::now();
    assert!(after(now, Duration::MAX) >= now);
    assert_eq!(
        after(now, Duration::from_secs(1)),
        now + Duration::from_secs(1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_paused_runtime_gets_tokios_clock() {
    let clock = Clock::detect(Epoch::new(Instant::now()));
    assert!(!clock.is_counter());
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert_eq!(clock.now_ns(), 1_500_000_000);
}

#[tokio::test]
async fn a_running_runtime_gets_the_counter_and_it_keeps_tokios_time() {
    let epoch = Epoch::new(Instant::now());
    let clock = Clock::detect(epoch);
    assert!(clock.is_counter());
    // Bracketed by tokio's clock: the first reading anchors, the next
    // ones go through the offset. The bound is the counter's drift
    // over one interval plus a reading's own time, far under 1 ms.
    const SLACK: u64 = 1_000_000;
    for _ in 0..1000 {
        let before = epoch.nanos(Instant::now());
        let now = clock.now_ns();
        let after = epoch.nanos(Instant::now());
        assert!(
            before <= now + SLACK && now <= after + SLACK,
            "{before} <= {now} <= {after}"
        );
    }
}

#[test]
fn outside_a_runtime_the_counter_is_used() {
    assert!(Clock::detect(Epoch::new(Instant::now())).is_counter());
}

/// A reading another clock of the counter took (a retry layer's) stands in
/// for this clock's own: the balancer reads nothing, and the time is the
/// reading's, on its own epoch; a clock reading tokio's clock ignores it.
#[tokio::test]
async fn another_clocks_reading_stands_in_for_a_counter_reading() {
    let layer = Clock::detect(Epoch::new(Instant::now()));
    tokio::time::sleep(Duration::from_millis(2)).await;
    let epoch = Epoch::new(Instant::now());
    let balancer = Clock::detect(epoch);
    let _ = balancer.now_ns(); // anchored
    let reading = layer.read();
    let raw = reading.raw.expect("the layer reads the counter");
    let given = balancer.now_ns_or(Some(raw));
    // Taken as given: the same time however long after it is asked.
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(balancer.now_ns_or(Some(raw)), given);
    assert!(balancer.now_ns() >= given + 2_000_000);
    // The reading's own time, on the balancer's epoch (within the
    // anchors' drift and a reading's time).
    const SLACK: u64 = 1_000_000;
    let at = epoch.nanos(reading.at);
    assert!(given.abs_diff(at) <= SLACK, "{given} against {at}");
    // No reading given: the clock's own.
    let before = balancer.now_ns();
    assert!(balancer.now_ns_or(None) >= before);
    // A clock on tokio's clock reads tokio's clock.
    let runtime = Clock::runtime(epoch);
    let before = epoch.nanos(Instant::now());
    let read = runtime.now_ns_or(Some(raw));
    assert!(read >= before && read >= given + 2_000_000);
    assert_eq!(runtime.read().raw, None);
}

proptest::proptest! {
    /// Whatever the counter's rate against tokio's clock (within 1%)
    /// and wherever the two start, a reading is never further from
    /// tokio's time than the drift of one interval, and tokio's clock
    /// is read once per interval at most.
    #[test]
    fn the_anchor_keeps_within_one_intervals_drift(
        start in 0u64..1 << 50,
        runtime_start in 0u64..1 << 50,
        ppm in -10_000i64..10_000,
        steps in proptest::collection::vec(0u64..40_000_000, 1..200),
    ) {
        let anchor = Anchor::new();
        let every = nanos(ANCHOR_EVERY);
        let runtime_at = |counter: u64| {
            let run = (counter - start) as i128;
            (runtime_start as i128 + run + run * ppm as i128 / 1_000_000) as u64
        };
        let (mut counter, mut reads, mut last_read) = (start, 0u64, None::<u64>);
        for step in steps {
            counter += step;
            let mut read = false;
            let got = anchor.epoch_ns(counter, || {
                read = true;
                runtime_at(counter)
            });
            if read {
                reads += 1;
                if let Some(last) = last_read {
                    proptest::prop_assert!(counter - last >= every);
                }
                last_read = Some(counter);
            }
            let want = runtime_at(counter);
            let bound = every * ppm.unsigned_abs() / 1_000_000 + 2;
            proptest::prop_assert!(
                got.abs_diff(want) <= bound,
                "{got} vs {want} (bound {bound})"
            );
        }
        proptest::prop_assert!(reads >= 1);
    }
}
