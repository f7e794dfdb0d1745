//! Which endpoints form each routed set: one per priority level and, with a
//! locality mode, one per locality of each level.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use crate::model::{EndpointState, Locality};

/// How levels are split between localities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Split {
    /// Not at all: a level is one set.
    None,
    /// By zone (zone-aware routing).
    Zone,
    /// By locality (region, zone, sub-zone), with locality weights.
    Locality,
}

/// The routed sets of a snapshot, as indices into its pickable endpoints.
#[derive(Debug)]
pub(crate) struct Layout {
    /// Priority levels, highest (lowest number) first.
    pub(crate) levels: Vec<Level>,
    /// Every set: each level's whole set, followed by its localities'.
    pub(crate) sets: Vec<Members>,
}

/// One priority level.
#[derive(Debug)]
pub(crate) struct Level {
    pub(crate) priority: u32,
    /// The set of every endpoint of the level.
    pub(crate) whole: usize,
    /// The sets of its localities (empty without a split).
    pub(crate) localities: Range<usize>,
}

/// One routed set.
#[derive(Debug)]
pub(crate) struct Members {
    /// Positions in the snapshot's pickable endpoints, in their order.
    pub(crate) index: Box<[u32]>,
    /// The locality the set covers (unknown for a whole level; only the
    /// zone with a zone split).
    pub(crate) locality: Locality,
    /// The locality's weight (locality-weighted mode): the largest its
    /// endpoints carry, 1 when none does.
    pub(crate) weight: f64,
    /// Its level, as an index into `levels`.
    pub(crate) level: usize,
}

impl Layout {
    /// Groups `states` by priority and, unless `split` is `None`, by
    /// locality: O(n log n), on membership changes only.
    pub(crate) fn new(states: &[Arc<EndpointState>], split: Split) -> Self {
        let mut by_level: BTreeMap<u32, BTreeMap<Locality, (Vec<u32>, f64)>> = BTreeMap::new();
        for (i, s) in states.iter().enumerate() {
            let meta = s.meta();
            let locality = match split {
                Split::None => Locality::default(),
                Split::Zone => Locality::in_zone(meta.locality().zone()),
                Split::Locality => meta.locality().clone(),
            };
            let weight = f64::from(meta.locality_weight().unwrap_or(1));
            let (members, w) = by_level
                .entry(meta.priority())
                .or_default()
                .entry(locality)
                .or_insert((Vec::new(), 0.0));
            members.push(i as u32);
            *w = w.max(weight);
        }
        let mut layout = Layout {
            levels: Vec::with_capacity(by_level.len()),
            sets: Vec::new(),
        };
        for (level, (priority, localities)) in by_level.into_iter().enumerate() {
            let mut whole: Vec<u32> = localities.values().flat_map(|(m, _)| m).copied().collect();
            whole.sort_unstable();
            let at = layout.sets.len();
            layout.sets.push(Members {
                index: whole.into(),
                locality: Locality::default(),
                weight: 1.0,
                level,
            });
            if split != Split::None {
                for (locality, (index, weight)) in localities {
                    layout.sets.push(Members {
                        index: index.into(),
                        locality,
                        weight,
                        level,
                    });
                }
            }
            layout.levels.push(Level {
                priority,
                whole: at,
                localities: at + 1..layout.sets.len(),
            });
        }
        layout
    }

    /// True when routing has nothing to decide: one level, no split.
    pub(crate) fn is_trivial(&self) -> bool {
        self.levels.len() <= 1 && self.sets.len() <= 1
    }
}
