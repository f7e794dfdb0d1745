//! With `[load] connections`: how many backends each user's requests
//! reached (JSON `runs[].affinity`), the measure of a connection-keyed
//! hash picker's stickiness.

use std::collections::{BTreeMap, BTreeSet};

use super::document::round;
use super::sections::Affinity;

/// The affinity of `seen` (user → the backends their attempts reached).
pub fn affinity(seen: &BTreeMap<u32, BTreeSet<usize>>) -> Affinity {
    let users = seen.len();
    let total: usize = seen.values().map(BTreeSet::len).sum();
    let one = seen.values().filter(|s| s.len() == 1).count();
    let per = |x: usize| round(x as f64 / users.max(1) as f64, 4);
    Affinity {
        users,
        backends_per_user: per(total),
        one_backend: per(one),
    }
}
