use std::sync::Arc;

use super::bounded::{check, place};
use super::{HashTable, point};
use crate::endpoint::EndpointState;
use crate::error::ConfigError;
use crate::pick::key::RequestKey;
use crate::pick::{PeakEwma, Pick, Picker, Pool};

/// Modulo hashing: the endpoint at position `hash(key) mod n` of the
/// endpoints sorted by their own hash (the seed study's "IP hash").
///
/// O(1) and perfectly even over keys, but not consistent: when one endpoint
/// joins or leaves, about `n/(n+1)` of all keys move. It is here as the
/// baseline the consistent pickers ([`RingHash`](super::RingHash),
/// [`Maglev`](super::Maglev)) are measured against. Weights are ignored.
/// The exact hash is defined in the [module docs](super).
///
/// Requests without a key go to the fallback picker (default [`PeakEwma`]).
/// Unavailable endpoints, and with [`bounded_load`](Self::bounded_load)
/// endpoints above their share, are skipped by moving on to the next
/// endpoint in key order.
///
/// ```
/// use tower_lb::pick::{KeyHash, key::ForwardedFor};
///
/// let ip_hash = KeyHash::new(ForwardedFor);
/// ```
#[derive(Debug, Clone)]
pub struct KeyHash<E, F = PeakEwma> {
    key: E,
    fallback: F,
    bound: Option<f64>,
}

impl<E> KeyHash<E> {
    /// Modulo hashing keyed by `key`, with no load bound and [`PeakEwma`]
    /// for requests without a key.
    pub fn new(key: E) -> Self {
        Self {
            key,
            fallback: PeakEwma::default(),
            bound: None,
        }
    }
}

impl<E, F> KeyHash<E, F> {
    /// The picker for requests without a key.
    pub fn fallback<F2: Picker>(self, fallback: F2) -> KeyHash<E, F2> {
        KeyHash {
            key: self.key,
            fallback,
            bound: self.bound,
        }
    }

    /// Bounded load with factor `c`: an endpoint whose in-flight count would
    /// exceed `ceil(c · (total_in_flight + 1) / n)` is skipped for the next
    /// one in key order. Off by default;
    /// [`SUGGESTED_BOUNDED_LOAD`](super::SUGGESTED_BOUNDED_LOAD) (1.25) is
    /// the paper's suggestion.
    ///
    /// Cost: a pick whose candidate already has requests in flight sums
    /// every endpoint's in-flight count once (O(n) relaxed loads) to compute
    /// the cap; idle candidates are taken without it.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] on field `bounded_load` unless `c` is finite and `>= 1`.
    pub fn bounded_load(mut self, c: f64) -> Result<Self, ConfigError> {
        self.bound = Some(check(c)?);
        Ok(self)
    }
}

impl<E, F> Picker for KeyHash<E, F>
where
    E: Send + Sync + 'static,
    F: Picker,
{
    type Table = HashTable<(), F::Table>;

    fn name(&self) -> &'static str {
        "key_hash"
    }

    /// Sorts the endpoints by hash: O(n log n).
    fn table(&self, endpoints: &[Arc<EndpointState>]) -> Self::Table {
        HashTable::new(endpoints, (), self.fallback.table(endpoints))
    }
}

impl<Req, E, F> Pick<Req> for KeyHash<E, F>
where
    E: RequestKey<Req>,
    F: Pick<Req>,
{
    fn pick(&self, req: &Req, cx: &Pool<'_, Self::Table>) -> Option<usize> {
        let t = cx.table();
        let Some(key) = self.key.key(req) else {
            return self.fallback.pick(req, &cx.with_table(&t.fallback));
        };
        let n = t.order.len() as u64;
        let home = (n > 0).then(|| t.order[(point(key) % n) as usize] as usize);
        place(cx, self.bound, &t.order, &t.rank, home.into_iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::key::key_fn;
    use crate::pick::testing::Fixture;

    #[test]
    fn spreads_evenly_and_skips_capped() {
        let mut f = Fixture::new(&[1.0, 5.0, 1.0, 1.0]);
        let p = KeyHash::new(key_fn(|k: &u64| Some(*k)));
        let t = Picker::table(&p, &f.states);
        let mut c = [0usize; 4];
        for k in 0..40_000u64 {
            c[p.pick(&k, &f.cx(&t)).unwrap()] += 1;
        }
        assert!(c.iter().all(|&c| (9_000..11_000).contains(&c)), "{c:?}");
        f.cap = Some(1);
        let _busy = f.states[2].try_acquire(None);
        for k in 0..1000u64 {
            assert_ne!(p.pick(&k, &f.cx(&t)), Some(2));
        }
    }

    #[test]
    fn mismatched_table_does_not_panic() {
        let big = Fixture::new(&[1.0; 5]);
        let small = Fixture::new(&[1.0, 1.0]);
        let empty = Fixture::new(&[]);
        let p = KeyHash::new(key_fn(|k: &u64| Some(*k)));
        let t_big = Picker::table(&p, &big.states);
        let t_empty = Picker::table(&p, &empty.states);
        for k in 0..100u64 {
            assert!(p.pick(&k, &small.cx(&t_big)).is_some_and(|i| i < 2));
            assert_eq!(p.pick(&k, &empty.cx(&t_big)), None);
            assert_eq!(p.pick(&k, &small.cx(&t_empty)), None);
        }
    }
}
