use std::sync::Arc;

use super::{Pick, Picker, Pool};
use crate::model::EndpointState;

/// Least in-flight ("least connections"): a full scan for the endpoint with the
/// fewest requests in flight per unit of weight; ties are broken uniformly at
/// random. O(n) per pick.
#[derive(Debug, Default, Clone, Copy)]
pub struct LeastInFlight;

impl LeastInFlight {
    /// A least-in-flight picker.
    pub fn new() -> Self {
        Self
    }
}

impl Picker for LeastInFlight {
    type Table = ();
    fn name(&self) -> &'static str {
        "least_in_flight"
    }
    fn table(&self, _: &[Arc<EndpointState>]) {}
}

impl<Req> Pick<Req> for LeastInFlight {
    fn pick(&self, _: &Req, cx: &Pool<'_, ()>) -> Option<usize> {
        cx.min_by_score(|i| (cx.in_flight(i) + 1) as f64 / cx.weight(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::testing::Fixture;

    #[test]
    fn picks_the_least_loaded_and_breaks_ties_randomly() {
        let f = Fixture::new(&[1.0; 4]);
        let _a = f.states[0].try_acquire(None).unwrap();
        let _b = f.states[1].try_acquire(None).unwrap();
        let _c = f.states[1].try_acquire(None).unwrap();
        let counts = f.counts(&LeastInFlight, 1000);
        assert_eq!(counts[0] + counts[1], 0);
        assert!(counts[2] > 400 && counts[3] > 400, "{counts:?}");
    }
}
