//! Bound histograms (feature `metrics-bound`): `lb.request.duration`
//! recorded through OpenTelemetry's bound instruments, experimental in
//! 0.33, for those who accept that switch in their SDK for the cheaper
//! record.

use std::sync::OnceLock;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{BoundHistogram, Histogram};

use super::endpoint::OUTCOMES;

/// One endpoint's histograms bound to its per-outcome attribute sets, each
/// bound on its first record: a series appears when its outcome first
/// happens, as it does without binding, and an endpoint that never fails
/// holds one binding.
#[derive(Debug, Default)]
pub(crate) struct Bound([OnceLock<BoundHistogram<f64>>; OUTCOMES]);

impl Bound {
    /// Records `secs` under outcome `i`, whose attribute set is `attrs`.
    #[inline]
    pub(crate) fn record(
        &self,
        duration: &Histogram<f64>,
        attrs: &[KeyValue],
        i: usize,
        secs: f64,
    ) {
        self.0[i].get_or_init(|| duration.bind(attrs)).record(secs);
    }
}
