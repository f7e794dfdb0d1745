//! Pickers: how [`Balance`](crate::Balance) chooses an endpoint for a request.
//!
//! A picker is two traits:
//!
//! * [`Picker`] holds what does not depend on the request: its name and the
//!   per-snapshot [`Picker::Table`] it precomputes whenever the endpoint set or
//!   a weight changes (a hash ring, a Maglev table, a weighted schedule).
//! * [`Pick<Req>`] chooses an index for one request, given a [`Context`] that
//!   exposes the endpoints' live state.
//!
//! Adding a picker means one new file here and one line in the list below.
//!
//! | picker | rule |
//! |---|---|
//! | [`RoundRobin`] | next index, skipping unavailable endpoints |
//! | [`WeightedRoundRobin`] | smooth weighted round robin (precomputed stride schedule) |
//! | [`Random`] | weighted random |
//! | [`LeastInFlight`] | full scan, fewest in-flight per unit weight, random tie-break |
//! | [`P2cLeastInFlight`] | two weighted-random candidates, fewer in-flight wins |
//! | [`LeastResponseTime`] | full scan, lowest latency estimate (starves others; for comparison) |
//! | [`PeakEwma`] (default) | lowest `(est + k·spread)·(in_flight+1)/weight` among `choices` candidates |
//! | [`KeyHash`] | `hash(key) mod n`: request affinity, not consistent (the seed's IP hash) |
//! | [`RingHash`] | ketama-style ring, points per weight unit, optional bounded load |
//! | [`Maglev`] | prime-sized lookup table, O(1), optional bounded load |

pub mod hash;
pub mod key;
mod least_in_flight;
mod least_response_time;
mod p2c_least_in_flight;
mod peak_ewma;
mod random;
mod round_robin;
pub(crate) mod sampler;
mod weighted_round_robin;

use std::sync::Arc;

pub use hash::{KeyHash, Maglev, RingHash};
pub use key::{ForwardedFor, Header, KeyFn, Path, RequestKey, key_fn};
pub use least_in_flight::LeastInFlight;
pub use least_response_time::LeastResponseTime;
pub use p2c_least_in_flight::P2cLeastInFlight;
pub use peak_ewma::PeakEwma;
pub use random::Random;
pub use round_robin::RoundRobin;
pub use weighted_round_robin::WeightedRoundRobin;

use crate::endpoint::{EndpointState, Estimate};
use crate::rng::{RngSource, below};
use sampler::Sampler;
use tokio::time::Instant;

/// The request-independent half of a picker.
pub trait Picker: Send + Sync + 'static {
    /// Precomputed per endpoint-set snapshot; `()` for pickers that need none.
    type Table: Send + Sync + 'static;

    /// A short, stable name (`"peak_ewma"`), used in metrics and the lab.
    fn name(&self) -> &'static str;

    /// Builds the table for a new snapshot of the endpoint set. Called on
    /// every membership or weight change, never per request.
    fn table(&self, endpoints: &[Arc<EndpointState>]) -> Self::Table;
}

/// Chooses an endpoint for one request.
pub trait Pick<Req>: Picker {
    /// Returns the index of an available endpoint, or `None` when the
    /// picker finds none ([`Context::is_available`] is false for all it tried).
    /// Must not panic for any context, including an empty one.
    fn pick(&self, req: &Req, cx: &Context<'_, Self::Table>) -> Option<usize>;
}

/// What a picker sees of the endpoint set during one pick.
pub struct Context<'a, T> {
    pub(crate) states: &'a [Arc<EndpointState>],
    pub(crate) sampler: &'a Sampler,
    pub(crate) table: &'a T,
    pub(crate) now: Instant,
    pub(crate) now_ns: u64,
    pub(crate) rates: crate::endpoint::Rates,
    pub(crate) rng: &'a RngSource,
    pub(crate) cap: Option<usize>,
    /// Ids of endpoints this request should avoid (tried by a retry).
    pub(crate) avoid: &'a [u64],
    /// Whether endpoints can be unhealthy (breakers or ejection configured).
    pub(crate) health: bool,
    /// Whether ejected endpoints are skipped (not in panic routing).
    pub(crate) ejection: bool,
}

