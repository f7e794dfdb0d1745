use std::time::Duration;

use super::best_of::{draw, draw_uniform, draws_uniformly};
use super::{MAX_CHOICES, Pick, Pool, cost_key, key_winner};
use crate::model::stale_after;
use crate::time::decay;

/// Default number of candidates compared per pick.
///
/// Two (classic P2C) throws information away on small or mixed pools: in the
/// lab's `steady-capacity` scenario (4 backends at 50/150/300/500 ms, 16
/// workers each) two choices keep sending work to the slow replicas, which
/// sets the mean and p99. With three weighted-random candidates — and a full
/// scan when the pool has three endpoints or fewer — the pick is still O(1) and
/// lands within a few percent of an oracle. See the lab's tables in the README.
pub const DEFAULT_CHOICES: usize = 3;

/// Default weight `k` of the spread term in `est + k·spread`: one deviation,
/// so a replica whose latency swings is charged for its worst typical case.
pub const DEFAULT_SPREAD_FACTOR: f64 = 1.0;

/// Default fade of reported utilization: 1 s. Queues change on the scale of
/// a service time; a balancer that has not heard from an endpoint for a
/// second no longer knows its queue, while its service time (the floor)
/// stays known.
pub const DEFAULT_UTILIZATION_FADE: Duration = Duration::from_secs(1);

/// Calls an endpoint must have answered before its floor latency says it
/// is slow (see [Staleness](PeakEwma#staleness)).
const TRUST_SAMPLES: u64 = 8;

/// A stale endpoint whose floor latency is within this factor of the best
/// candidate's estimate is tried again (see [Staleness](PeakEwma#staleness)).
const FLOOR_SLACK: f64 = 2.0;

/// Candidates whose estimates, and whose floor latencies, are within this
/// factor of each other are alike, and a pick balances their load (see [Herding](PeakEwma#herding)).
/// At 2, replicas sharing their cores with antagonists still counted as
/// alike and took more calls (in the lab's family, `g21`'s p99 went from
/// 1.05 to 1.31 times the oracle's).
const LIKE: f64 = 1.5;

/// Floor of the success ratio in the cost, so a dead endpoint costs a large
/// but finite multiple (10⁴×) and can still be chosen when nothing else can.
const MIN_SUCCESS: f64 = 0.01;

// The type's documentation (its formula, herding, staleness and reported
// utilization) is long; it lives beside this file.
#[doc = include_str!("peak_ewma.md")]
#[derive(Debug, Clone, Copy)]
pub struct PeakEwma {
    choices: usize,
    spread_factor: f64,
    learn_parallelism: bool,
    utilization: bool,
    fade: Duration,
    /// `1 / fade` in ns⁻¹.
    fade_rate: f64,
}

impl PeakEwma {
    /// The cost of endpoint `i` at the time of the pick, on its own (a
    /// pick also compares it with the other candidates: see
    /// [Staleness](#staleness) and [Herding](#herding)).
    #[inline(always)]
    pub fn cost<T>(&self, cx: &Pool<'_, T>, i: usize) -> f64 {
        self.part(cx, i).cost(self.spread_factor, f64::INFINITY)
    }

    /// What the cost of endpoint `i` is made of at the time of the pick.
    #[inline(always)]
    fn part<T>(&self, cx: &Pool<'_, T>, i: usize) -> Part {
        let v = cx.view(i);
        let e = v.estimate_idle(cx.now_ns, cx.rates);
        let state = v.state;
        let p = if self.learn_parallelism {
            v.parallelism()
        } else {
            1.0
        };
        // Expected attempts to get an answer grow as 1/(1 − f); squared, so a
        // replica failing half its calls costs 4× and a dead one (f → 1)
        // is left alone until its failures are forgiven.
        let ok = (1.0 - e.failure).max(MIN_SUCCESS);
        let (mut est, spread) = (e.est * e.weight, e.spread * e.weight);
        if self.utilization
            && let Some((u, age)) = state.utilization_at(cx.now_ns)
        {
            // +∞ before the first success: then the estimate stands.
            let floor = v.floor_ns();
            if floor.is_finite() {
                // The floor does not decay: compare with the decayed estimate.
                est = est.max(floor * (u * decay(age, self.fade_rate)).max(1.0));
            }
        }
        let in_flight = v.in_flight();
        Part {
            est,
            spread: if spread.is_finite() { spread } else { 0.0 },
            in_flight: in_flight as i64 as f64,
            p,
            den: v.weight_ns(cx.now_ns) * ok * ok,
            since: e.since,
            answered: !e.due && !e.waiting,
            idle: in_flight == 0,
            floor: v.floor_ns(),
            samples: v.samples(),
        }
    }

