use std::sync::Arc;

use super::{Pick, Picker, Pool};
use crate::model::EndpointState;

/// Power of two choices on in-flight count (Envoy's `least_request`): draw two
/// weighted-random candidates, take the one with fewer in-flight requests per
/// unit of weight. O(1) per pick.
#[derive(Debug, Default, Clone, Copy)]
pub struct P2cLeastInFlight;

impl P2cLeastInFlight {
    /// A two-choice least-in-flight picker.
    pub fn new() -> Self {
        Self
    }
}

impl Picker for P2cLeastInFlight {
    type Table = ();
    fn name(&self) -> &'static str {
        "p2c_least_in_flight"
    }
    fn table(&self, _: &[Arc<EndpointState>]) {}
}

impl<Req> Pick<Req> for P2cLeastInFlight {
    fn pick(&self, _: &Req, cx: &Pool<'_, ()>) -> Option<usize> {
        super::best_of_fraction(cx, 2, |i| ((cx.in_flight(i) + 1) as f64, cx.weight(i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::testing::Fixture;

    #[test]
    fn avoids_the_loaded_endpoint() {
        let f = Fixture::new(&[1.0; 2]);
        let _guards: Vec<_> = (0..5)
            .map(|_| f.states[0].try_acquire(None).unwrap())
            .collect();
        let counts = f.counts(&P2cLeastInFlight, 1000);
        // Candidates are distinct when possible, so the idle one always wins.
        assert_eq!(counts[1], 1000, "{counts:?}");
    }

    /// Eight endpoints with 0..=7 calls in flight: a full scan would always
    /// take endpoint 0; two distinct random candidates take endpoint `k`
    /// exactly when the other candidate is busier, with probability
    /// `(7 − k) / 28`, and never the busiest.
    #[test]
    fn two_choices_over_eight_endpoints() {
        let f = Fixture::new(&[1.0; 8]);
        let _guards: Vec<_> = (0..8)
            .flat_map(|k| (0..k).map(move |_| k))
            .map(|k| f.states[k].try_acquire(None).unwrap())
            .collect();
        let n = 28_000;
        let counts = f.counts(&P2cLeastInFlight, n);
        for (k, &c) in counts.iter().enumerate() {
            let share = c as f64 / n as f64;
            let expected = (7 - k) as f64 / 28.0;
            assert!((share - expected).abs() < 0.015, "{k}: {counts:?}");
        }
        assert_eq!(counts[7], 0, "{counts:?}");
    }
}
