//! The `oracle` picker (sim only): it reads every backend's true service
//! time, queue and failure rate, and sends each request where its expected
//! time to a successful answer is shortest. A reference point for the real
//! pickers, not a proven optimum (it is greedy, one request at a time).

use std::sync::Arc;

use tokio::time::Instant;
use tower_lb::endpoint::EndpointState;
use tower_lb::pick::{Pick, Picker, Pool};

use super::replica::model::Backend;

/// Shortest expected delay, from the backends' true state.
#[derive(Clone)]
pub struct Oracle {
    /// Indexed by endpoint id (the lab inserts backends in order, ids 0..n).
    backends: Arc<[Arc<Backend>]>,
}

impl Oracle {
    /// An oracle over these backends.
    pub fn new(backends: &[Arc<Backend>]) -> Self {
        Self {
            backends: backends.into(),
        }
    }
}

impl Picker for Oracle {
    type Table = ();
    fn name(&self) -> &'static str {
        "oracle"
    }
    fn table(&self, _: &[Arc<EndpointState>]) {}
}

impl<Req> Pick<Req> for Oracle {
    fn pick(&self, _: &Req, cx: &Pool<'_, ()>) -> Option<usize> {
        let now = Instant::now();
        cx.min_by_score(|i| {
            self.backends
                .get(cx.endpoint(i).id() as usize)
                .map_or(f64::INFINITY, |b| b.expected_ns(now))
        })
    }
}
