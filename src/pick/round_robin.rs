use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Pick, Picker, Pool};
use crate::model::EndpointState;

/// Plain round robin: each pick takes the next index, skipping endpoints that
/// are unavailable. Ignores weights and load (the published study's baseline).
#[derive(Debug, Default)]
pub struct RoundRobin {
    next: AtomicUsize,
}

/// A clone starts its own rotation (the cursor is not shared).
impl Clone for RoundRobin {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl RoundRobin {
    /// A round robin starting at the first endpoint.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Picker for RoundRobin {
    type Table = ();
    fn name(&self) -> &'static str {
        "round_robin"
    }
    fn table(&self, _: &[Arc<EndpointState>]) {}
}

impl<Req> Pick<Req> for RoundRobin {
    fn pick(&self, _: &Req, cx: &Pool<'_, ()>) -> Option<usize> {
        if cx.is_empty() {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % cx.len();
        let i = cx.next_available(start)?;
        if i != start {
            // Continue after the endpoint actually used, so skips do not
            // double up on the next available one.
            self.next.store(i + 1, Ordering::Relaxed);
        }
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pick::testing::Fixture;

    #[test]
    fn rotates_exactly() {
        let f = Fixture::new(&[1.0, 5.0, 1.0]);
        let p = RoundRobin::new();
        let picks: Vec<usize> = (0..9).map(|_| p.pick(&(), &f.cx(&())).unwrap()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn skips_capped_endpoints() {
        let mut f = Fixture::new(&[1.0, 1.0, 1.0]);
        f.cap = crate::admission::Cap::new(Some(1), false);
        let _busy = f.states[1].try_acquire(Some(1)).unwrap();
        let p = RoundRobin::new();
        let picks: Vec<usize> = (0..6).map(|_| p.pick(&(), &f.cx(&())).unwrap()).collect();
        assert_eq!(picks, [0, 2, 0, 2, 0, 2]);
    }

    #[test]
    fn empty_is_none() {
        let f = Fixture::new(&[]);
        assert_eq!(RoundRobin::new().pick(&(), &f.cx(&())), None);
    }
}
