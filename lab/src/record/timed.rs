//! Selection time as the study defines it ("algorithm duration": the time
//! to choose a backend), apart from the rest of `Balance::call`.
//!
//! [`Timed`] wraps a picker and reads the wall clock around its `pick`; the
//! user task reads the figure back right after its `call` returns, on the
//! same thread ([`take`]). What `call` does around the pick (the health
//! census, the in-flight slot, the clone of the endpoint's service, the
//! response future) is the rest of the call, reported in its own column.
//!
//! With `--warm-select` the pick that decides runs untimed and a second
//! one, made right after it on the same pool, is timed: the same work with
//! the caches just filled. Over HTTP it takes the sim's time, which shows
//! that the rest of a cold selection is cache misses.
//!
//! The timer's own cost is measured once, back to back, and taken off: an
//! interval between two readings holds about one reading's cost
//! ([`overhead_ns`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tower_lb::endpoint::EndpointState;
use tower_lb::pick::prequal::ProbePool;
use tower_lb::pick::{Pick, Picker, Pool};

/// `--warm-select`: time a second pick made right after the deciding one.
static WARM: AtomicBool = AtomicBool::new(false);

/// Turns the warm measurement on or off (`--warm-select`).
pub fn set_warm(on: bool) {
    WARM.store(on, Ordering::Relaxed);
}

thread_local! {
    /// Wall-clock ns of the last pick on this thread (timer included).
    static LAST: Cell<u64> = const { Cell::new(0) };
}

/// A picker whose `pick` is timed.
#[derive(Clone)]
pub struct Timed<P>(pub P);

impl<P: Picker> Picker for Timed<P> {
    type Table = P::Table;
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn table(&self, endpoints: &[Arc<EndpointState>]) -> Self::Table {
        self.0.table(endpoints)
    }
    fn validate(&self) -> Result<(), tower_lb::ConfigError> {
        self.0.validate()
    }
    fn probe_pool(&self) -> Option<&Arc<ProbePool>> {
        self.0.probe_pool()
    }
}

impl<Req, P: Pick<Req>> Pick<Req> for Timed<P> {
    #[inline]
    fn pick(&self, req: &Req, pool: &Pool<'_, Self::Table>) -> Option<usize> {
        let warm = WARM.load(Ordering::Relaxed);
        let first = warm.then(|| self.0.pick(req, pool));
        let t = Instant::now();
        let timed = self.0.pick(req, pool);
        let ns = t.elapsed().as_nanos() as u64;
        let picked = first.unwrap_or(timed);
        // A call picks more than once only after losing a race for a slot:
        // its selection time is the sum.
        LAST.with(|l| l.set(l.get() + ns));
        picked
    }

    fn affinity(&self, req: &Req) -> Option<u64> {
        self.0.affinity(req)
    }
}

/// Selection ns of the picks since the last `take` on this thread, less
/// the timer's cost; 0 when none was timed.
pub fn take() -> u64 {
    let ns = LAST.with(|l| l.replace(0));
    if ns == 0 {
        0
    } else {
        ns.saturating_sub(overhead_ns())
    }
}

/// Forgets a selection time not read (a call that was never timed).
pub fn reset() {
    LAST.with(|l| l.set(0));
}

/// What an empty interval between two readings costs on this machine:
/// the median of 10,001 back-to-back pairs, measured once.
pub fn overhead_ns() -> u64 {
    static OVERHEAD: OnceLock<u64> = OnceLock::new();
    *OVERHEAD.get_or_init(|| {
        let mut v: Vec<u64> = (0..10_001)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(());
                t.elapsed().as_nanos() as u64
            })
            .collect();
        v.sort_unstable();
        v[v.len() / 2]
    })
}