    /// The best of the candidates `idx` (none available: `None`): the
    /// lowest cost, with the parallelism each is credited at most one more
    /// than the candidates' mean in flight (see [Herding](#herding)), after
    /// stale idle candidates are brought to the best estimate among them
    /// (see [Staleness](#staleness)).
    ///
    /// One pass costs every candidate as it stands and finds the reference
    /// (the lowest estimate among the candidates whose last call
    /// succeeded, busy or idle) and how long the oldest settled (idle,
    /// answered) estimate has gone without a sample. Only when that is
    /// past the staleness bound (10 ms at least, so never on a busy
    /// balancer) are the settled candidates read again and compared as the
    /// rule says: the pick keeps no array of candidates in memory.
    #[inline(always)]
    fn best<T>(&self, cx: &Pool<'_, T>, idx: &[usize]) -> Option<usize> {
        let k = self.spread_factor;
        let credit = self.credit(cx, idx);
        let (mut best, mut best_unsettled) = (u64::MAX, u64::MAX);
        let (mut reference, mut reference_spread) = (f64::INFINITY, 0.0);
        let (mut oldest, mut settled, mut unsampled) = (0u64, 0u32, false);
        for (slot, &i) in idx.iter().enumerate() {
            let part = if cx.is_available(i) {
                self.part(cx, i)
            } else {
                Part::UNAVAILABLE
            };
            let key = cost_key(part.cost(k, credit), slot);
            best = best.min(key);
            if part.answered && part.est < reference {
                (reference, reference_spread) = (part.est, part.spread);
            }
            if part.answered && part.idle {
                settled |= 1 << slot;
                oldest = oldest.max(part.since);
                unsampled |= part.samples == 0;
            } else {
                best_unsettled = best_unsettled.min(key);
            }
        }
        if !unsampled && (oldest as i64 as f64) < stale_after(reference) {
            return key_winner(best, idx);
        }
        self.best_restaled(
            cx,
            idx,
            (settled, credit),
            (reference, reference_spread),
            best_unsettled,
        )
    }

    /// The most parallelism a pick over `idx` credits a candidate: one
    /// more than the available candidates' mean in flight when they are
    /// alike (their estimates as last written, and their floor latencies,
    /// within [`LIKE`] of each other: see [Herding](#herding)); unbounded
    /// when they are not, or when parallelism is not learned.
    #[inline(always)]
    fn credit<T>(&self, cx: &Pool<'_, T>, idx: &[usize]) -> f64 {
        if !self.learn_parallelism {
            return f64::INFINITY;
        }
        // Fewer calls in flight than candidates: no split to hold, and no
        // need to read their estimates (an idle or lightly loaded
        // balancer's every pick).
        let (mut flight, mut available) = (0usize, 0usize);
        for &i in idx {
            if cx.is_available(i) {
                flight += cx.view(i).in_flight();
                available += 1;
            }
        }
        if flight < available {
            return f64::INFINITY;
        }
        let (mut lowest, mut highest) = ([f64::INFINITY; 2], [0f64; 2]);
        for &i in idx {
            if cx.is_available(i) {
                let v = cx.view(i);
                for (k, x) in [v.written_estimate(), v.floor_ns()].into_iter().enumerate() {
                    (lowest[k], highest[k]) = (lowest[k].min(x), highest[k].max(x));
                }
            }
        }
        // Unlike now or by nature (an unknown floor, +∞, beside a known
        // one is unlike).
        if (0..2).any(|k| highest[k] > LIKE * lowest[k]) {
            return f64::INFINITY;
        }
        1.0 + flight as f64 / available.max(1) as f64
    }

    /// [`best`](Self::best) when a settled candidate may be stale or new:
    /// each settled candidate (bits of `settled`) read again, a stale or
    /// new one costed at the `reference` estimate and spread, against
    /// `best`, the best of the others. Out of line: only idle pools come
    /// here.
    #[inline(never)]
    fn best_restaled<T>(
        &self,
        cx: &Pool<'_, T>,
        idx: &[usize],
        (settled, credit): (u32, f64),
        (reference, reference_spread): (f64, f64),
        mut best: u64,
    ) -> Option<usize> {
        let stale = stale_after(reference);
        for (slot, &i) in idx.iter().enumerate() {
            if settled & (1 << slot) == 0 {
                continue;
            }
            let mut part = self.part(cx, i);
            // A newcomer: no call was ever sent to it (its estimate is the
            // prior, not a measurement).
            let new = part.samples == 0 && cx.view(i).state.picks() == 0;
            if part.est > reference
                && (new || part.since as i64 as f64 >= stale)
                && part.may_be_as_fast_as(reference)
            {
                (part.est, part.spread) = (reference, reference_spread);
            }
            best = best.min(cost_key(part.cost(self.spread_factor, credit), slot));
        }
        key_winner(best, idx)
    }
}