impl<T> Context<'_, T> {
    /// True when nothing can make an endpoint unavailable for this pick.
    #[inline(always)]
    fn unrestricted(&self) -> bool {
        self.cap.is_none() && !self.health && self.avoid.is_empty()
    }
}

impl<'a, T> Context<'a, T> {
    /// Number of endpoints in the snapshot (available or not).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// True when the snapshot has no endpoints.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// The live state of endpoint `i`. Panics if `i >= len()`.
    #[inline(always)]
    pub fn endpoint(&self, i: usize) -> &'a EndpointState {
        &self.states[i]
    }

    /// Whether endpoint `i` may take this request: not at its in-flight cap,
    /// not ejected (unless the balancer is in panic), its circuit breaker
    /// permitting a call, and not one this request was asked to avoid (an
    /// endpoint a retry has already tried, see
    /// [`call_avoiding`](crate::balance::call_avoiding)).
    #[inline(always)]
    pub fn is_available(&self, i: usize) -> bool {
        if self.unrestricted() {
            return true;
        }
        let s = &self.states[i];
        if self.cap.is_some_and(|cap| s.in_flight() >= cap) {
            return false;
        }
        if self.health && !s.is_pickable(self.now, self.now_ns, self.ejection) {
            return false;
        }
        self.avoid.is_empty() || !self.avoid.contains(&s.id())
    }

    /// Requests in flight on endpoint `i`.
    #[inline(always)]
    pub fn in_flight(&self, i: usize) -> usize {
        self.states[i].in_flight()
    }

    /// Endpoint `i`'s weight after slow start.
    #[inline(always)]
    pub fn weight(&self, i: usize) -> f64 {
        self.states[i].effective_weight_ns(self.now_ns)
    }

    /// Endpoint `i`'s latency estimate, decayed to the time of this pick.
    #[inline(always)]
    pub fn estimate(&self, i: usize) -> Estimate {
        self.states[i].estimate_with(self.now_ns, self.rates)
    }

    /// The picker's table for this snapshot.
    #[inline]
    pub fn table(&self) -> &'a T {
        self.table
    }

    /// The same context with another table (for pickers that delegate).
    pub fn with_table<'b, U>(&self, table: &'b U) -> Context<'b, U>
    where
        'a: 'b,
    {
        Context {
            states: self.states,
            sampler: self.sampler,
            table,
            now: self.now,
            now_ns: self.now_ns,
            rates: self.rates,
            rng: self.rng,
            cap: self.cap,
            avoid: self.avoid,
            health: self.health,
            ejection: self.ejection,
        }
    }

    /// A random `u64` from the balancer's generator (seeded with
    /// `Builder::seed`, thread-local otherwise).
    #[inline]
    pub fn random(&self) -> u64 {
        self.rng.next_u64()
    }

    /// A uniform random index in `0..len()`. Panics if the context is empty.
    #[inline]
    pub fn random_index(&self) -> usize {
        below(self.random(), self.len())
    }

    /// A random index drawn with probability proportional to the endpoints'
    /// configured weights, in O(1). Panics if the context is empty.
    #[inline]
    pub fn sample(&self) -> usize {
        self.sampler.sample(self.len(), self.random())
    }

    /// The first available index at or after `start` (wrapping), if any.
    pub fn next_available(&self, start: usize) -> Option<usize> {
        let n = self.len();
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| self.is_available(i))
    }

    /// The available index with the lowest `score`, ties broken uniformly at
    /// random. A full scan: O(len).
    pub fn min_by_score(&self, mut score: impl FnMut(usize) -> f64) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        let mut ties = 0u64;
        for i in 0..self.len() {
            if !self.is_available(i) {
                continue;
            }
            let s = score(i);
            match best {
                Some((_, b)) if s > b => {}
                Some((_, b)) if s == b => {
                    // Reservoir sampling over the tied minima.
                    ties += 1;
                    if below(self.random(), ties as usize) == 0 {
                        best = Some((i, s));
                    }
                }
                _ => {
                    best = Some((i, s));
                    ties = 1;
                }
            }
        }
        best.map(|(i, _)| i)
    }
}

