use std::sync::Arc;

use super::{Hashed, Lookup};
use crate::error::ConfigError;
use crate::model::EndpointState;
use crate::pick::PeakEwma;

/// Default lookup-table size: 65537, the prime the Maglev paper (Eisenbud et
/// al., NSDI 2016) uses and Envoy's default. Balance within about 1% needs
/// `M > 100·n`, so this suits pools of up to ~650 endpoints.
pub const DEFAULT_TABLE_SIZE: usize = 65_537;

/// Smallest accepted table size, 101: a smaller table cannot split traffic
/// in steps finer than 1%.
pub const MIN_TABLE_SIZE: usize = 101;

/// Largest accepted table size, 16 777 213 (the largest prime below 2²⁴):
/// 64 MiB of entries.
pub const MAX_TABLE_SIZE: usize = 16_777_213;

/// Maglev consistent hashing (Eisenbud et al., 2016): [`Hashed`] over
/// [`MaglevLookup`].
///
/// A lookup table of prime size `M` is filled once per snapshot, endpoints
/// taking turns (in proportion to weight) to claim the next free slot of
/// their own permutation of the table; a request goes to entry
/// `hash(key) mod M`. Lookup is O(1), shares are within `n/M` of the
/// weights, and a membership change moves little more than the minimum.
/// The exact hash is defined in the [module docs](super).
///
/// The table needs at least one entry per endpoint: when the endpoint set
/// outgrows `table_size`, the table is built at the smallest prime
/// `>= 100·n` instead (deterministic, so processes still agree, but every
/// key moves once at that point). Size the table for the largest pool.
///
/// Skipped endpoints are passed by walking on to the next table entry.
///
/// ```
/// use tower_lb::pick::{Maglev, Picker, key::ForwardedFor};
///
/// let by_client = Maglev::new(ForwardedFor).table_size(5_003).bounded_load(1.25);
/// assert!(by_client.validate().is_ok());
/// // Not prime: refused when the balancer is built (or validated).
/// assert!(Maglev::new(ForwardedFor).table_size(5_000).validate().is_err());
/// ```
pub type Maglev<E, F = PeakEwma> = Hashed<MaglevLookup, E, F>;

/// Maglev's settings: the lookup table's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaglevLookup {
    table_size: usize,
}

impl Default for MaglevLookup {
    fn default() -> Self {
        Self {
            table_size: DEFAULT_TABLE_SIZE,
        }
    }
}

impl<E, F> Hashed<MaglevLookup, E, F> {
    /// The lookup table's size: a prime in
    /// `MIN_TABLE_SIZE..=MAX_TABLE_SIZE` (101..=16777213), default
    /// [`DEFAULT_TABLE_SIZE`] (checked by `Balance::build`, field
    /// `table_size`). 4 bytes per entry; building costs about `M · log M`
    /// steps per snapshot.
    pub fn table_size(mut self, m: usize) -> Self {
        self.lookup_mut().table_size = m;
        self
    }
}

impl Lookup for MaglevLookup {
    type Table = MaglevTable;

    fn name(&self) -> &'static str {
        "maglev"
    }

    /// Fills the table: about `M · log M` steps.
    fn build(&self, endpoints: &[Arc<EndpointState>], order: &[u32]) -> MaglevTable {
        MaglevTable::build(endpoints, order, self.table_size)
    }

    fn walk<'t>(t: &'t MaglevTable, _: &'t [u32], point: u64) -> impl Iterator<Item = usize> + 't {
        t.walk(point)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let m = self.table_size;
        if (MIN_TABLE_SIZE..=MAX_TABLE_SIZE).contains(&m) && is_prime(m) {
            Ok(())
        } else {
            Err(ConfigError::new(
                "table_size",
                m,
                "a prime in 101..=16777213",
            ))
        }
    }
}

/// A Maglev lookup table: endpoint index per entry.
#[derive(Debug, Default)]
pub struct MaglevTable {
    entries: Box<[u32]>,
}

const EMPTY: u32 = u32::MAX;

impl MaglevTable {
    fn build(endpoints: &[Arc<EndpointState>], order: &[u32], table_size: usize) -> Self {
        let n = endpoints.len();
        if n == 0 {
            return Self::default();
        }
        let m = if n <= table_size {
            table_size
        } else {
            next_prime(n.saturating_mul(100).min(MAX_TABLE_SIZE).max(n))
        };
        let mm = m as u64;
        let w_max = endpoints.iter().map(|e| e.weight()).fold(0.0, f64::max);
        let mut turns: Vec<Turn> = order
            .iter()
            .map(|&i| {
                let e = &endpoints[i as usize];
                let kh = e.key_hash();
                Turn {
                    index: i,
                    pos: (kh >> 32) % mm,
                    skip: (kh & 0xFFFF_FFFF) % (mm - 1) + 1,
                    share: e.weight() / w_max,
                    taken: 0.0,
                }
            })
            .collect();
        let mut entries = vec![EMPTY; m];
        let mut filled = 0;
        let mut iteration = 0.0;
        while filled < m {
            iteration += 1.0;
            let before = filled;
            for t in &mut turns {
                if filled == m {
                    break;
                }
                // Envoy's weighted fill: the heaviest endpoint takes a turn
                // every iteration, one of half its weight every other one.
                if iteration * t.share < t.taken {
                    continue;
                }
                t.taken += 1.0;
                // A prime size makes every permutation visit every slot.
                for _ in 0..m {
                    let slot = &mut entries[t.pos as usize];
                    t.pos = (t.pos + t.skip) % mm;
                    if *slot == EMPTY {
                        *slot = t.index;
                        filled += 1;
                        break;
                    }
                }
            }
            if filled == before {
                break; // unreachable with a prime size; never loop forever
            }
        }
        Self {
            entries: entries.into(),
        }
    }

