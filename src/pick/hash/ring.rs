use std::sync::Arc;

use super::{Hashed, Lookup};
use crate::error::ConfigError;
use crate::model::EndpointState;
use crate::pick::PeakEwma;

/// Default ring points per unit of weight: 150, the value the published study's
/// ring used (ketama uses 160 per server). With 150 points an endpoint's
/// share of the ring deviates from its weight by about `1/√150 ≈ 8%`.
pub const DEFAULT_VNODES: usize = 150;

/// Largest accepted `vnodes`.
pub const MAX_VNODES: usize = 10_000;

/// Most points a ring holds, 8 Mi (Envoy's default `maximum_ring_size`):
/// about 96 MiB. Beyond it every endpoint's point count is scaled down
/// proportionally, at least one point each.
pub const MAX_RING_POINTS: usize = 1 << 23;

/// Consistent hashing on a ketama-style ring: [`Hashed`] over [`RingLookup`].
///
/// Each endpoint owns `vnodes` points per unit of weight on a ring of
/// `u64`; a request goes to the owner of the first point at or after its
/// key's hash. When an endpoint joins or leaves, only the keys between its
/// points and their predecessors move: about `1/n` of them. Lookup is a
/// binary search, O(log points). The exact hash is defined in the
/// [module docs](super). Skipped endpoints are passed by walking on along
/// the ring.
///
/// ```
/// use tower_lb::pick::{RingHash, RoundRobin, key::Header};
///
/// let by_user = RingHash::new(Header::named("x-user")?)
///     .vnodes(200)
///     .bounded_load(1.25)
///     .fallback(RoundRobin::new());
/// # Ok::<_, tower_lb::ConfigError>(())
/// ```
pub type RingHash<E, F = PeakEwma> = Hashed<RingLookup, E, F>;

/// The ring's settings: points per unit of weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLookup {
    vnodes: usize,
}

impl Default for RingLookup {
    fn default() -> Self {
        Self {
            vnodes: DEFAULT_VNODES,
        }
    }
}

impl<E, F> Hashed<RingLookup, E, F> {
    /// Ring points per unit of weight, `1..=MAX_VNODES` (default
    /// [`DEFAULT_VNODES`]; checked by `Balance::build`, field `vnodes`).
    /// More points spread load more evenly and cost memory (12 bytes each)
    /// and table-build time.
    pub fn vnodes(mut self, n: usize) -> Self {
        self.lookup_mut().vnodes = n;
        self
    }
}

impl Lookup for RingLookup {
    type Table = Ring;

    fn name(&self) -> &'static str {
        "ring_hash"
    }

    /// Builds the ring: O(points · log points), points ≈ `vnodes · Σ weight`.
    fn build(&self, endpoints: &[Arc<EndpointState>], _order: &[u32]) -> Ring {
        Ring::build(endpoints, self.vnodes, MAX_RING_POINTS)
    }

    fn walk<'t>(ring: &'t Ring, _: &'t [u32], point: u64) -> impl Iterator<Item = usize> + 't {
        ring.walk(ring.home(point))
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if (1..=MAX_VNODES).contains(&self.vnodes) {
            Ok(())
        } else {
            Err(ConfigError::new(
                "vnodes",
                self.vnodes,
                "an integer in 1..=10000",
            ))
        }
    }
}

/// The sorted ring points of one snapshot and the endpoint owning each.
#[derive(Debug, Default)]
pub struct Ring {
    points: Box<[u64]>,
    owners: Box<[u32]>,
}

impl Ring {
    /// The ring for `endpoints`, with at most `max_points` points (plus one
    /// per endpoint from rounding).
    fn build(endpoints: &[Arc<EndpointState>], vnodes: usize, max_points: usize) -> Self {
        let v = vnodes as f64;
        let max = max_points as f64;
        // Over the cap, points are shared out by relative weight, which
        // also keeps huge weights from overflowing to infinity.
        let w_max = endpoints.iter().map(|e| e.weight()).fold(0.0, f64::max);
        let rel_total: f64 = endpoints.iter().map(|e| e.weight() / w_max).sum();
        let capped = v * w_max * rel_total > max;
        let count = |w: f64| {
            let c = if capped {
                max * (w / w_max) / rel_total
            } else {
                v * w
            };
            c.round().max(1.0) as u64
        };
        let total: u64 = endpoints.iter().map(|e| count(e.weight())).sum();
        let mut ring: Vec<(u64, u64, u32)> = Vec::with_capacity(total as usize);
        let mut buf = [0u8; 16];
        for (i, e) in endpoints.iter().enumerate() {
            let kh = e.key_hash();
            buf[..8].copy_from_slice(&kh.to_le_bytes());
            for r in 0..count(e.weight()) {
                buf[8..].copy_from_slice(&r.to_le_bytes());
                ring.push((xxhash_rust::xxh64::xxh64(&buf, 0), kh, i as u32));
            }
        }
        // Ties between points go to the lower endpoint hash, not to the
        // lower index, so that every process orders them alike.
        ring.sort_unstable();
        Self {
            points: ring.iter().map(|p| p.0).collect(),
            owners: ring.iter().map(|p| p.2).collect(),
        }
    }