/// Most candidates a sampling picker may draw per pick.
pub const MAX_CHOICES: usize = 16;

/// The available endpoint with the lowest score among `k` distinct
/// weighted-random candidates; a full scan when the pool has at most `k`
/// endpoints or when no candidate drawn was available. Scores are fractions
/// `num / den` (`den > 0`), compared by cross-multiplication, so a sampled
/// pick divides nothing.
#[inline]
pub(crate) fn best_of_fraction<T>(
    cx: &Context<'_, T>,
    k: usize,
    mut score: impl FnMut(usize) -> (f64, f64),
) -> Option<usize> {
    let n = cx.len();
    if n <= k {
        return cx.min_by_score(|i| {
            let (num, den) = score(i);
            num / den
        });
    }
    let k = k.min(MAX_CHOICES);
    let uniform = cx.sampler.is_uniform() && n < 1 << 16;
    'sampled: {
        // Unavailable candidates get an infinite cost.
        let (mut best, mut best_num, mut best_den) = (usize::MAX, f64::INFINITY, 1.0);
        let mut consider = |i: usize| {
            let (num, den) = if cx.is_available(i) {
                score(i)
            } else {
                (f64::INFINITY, 1.0)
            };
            if num * best_den < best_num * den {
                (best, best_num, best_den) = (i, num, den);
            }
        };
        if uniform {
            // Equal weights: k distinct indices without rejection. The j-th
            // draw is uniform over the n − j indices not drawn yet, mapped
            // past the earlier ones (kept sorted).
            let mut draw = Draws::new(cx);
            let mut taken = [0usize; MAX_CHOICES];
            for j in 0..k {
                let mut i = draw.below(cx, n - j);
                let mut pos = 0;
                while pos < j && taken[pos] <= i {
                    i += 1;
                    pos += 1;
                }
                taken.copy_within(pos..j, pos + 1);
                taken[pos] = i;
                consider(i);
            }
        } else {
            let mut seen = [0usize; MAX_CHOICES];
            let mut drawn = 0;
            // Duplicates are redrawn a bounded number of times: heavy
            // weights make them likely, and a repeated candidate adds nothing.
            for _ in 0..2 * k + 2 {
                if drawn == k {
                    break;
                }
                let i = cx.sample();
                if seen[..drawn].contains(&i) {
                    continue;
                }
                seen[drawn] = i;
                drawn += 1;
                consider(i);
            }
        }
        if best == usize::MAX {
            break 'sampled;
        }
        return Some(best);
    }
    // No candidate drawn was available: look at every endpoint.
    cx.min_by_score(|i| {
        let (num, den) = score(i);
        num / den
    })
}

/// Up to three distinct uniform indices (the first `k` are meaningful),
/// without rejection: each draw is uniform over the indices not drawn yet,
/// shifted past the earlier ones. Needs `len() > k` and `len() < 2^16`.
#[inline(always)]
pub(crate) fn three_distinct<T>(cx: &Context<'_, T>, k: usize) -> [usize; 3] {
    let n = cx.len();
    let mut draw = Draws::new(cx);
    let a = draw.below(cx, n);
    let (mut b, mut c) = (a, a);
    if k >= 2 {
        b = draw.below(cx, n - 1);
        b += usize::from(b >= a);
    }
    if k == 3 {
        let (lo, hi) = (a.min(b), a.max(b));
        c = draw.below(cx, n - 2);
        c += usize::from(c >= lo);
        c += usize::from(c >= hi);
    }
    [a, b, c]
}