    /// Number of entries (the effective table size; 0 without endpoints).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the table has no entries (no endpoints).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries from the one for `p` on, once around the table.
    fn walk(&self, p: u64) -> impl Iterator<Item = usize> + '_ {
        let len = self.entries.len();
        let start = if len == 0 {
            0
        } else {
            (p % len as u64) as usize
        };
        (0..len).map(move |k| self.entries[(start + k) % len] as usize)
    }
}

/// One endpoint's progress through the fill.
struct Turn {
    index: u32,
    pos: u64,
    skip: u64,
    share: f64,
    taken: f64,
}

fn is_prime(m: usize) -> bool {
    if m < 2 {
        return false;
    }
    (2..)
        .take_while(|d| d * d <= m)
        .all(|d| !m.is_multiple_of(d))
}

fn next_prime(from: usize) -> usize {
    (from.max(2)..).find(|&m| is_prime(m)).unwrap_or(from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::hash::key_order;
    use crate::pick::key::{KeyFn, key_fn};
    use crate::pick::testing::Fixture;
    use crate::pick::{Pick, Picker};

    fn build(f: &Fixture, size: usize) -> MaglevTable {
        MaglevTable::build(&f.states, &key_order(&f.states), size)
    }

    type ById = KeyFn<fn(&u64) -> Option<u64>>;

    fn maglev() -> Maglev<ById> {
        Maglev::new(key_fn((|k: &u64| Some(*k)) as fn(&u64) -> Option<u64>))
    }

    fn owned(t: &MaglevTable, n: usize) -> Vec<usize> {
        let mut c = vec![0; n];
        t.entries.iter().for_each(|&e| c[e as usize] += 1);
        c
    }

    #[test]
    fn sizes_are_prime() {
        assert!(is_prime(DEFAULT_TABLE_SIZE));
        assert!(is_prime(MIN_TABLE_SIZE));
        assert!(is_prime(MAX_TABLE_SIZE));
        assert!(!is_prime(MAX_TABLE_SIZE + 1));
        assert_eq!(next_prime(100), 101);
    }

    #[test]
    fn equal_weights_fill_evenly() {
        let f = Fixture::new(&[1.0; 5]);
        let t = build(&f, DEFAULT_TABLE_SIZE);
        for c in owned(&t, 5) {
            assert!((13_107..=13_108).contains(&c), "{c}");
        }
    }

    #[test]
    fn weights_shape_the_fill() {
        let f = Fixture::new(&[1.0, 2.0, 3.0, 0.5]);
        let t = build(&f, DEFAULT_TABLE_SIZE);
        let c = owned(&t, 4);
        for (c, w) in c.iter().zip([1.0, 2.0, 3.0, 0.5]) {
            let share = *c as f64 / DEFAULT_TABLE_SIZE as f64;
            assert!((share - w / 6.5).abs() < 0.001, "{c}");
        }
    }

    #[test]
    fn table_grows_when_outnumbered() {
        let f = Fixture::new(&[1.0; 150]);
        let t = build(&f, 101);
        assert_eq!(t.len(), next_prime(15_000));
        assert!(owned(&t, 150).iter().all(|&c| c >= 99));
    }

    #[test]
    fn bad_sizes_are_config_errors() {
        for m in [0, 2, 97, 65_536, 100_000, MAX_TABLE_SIZE + 2] {
            let e = maglev().table_size(m).validate().unwrap_err();
            assert_eq!(e.field(), "table_size", "{m}");
        }
        assert!(maglev().table_size(101).validate().is_ok());
    }

    #[test]
    fn empty_and_mismatched_contexts_do_not_panic() {
        let big = Fixture::new(&[1.0; 5]);
        let small = Fixture::new(&[1.0, 1.0]);
        let empty = Fixture::new(&[]);
        let p = maglev().table_size(101);
        let t_big = Picker::table(&p, &big.states);
        let t_empty = Picker::table(&p, &empty.states);
        for k in 0..1000u64 {
            assert!(p.pick(&k, &small.cx(&t_big)).is_some_and(|i| i < 2));
            assert_eq!(p.pick(&k, &empty.cx(&t_big)), None);
            assert_eq!(p.pick(&k, &empty.cx(&t_empty)), None);
            assert_eq!(p.pick(&k, &small.cx(&t_empty)), None);
        }
    }
}
