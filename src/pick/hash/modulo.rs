//! [`KeyHash`]: modulo hashing, the baseline the consistent pickers beat.

use std::sync::Arc;

use super::{Hashed, Lookup};
use crate::model::EndpointState;
use crate::pick::PeakEwma;

/// Modulo hashing: the endpoint at position `hash(key) mod n` of the
/// endpoints sorted by their own hash (the published study's "IP hash");
/// [`Hashed`] over [`ModuloLookup`].
///
/// O(1) and perfectly even over keys, but not consistent: when one endpoint
/// joins or leaves, about `n/(n+1)` of all keys move. It is here as the
/// baseline the consistent pickers ([`RingHash`](super::RingHash),
/// [`Maglev`](super::Maglev)) are measured against. Weights are ignored
/// (a weighted modulo would move keys whenever a weight changes, the
/// consistent pickers are the weighted ones). Skipped endpoints are passed
/// by moving on to the next endpoint in key order. The exact hash is
/// defined in the [module docs](super).
///
/// ```
/// use tower_lb::pick::{KeyHash, key::ForwardedFor};
///
/// let ip_hash = KeyHash::new(ForwardedFor);
/// ```
pub type KeyHash<E, F = PeakEwma> = Hashed<ModuloLookup, E, F>;

/// Modulo hashing has no settings and no structure beyond the key order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModuloLookup;

impl Lookup for ModuloLookup {
    type Table = ();

    fn name(&self) -> &'static str {
        "key_hash"
    }

    fn build(&self, _: &[Arc<EndpointState>], _: &[u32]) {}

    fn walk<'t>(_: &'t (), order: &'t [u32], point: u64) -> impl Iterator<Item = usize> + 't {
        let n = order.len() as u64;
        (n > 0)
            .then(|| order[(point % n) as usize] as usize)
            .into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::key::key_fn;
    use crate::pick::testing::Fixture;
    use crate::pick::{Pick, Picker};

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
        f.cap = crate::admission::Cap::new(Some(1), false);
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
