use std::sync::Arc;

use super::{Pick, Picker, Pool};
use crate::model::EndpointState;

/// How many weighted draws to try before scanning for any available endpoint.
const DRAWS: usize = 16;

/// Weighted random: each endpoint is drawn with probability proportional to
/// its weight, in O(1) (alias table), regardless of load.
///
/// Slow start: a draw of a ramping endpoint stands with probability equal
/// to its ramp factor and is drawn again otherwise, so shares follow the
/// ramped weight (see [`SlowStart`](crate::SlowStart)). Up to 16 draws;
/// then the first available endpoint drawn, then a scan.
#[derive(Debug, Default, Clone, Copy)]
pub struct Random;

impl Random {
    /// A weighted random picker.
    pub fn new() -> Self {
        Self
    }
}

impl Picker for Random {
    type Table = ();
    fn name(&self) -> &'static str {
        "random"
    }
    fn table(&self, _: &[Arc<EndpointState>]) {}
}

impl<Req> Pick<Req> for Random {
    fn pick(&self, _: &Req, cx: &Pool<'_, ()>) -> Option<usize> {
        if cx.is_empty() {
            return None;
        }
        let mut available = None;
        for _ in 0..DRAWS {
            let i = cx.sample();
            if cx.is_available(i) {
                if cx.ramp_admits(i) {
                    return Some(i);
                }
                available.get_or_insert(i);
            }
        }
        available.or_else(|| cx.next_available(cx.random_index()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::testing::Fixture;

    #[test]
    fn weighted_shares_within_two_percent() {
        let w = [6.0, 3.0, 2.0, 1.0];
        let f = Fixture::new(&w);
        let n = 20_000;
        let counts = f.counts(&Random, n);
        for (c, w) in counts.iter().zip(w) {
            let share = *c as f64 / n as f64;
            assert!((share - w / 12.0).abs() <= 0.02, "{counts:?}");
        }
    }
}
