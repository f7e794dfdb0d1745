//! The fixed cases: the fleets issue 36 names (where each picker failed),
//! the LAN fleets of its share bounds, and the quick subset the tests run.

use std::time::Duration;

use super::axes::{Axes, Loop, Mix, Pattern};
use super::case::Case;

/// `noisy-fleet`'s replicas: two lognormal classes 2× apart, 30% slow.
const NOISY: Mix = Mix::TwoClasses {
    ratio: 2.0,
    slow_share: 0.3,
};
/// One lognormal class with `noisy-fleet`'s spread.
const LOGNORMAL: Mix = Mix::Lognormal { spread: 3.0 };

#[allow(clippy::too_many_arguments)]
fn case(
    id: &str,
    name: &str,
    note: &str,
    (replicas, clients, workers): (u32, u32, u32),
    scale_us: u64,
    mix: Mix,
    pattern: Pattern,
    load: Loop,
) -> Case {
    Case {
        id: id.into(),
        name: name.into(),
        note: note.into(),
        axes: Axes {
            replicas,
            clients,
            workers,
            scale: Duration::from_micros(scale_us),
            mix,
            pattern,
            load,
        },
    }
}

fn open(utilization: f64) -> Loop {
    Loop::Open { utilization }
}

/// The fleets issue 36 names, as the sim runs them.
// A table: one case a line.
#[rustfmt::skip]
pub fn fleets() -> Vec<Case> {
    use Pattern::*;
    vec![
        case("f01", "noisy-fleet", "the lab's headline scenario (noisy-fleet at 0.9)",
            (20, 10, 4), 10_000, NOISY, Rotating, open(0.9)),
        case("f02", "wide-50x40", "issue 36: 50 replicas, 40 client balancers, 0.9",
            (50, 40, 4), 10_000, NOISY, Rotating, open(0.9)),
        case("f03", "single-worker-noisy", "issue 36: single-worker replicas, noisy, 0.8",
            (20, 10, 1), 10_000, NOISY, Rotating, open(0.8)),
        case("f04", "two-speed-steady", "issue 36: 10 replicas at 5 ms and 10 at 40 ms, steady, 0.85",
            (20, 10, 4), 5_000, Mix::TwoClasses { ratio: 8.0, slow_share: 0.5 }, None, open(0.85)),
        case("f05", "eight-one-client-noisy", "issue 36: 8 replicas, one client, noisy, 0.9",
            (8, 1, 4), 10_000, NOISY, Rotating, open(0.9)),
        case("f06", "grey-slow", "issue 36: one replica persistently 10x slower, 10 replicas, 5 clients, 0.8",
            (10, 5, 4), 10_000, LOGNORMAL, SlowReplica, open(0.8)),
        case("f07", "fail-fast", "one replica answers 503 in 1 ms from a third of the run on",
            (10, 5, 4), 10_000, LOGNORMAL, FailFast, open(0.7)),
        case("f08", "antagonists", "half the pool shares its hosts with antagonists",
            (20, 10, 4), 10_000, LOGNORMAL, Antagonists, open(0.8)),
    ]
}

/// Identical LAN replicas at 200 µs to 2 ms, closed and open loop: the
/// fleets of issue 36's share bounds (starvation and herding), and the
/// http subset. In closed loop each replica has more workers than there
/// are users (a skewed share costs no queueing, so only the picker's
/// dynamics keep it even); in open loop one worker each, at rates two
/// shared cores keep over HTTP beside the lab's own work.
// A table: one case a line.
#[rustfmt::skip]
pub fn lan() -> Vec<Case> {
    use Pattern::None;
    let id = Mix::Identical;
    vec![
        case("l01", "lan-3-closed", "issue 36: 3 identical replicas at 200 us, 8 users, no think time",
            (3, 1, 16), 200, id, None, Loop::Closed { users: 8 }),
        case("l02", "lan-3-open", "3 identical replicas at 200 us, 2,000 arrivals/s",
            (3, 1, 1), 200, id, None, Loop::Rate { per_s: 2000.0 }),
        case("l03", "lan-5-closed", "5 identical replicas at 2 ms, 16 users",
            (5, 1, 16), 2_000, id, None, Loop::Closed { users: 16 }),
        case("l04", "lan-5-open", "issue 36: 5 identical replicas at 2 ms, 1,500 arrivals/s",
            (5, 1, 1), 2_000, id, None, Loop::Rate { per_s: 1500.0 }),
        case("l05", "lan-10-closed", "issue 36: 10 identical replicas at 1 ms, 32 users",
            (10, 1, 16), 1_000, id, None, Loop::Closed { users: 32 }),
        case("l06", "lan-10-open", "10 identical replicas at 1 ms, 2,500 arrivals/s",
            (10, 1, 1), 1_000, id, None, Loop::Rate { per_s: 2500.0 }),
    ]
}

/// The quick subset: each of issue 36's fleets at a small scale (about
/// 6,000 requests a row), and identical LAN replicas in open loop, for the
/// tests.
// A table: one case a line.
#[rustfmt::skip]
pub fn quick() -> Vec<Case> {
    use Pattern::*;
    vec![
        case("q01", "identical-3-closed", "3 identical replicas, closed loop",
            (3, 1, 2), 5_000, Mix::Identical, None, Loop::Closed { users: 4 }),
        case("q02", "identical-5-open", "5 identical replicas, open loop (issue 36's 5 at 2 ms, slower)",
            (5, 1, 1), 5_000, Mix::Identical, None, open(0.6)),
        case("q03", "two-speed-steady", "two classes 8x apart, steady, 0.85 (issue 36's 10 at 5 ms and 10 at 40 ms)",
            (8, 4, 1), 5_000, Mix::TwoClasses { ratio: 8.0, slow_share: 0.5 }, None, open(0.85)),
        case("q04", "grey-slow", "one replica 10x slower, 0.8",
            (6, 3, 2), 10_000, LOGNORMAL, SlowReplica, open(0.8)),
        case("q05", "single-worker-noisy", "single-worker replicas, noisy, 0.8",
            (8, 4, 1), 10_000, NOISY, Rotating, open(0.8)),
        case("q06", "many-clients", "as many client balancers as replicas, 0.9",
            (12, 12, 2), 20_000, LOGNORMAL, None, open(0.9)),
        case("q07", "fail-fast", "one replica fails fast from a third of the run on, 0.7",
            (5, 2, 2), 10_000, LOGNORMAL, FailFast, open(0.7)),
        case("q08", "antagonists", "half the pool with antagonists, 0.8",
            (6, 3, 2), 10_000, LOGNORMAL, Antagonists, open(0.8)),
        case("q09", "lan-3-open", "3 identical LAN replicas at 200 us, 1,000 arrivals/s",
            (3, 1, 1), 200, Mix::Identical, None, Loop::Rate { per_s: 1000.0 }),
    ]
}