/// One candidate's cost, in parts:
/// `(est + k·spread) · (in_flight / q + 1) / den`, `q` its parallelism as
/// the pick credits it.
#[derive(Clone, Copy)]
struct Part {
    est: f64,
    spread: f64,
    /// Requests in flight.
    in_flight: f64,
    /// Its learned parallelism (1 when not learned).
    p: f64,
    /// `weight · (1 − f)²`.
    den: f64,
    /// Nanoseconds since its last sample.
    since: u64,
    /// Its last call succeeded (and no probe of a failed one is due).
    answered: bool,
    /// Nothing in flight: an idle endpoint's estimate may have gone stale.
    idle: bool,
    /// Its floor latency, ns (+∞ before its first success).
    floor: f64,
    /// Calls recorded on it.
    samples: u64,
}

impl Part {
    /// A candidate that may not take the call: it costs infinity.
    const UNAVAILABLE: Part = Part {
        est: f64::INFINITY,
        spread: 0.0,
        in_flight: 0.0,
        p: 1.0,
        den: 1.0,
        since: 0,
        answered: false,
        idle: false,
        floor: f64::INFINITY,
        samples: 0,
    };

    /// Whether its stale estimate may hide a replica as fast as one of
    /// `reference`: it has answered too few calls to tell (a first answer
    /// may carry a connection's set-up), or it has answered within
    /// [`FLOOR_SLACK`] times `reference` before. A replica whose every
    /// answer was slower is slow, not stale: trying it again costs a slow
    /// call and tells nothing new.
    #[inline(always)]
    fn may_be_as_fast_as(&self, reference: f64) -> bool {
        self.samples < TRUST_SAMPLES || self.floor <= FLOOR_SLACK * reference
    }

    /// The cost with its parallelism credited up to `credit`.
    #[inline(always)]
    fn cost(&self, k: f64, credit: f64) -> f64 {
        let q = self.p.min(credit);
        (self.est + k * self.spread) * (self.in_flight + q) / (q * self.den)
    }
}

impl<Req> Pick<Req> for PeakEwma {
    #[inline]
    fn pick(&self, _: &Req, cx: &Pool<'_, ()>) -> Option<usize> {
        // The default's three candidates and the classic two are drawn
        // into arrays of their length, so that the compiler unrolls the
        // loops over them; other counts, pools no larger than the count
        // and unequal weights draw through `draw`.
        match self.choices {
            2 if draws_uniformly(cx, 2) => self.pick_of::<2>(cx),
            3 if draws_uniformly(cx, 3) => self.pick_of::<3>(cx),
            k => self.pick_any(cx, k),
        }
    }
}

impl PeakEwma {
    /// The best of `K` distinct uniform draws (the pool has more than `K`
    /// endpoints, of equal weights: see `draws_uniformly`).
    #[inline(always)]
    fn pick_of<const K: usize>(&self, cx: &Pool<'_, ()>) -> Option<usize> {
        let mut idx = [0usize; K];
        draw_uniform(cx, &mut idx);
        self.best(cx, &idx).or_else(|| self.pick_otherwise(cx))
    }

    /// The best of `k` candidates drawn by `draw`: any count, any pool.
    #[inline(always)]
    fn pick_any(&self, cx: &Pool<'_, ()>, k: usize) -> Option<usize> {
        let mut idx = [0usize; MAX_CHOICES];
        let n = draw(cx, k, &mut idx);
        self.best(cx, &idx[..n]).or_else(|| self.pick_otherwise(cx))
    }

    /// No candidate drawn was available: the cheapest endpoint of all, each
    /// costed on its own. Out of line: a pick comes here only when most of
    /// the pool may not take calls.
    #[inline(never)]
    fn pick_otherwise(&self, cx: &Pool<'_, ()>) -> Option<usize> {
        cx.min_by_score(|i| self.cost(cx, i))
    }
}

mod config;
#[cfg(test)]
mod tests;