/// A cost's bits with the candidate's slot in the low 2 bits (a relative
/// change below 1e-15): non-negative floats order like their bits, so an
/// integer `min` (a conditional move) picks the cheapest.
#[inline(always)]
pub(crate) fn cost_key(cost: f64, slot: usize) -> u64 {
    (cost.to_bits() & !3) | slot as u64
}

/// The candidate with the smallest key, unless it cost infinity (or NaN):
/// then none was available.
#[inline(always)]
pub(crate) fn key_winner(best: u64, candidates: &[usize; 3]) -> Option<usize> {
    (best >> 52 < 0x7FF).then(|| candidates[(best & 3) as usize])
}

/// Bits of one random number used per uniform draw: three draws per `u64`,
/// with a bias of at most `n / 2^21` (0.05% at 1,024 endpoints).
const LANE_BITS: u32 = 21;

/// Uniform candidate indices for one pick: three come from each random
/// number.
struct Draws {
    bits: u64,
    lanes: u32,
}

impl Draws {
    fn new<T>(_: &Context<'_, T>) -> Self {
        Self { bits: 0, lanes: 0 }
    }

    /// A uniform index in `0..n` (`n < 2^16`).
    #[inline(always)]
    fn below<T>(&mut self, cx: &Context<'_, T>, n: usize) -> usize {
        if self.lanes == 0 {
            self.bits = cx.random();
            self.lanes = 64 / LANE_BITS;
        }
        let lane = self.bits & ((1 << LANE_BITS) - 1);
        self.bits >>= LANE_BITS;
        self.lanes -= 1;
        ((lane * n as u64) >> LANE_BITS) as usize
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A tiny harness to run pickers without a `Balance`.
    use super::*;
    use crate::endpoint::Model;
    use crate::endpoint::health::Health;

    pub(crate) struct Fixture {
        pub(crate) states: Vec<Arc<EndpointState>>,
        pub(crate) sampler: Sampler,
        pub(crate) model: Arc<Model>,
        pub(crate) cap: Option<usize>,
    }

    impl Fixture {
        pub(crate) fn new(weights: &[f64]) -> Self {
            let model = Arc::new(Model {
                epoch: Instant::now(),
                rates: crate::endpoint::Rates {
                    latency: 1.0 / 10e9,
                    failure: 1.0 / 2e9,
                },
                default_rtt_ns: 30e6,
                penalty_ns: 1e9,
                slow_start: None,
                health: Health::new(None, None, 0.0, Default::default()),
                rng: RngSource::new(Some(42)),
            });
            let states = weights
                .iter()
                .enumerate()
                .map(|(i, &w)| {
                    Arc::new(EndpointState::new(
                        i as u64,
                        i as u64,
                        w,
                        &model,
                        model.epoch,
                        false,
                    ))
                })
                .collect();
            Self {
                states,
                sampler: Sampler::new(weights),
                model,
                cap: None,
            }
        }

        pub(crate) fn cx<'a, T>(&'a self, table: &'a T) -> Context<'a, T> {
            let now = Instant::now();
            Context {
                states: &self.states,
                sampler: &self.sampler,
                table,
                now,
                now_ns: self.model.nanos(now),
                rates: self.model.rates,
                rng: &self.model.rng,
                cap: self.cap,
                avoid: &[],
                health: false,
                ejection: false,
            }
        }

        /// Runs `n` picks, returning the count per endpoint.
        pub(crate) fn counts<P: Pick<()>>(&self, p: &P, n: usize) -> Vec<usize> {
            let table = p.table(&self.states);
            let mut counts = vec![0; self.states.len()];
            for _ in 0..n {
                let i = p.pick(&(), &self.cx(&table)).expect("an endpoint");
                counts[i] += 1;
            }
            counts
        }
    }
}
