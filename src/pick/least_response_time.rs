use std::sync::Arc;

use super::{Pick, Picker, Pool};
use crate::model::EndpointState;

/// Naive least response time: a full scan for the lowest latency estimate,
/// with no in-flight term.
///
/// **Starves replicas.** Every request goes to the endpoint that was fastest
/// so far; the others are tried again only when their idle estimates decay
/// below it. With unlimited-capacity backends this "wins" benchmarks (the
/// published study's 640 RPS) by abandoning three of four servers; with real,
/// finite capacity it herds and collapses. Kept for comparison in the lab;
/// use [`PeakEwma`](super::PeakEwma).
#[derive(Debug, Default, Clone, Copy)]
pub struct LeastResponseTime;

impl LeastResponseTime {
    /// A least-response-time picker.
    pub fn new() -> Self {
        Self
    }
}

impl Picker for LeastResponseTime {
    type Table = ();
    fn name(&self) -> &'static str {
        "least_response_time"
    }
    fn table(&self, _: &[Arc<EndpointState>]) {}
}

impl<Req> Pick<Req> for LeastResponseTime {
    fn pick(&self, _: &Req, cx: &Pool<'_, ()>) -> Option<usize> {
        cx.min_by_score(|i| cx.estimate(i).mean_ns)
    }
}
