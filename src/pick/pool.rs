//! [`Pool`]: what a picker sees of the endpoint set during one pick.

use std::sync::Arc;

use super::Sampler;
use crate::admission::Terms;
use crate::model::{EndpointState, Estimate, Rates, View};
use crate::rng::{RngSource, below};

/// The endpoints one pick chooses from, with their live state.
///
/// A picker returns an index into this pool. [`is_available`](Self::is_available)
/// says whether an endpoint may take the request; pickers skip the ones
/// that may not.
pub struct Pool<'a, T> {
    pub(crate) states: &'a [Arc<EndpointState>],
    pub(crate) sampler: &'a Sampler,
    pub(crate) table: &'a T,
    pub(crate) now_ns: u64,
    pub(crate) rates: Rates,
    pub(crate) rng: &'a RngSource,
    /// The lane of the picking thread: whose in-flight counts and latency
    /// the pick weighs (see [`EndpointState::in_flight`]).
    pub(crate) lane: usize,
    /// What this pick may choose (admission's): how health restricts it,
    /// the in-flight cap, the endpoints the request asks to avoid.
    pub(crate) terms: Terms<'a>,
}

impl<'a, T> Pool<'a, T> {
    /// Number of endpoints in the pool (available or not).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// True when the pool has no endpoints.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// The live state of endpoint `i`. Panics if `i >= len()`.
    #[inline(always)]
    pub fn endpoint(&self, i: usize) -> &'a EndpointState {
        &self.states[i]
    }

    /// Whether endpoint `i` may take this request: not at its in-flight cap
    /// (fixed, or [adaptive](crate::endpoint::AdaptiveConcurrency)),
    /// healthy (not ejected or failing its active check, unless the
    /// balancer is in panic; its circuit breaker admitting a call), and not
    /// one this request was asked to avoid (an endpoint a retry has already
    /// tried, see [`call_avoiding`](crate::balance::call_avoiding)).
    /// Admission decides; the pool asks it.
    ///
    /// Cost: nothing while every endpoint is healthy and no cap or retry
    /// applies; otherwise a load of the endpoint's health bits, and of its
    /// breaker's state when the breaker is not closed.
    #[inline(always)]
    pub fn is_available(&self, i: usize) -> bool {
        self.terms.admits(&self.states[i])
    }

    /// Requests in flight on endpoint `i`, as this thread counts them:
    /// its own calls when the balancer keeps
    /// [per-thread load](crate::balance::Builder::per_thread_load), else
    /// every call. ([`endpoint`](Self::endpoint)`(i).in_flight()` sums every
    /// thread's, and reads a line per thread.)
    #[inline(always)]
    pub fn in_flight(&self, i: usize) -> usize {
        self.view(i).in_flight()
    }

    /// Endpoint `i`'s weight after slow start.
    #[inline(always)]
    pub fn weight(&self, i: usize) -> f64 {
        self.view(i).weight_ns(self.now_ns)
    }

    /// Endpoint `i`'s slow-start factor now, in `[0, 1]` (1 when it is not
    /// ramping): its weight after slow start over its configured weight.
    #[inline(always)]
    pub fn ramp(&self, i: usize) -> f64 {
        self.states[i].ramp_ns(self.now_ns, self.lane)
    }

    /// Whether a turn or draw of endpoint `i` stands under slow start: always
    /// when it is not ramping, else with probability [`ramp`](Self::ramp).
    /// Pickers that choose by configured weight (tables, alias draws) skip
    /// a turn this refuses, so shares follow the ramped weight.
    #[inline(always)]
    pub fn ramp_admits(&self, i: usize) -> bool {
        let f = self.ramp(i);
        f >= 1.0 || (self.random() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < f
    }

    /// Endpoint `i`'s latency estimate, decayed to the time of this pick,
    /// as this thread has seen it (see [`in_flight`](Self::in_flight)).
    #[inline(always)]
    pub fn estimate(&self, i: usize) -> Estimate {
        self.states[i].estimate_with(self.now_ns, self.rates, self.lane)
    }

    /// Endpoint `i` as this thread's picks see it, its lane looked up once.
    #[inline(always)]
    pub(crate) fn view(&self, i: usize) -> View<'a> {
        self.states[i].view(self.lane)
    }

    /// The picker's table for this snapshot.
    #[inline]
    pub fn table(&self) -> &'a T {
        self.table
    }

    /// The same pool with another table (for pickers that delegate).
    pub fn with_table<'b, U>(&self, table: &'b U) -> Pool<'b, U>
    where
        'a: 'b,
    {
        Pool {
            states: self.states,
            sampler: self.sampler,
            table,
            now_ns: self.now_ns,
            rates: self.rates,
            rng: self.rng,
            lane: self.lane,
            terms: self.terms,
        }
    }

    /// A random `u64` from the balancer's generator (seeded with
    /// `Builder::seed`, thread-local otherwise).
    #[inline]
    pub fn random(&self) -> u64 {
        self.rng.next_u64()
    }

    /// A uniform random index in `0..len()`. Panics if the pool is empty.
    #[inline]
    pub fn random_index(&self) -> usize {
        below(self.random(), self.len())
    }

    /// A random index drawn with probability proportional to the endpoints'
    /// configured weights, in O(1). Panics if the pool is empty.
    #[inline]
    pub fn sample(&self) -> usize {
        self.sampler.sample(self.len(), self.random())
    }

    /// True when every endpoint has the same configured weight.
    #[inline]
    pub fn is_uniform(&self) -> bool {
        self.sampler.is_uniform()
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
