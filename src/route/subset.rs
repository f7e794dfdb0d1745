//! Deterministic subsetting: which endpoints one balancer of a fleet uses.

use crate::error::ConfigError;

/// This balancer's place in its fleet and the size of its subset; see the
/// [module docs](super) for the rule.
///
/// ```
/// use tower_lb::route::Subset;
/// // Replica 7 of 1,000 callers, each using 20 endpoints.
/// let s = Subset::new(7, 1_000, 20);
/// assert_eq!((s.index(), s.fleet_size(), s.size()), (7, 1_000, 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subset {
    index: usize,
    fleet_size: usize,
    size: usize,
}

impl Subset {
    /// Balancer `index` (in `0..fleet_size`, unique in the fleet) uses
    /// `size` endpoints. Checked by `Balance::build`: `size >= 1`,
    /// `fleet_size >= 1`, `index < fleet_size`.
    pub fn new(index: usize, fleet_size: usize, size: usize) -> Self {
        Self {
            index,
            fleet_size,
            size,
        }
    }

    /// This balancer's index in the fleet.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The number of balancers in the fleet.
    pub fn fleet_size(&self) -> usize {
        self.fleet_size
    }

    /// Endpoints per subset.
    pub fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.size == 0 {
            return Err(ConfigError::new(
                "routing.subset.size",
                0,
                "an integer >= 1",
            ));
        }
        if self.fleet_size == 0 {
            return Err(ConfigError::new(
                "routing.subset.fleet_size",
                0,
                "an integer >= 1",
            ));
        }
        if self.index >= self.fleet_size {
            return Err(ConfigError::new(
                "routing.subset.index",
                self.index,
                "an integer < fleet_size",
            ));
        }
        Ok(())
    }

    /// Positions, in the ring of `m` endpoints sorted by key hash, of this
    /// balancer's subset: `min(size, m)` consecutive positions from
    /// `⌊index · m / fleet_size⌋`, wrapping.
    pub(crate) fn window(&self, m: usize) -> impl Iterator<Item = usize> {
        let k = self.size.min(m);
        let start = if m == 0 {
            0
        } else {
            (self.index as u128 * m as u128 / self.fleet_size.max(1) as u128) as usize
        };
        (0..k).map(move |t| (start + t) % m)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// Every balancer's subset, as sets of endpoint names, for the ring
    /// `ring` (names in ring order).
    fn subsets(ring: &[u32], fleet: usize, k: usize) -> Vec<BTreeSet<u32>> {
        (0..fleet)
            .map(|i| {
                Subset::new(i, fleet, k)
                    .window(ring.len())
                    .map(|p| ring[p])
                    .collect()
            })
            .collect()
    }

    #[test]
    fn bad_values_name_their_field() {
        let field = |s: Subset| s.validate().unwrap_err().field();
        assert_eq!(field(Subset::new(0, 10, 0)), "routing.subset.size");
        assert_eq!(field(Subset::new(0, 0, 3)), "routing.subset.fleet_size");
        assert_eq!(field(Subset::new(10, 10, 3)), "routing.subset.index");
        assert!(Subset::new(9, 10, 3).validate().is_ok());
        assert!(
            Subset::new(usize::MAX - 1, usize::MAX, usize::MAX)
                .validate()
                .is_ok()
        );
        // Extreme values compute without overflow.
        let w: Vec<usize> = Subset::new(usize::MAX - 1, usize::MAX, 3)
            .window(5)
            .collect();
        assert_eq!(w.len(), 3);
    }

    #[test]
    fn the_fleet_of_the_lab_is_exactly_balanced() {
        // 1,000 balancers x 200 endpoints x 20: 100 subsets per endpoint.
        let ring: Vec<u32> = (0..200).collect();
        let s = subsets(&ring, 1_000, 20);
        for e in &ring {
            assert_eq!(s.iter().filter(|x| x.contains(e)).count(), 100);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Every subset has `min(k, m)` distinct endpoints, and every
        /// endpoint is in `⌊n·k/m⌋` or `⌈n·k/m⌉` subsets.
        #[test]
        fn every_endpoint_is_in_the_same_number_of_subsets(
            m in 1usize..120, n in 1usize..300, k in 1usize..130,
        ) {
            let ring: Vec<u32> = (0..m as u32).collect();
            let s = subsets(&ring, n, k);
            let k = k.min(m);
            for x in &s {
                prop_assert_eq!(x.len(), k);
            }
            let (lo, hi) = ((n * k) / m, (n * k).div_ceil(m));
            for e in &ring {
                let c = s.iter().filter(|x| x.contains(e)).count();
                prop_assert!(lo <= c && c <= hi, "endpoint {} in {} subsets, not {}..={}", e, c, lo, hi);
            }
        }

        /// Adding or removing one endpoint (anywhere in the ring) changes
        /// each subset by at most two members in and two out, and moves at
        /// most two members per balancer in all.
        #[test]
        fn one_endpoint_more_or_less_moves_few_members(
            m in 2usize..100, n in 1usize..200, k in 1usize..40, at in 0usize..100,
        ) {
            let ring: Vec<u32> = (0..m as u32).collect();
            let mut grown = ring.clone();
            grown.insert(at % (m + 1), 1_000);
            let mut shrunk = ring.clone();
            shrunk.remove(at % m);
            let before = subsets(&ring, n, k);
            for after in [subsets(&grown, n, k), subsets(&shrunk, n, k)] {
                let mut moved = 0;
                for (b, a) in before.iter().zip(&after) {
                    let (out, into) = (b.difference(a).count(), a.difference(b).count());
                    prop_assert!(out <= 2 && into <= 2, "{:?} -> {:?}", b, a);
                    moved += out.max(into);
                }
                prop_assert!(moved <= 2 * n);
            }
        }
    }
}