    /// Number of points on the ring.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True when the ring has no points (no endpoints).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Index of the first point at or after `p`, wrapping to 0.
    fn home(&self, p: u64) -> usize {
        let i = self.points.partition_point(|&x| x < p);
        if i == self.points.len() { 0 } else { i }
    }

    /// Owners of the points from `start` on, once around the ring.
    fn walk(&self, start: usize) -> impl Iterator<Item = usize> + '_ {
        let len = self.owners.len();
        (0..len).map(move |k| self.owners[(start + k) % len] as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::hash::point;
    use crate::pick::key::key_fn;
    use crate::pick::testing::Fixture;
    use crate::pick::{Pick, Picker};

    type ById = crate::pick::key::KeyFn<fn(&u64) -> Option<u64>>;

    fn ring() -> RingHash<ById> {
        RingHash::new(key_fn((|k: &u64| Some(*k)) as fn(&u64) -> Option<u64>))
    }

    #[test]
    fn points_follow_weights() {
        let f = Fixture::new(&[1.0, 2.0, 0.001]);
        let t = Picker::table(&ring(), &f.states);
        assert_eq!(t.lookup.len(), 150 + 300 + 1);
        let mut owned = [0; 3];
        t.lookup.owners.iter().for_each(|&o| owned[o as usize] += 1);
        assert_eq!(owned, [150, 300, 1]);
        assert!(t.lookup.points.is_sorted());
    }

    #[test]
    fn huge_weights_are_scaled_to_the_cap() {
        let f = Fixture::new(&[1e300, 3e300, 1.0]);
        let r = Ring::build(&f.states, 150, 10_000);
        let mut owned = [0; 3];
        r.owners.iter().for_each(|&o| owned[o as usize] += 1);
        assert_eq!(owned, [2_500, 7_500, 1]);
    }

    #[test]
    fn home_wraps_around() {
        let r = Ring {
            points: vec![10, 20, 30].into(),
            owners: vec![0, 1, 2].into(),
        };
        assert_eq!(r.home(0), 0);
        assert_eq!(r.home(20), 1);
        assert_eq!(r.home(21), 2);
        assert_eq!(r.home(31), 0);
        assert_eq!(r.walk(2).collect::<Vec<_>>(), [2, 0, 1]);
    }

    #[test]
    fn empty_and_mismatched_contexts_do_not_panic() {
        let big = Fixture::new(&[1.0; 5]);
        let small = Fixture::new(&[1.0, 1.0]);
        let empty = Fixture::new(&[]);
        let p = ring();
        let t_big = Picker::table(&p, &big.states);
        let t_empty = Picker::table(&p, &empty.states);
        for k in 0..1000u64 {
            assert!(p.pick(&k, &small.cx(&t_big)).is_some_and(|i| i < 2));
            assert_eq!(p.pick(&k, &empty.cx(&t_big)), None);
            assert_eq!(p.pick(&k, &empty.cx(&t_empty)), None);
            assert_eq!(p.pick(&k, &small.cx(&t_empty)), None);
        }
    }

    #[test]
    fn capped_home_walks_to_next_owner() {
        let mut f = Fixture::new(&[1.0, 1.0, 1.0]);
        let p = ring();
        let t = Picker::table(&p, &f.states);
        let home = p.pick(&7, &f.cx(&t)).unwrap();
        f.cap = crate::admission::Cap::new(Some(1), false);
        let _busy = f.states[home].try_acquire(None);
        let next = p.pick(&7, &f.cx(&t)).unwrap();
        assert_ne!(next, home);
        let start = t.lookup.home(point(7));
        let expected = t.lookup.walk(start).find(|&o| o != home);
        assert_eq!(Some(next), expected);
    }
}
