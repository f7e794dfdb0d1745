//! [`EndpointMetrics`]: one endpoint's attribute sets, built once when the
//! endpoint joins, and the one per-request record.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;

use crate::breaker::State;
use crate::classify::Outcome;
use crate::outlier::EjectionReason;

/// Values of the `state` attribute of `lb.endpoint.health`, in the order of
/// [`EndpointMetrics::health`].
pub(crate) const HEALTH_STATES: [&str; 5] =
    ["healthy", "ejected", "open", "half_open", "forced_open"];

/// An endpoint's attribute sets for every series it reports, and the
/// request-duration histogram. Lives in the endpoint's
/// [`EndpointState`](crate::endpoint::EndpointState).
#[derive(Debug)]
pub(crate) struct EndpointMetrics {
    duration: Histogram<f64>,
    /// `lb.name`, `lb.algorithm`, `lb.endpoint`.
    pub(crate) base: Box<[KeyValue]>,
    /// `base` + `outcome`: success, failure.
    pub(crate) outcome: [Box<[KeyValue]>; 2],
    /// `base` + `state`, in the order of [`HEALTH_STATES`].
    pub(crate) health: [Box<[KeyValue]>; 5],
    /// `base` + `state`, in the order of [`State::ALL`].
    pub(crate) breaker: [Box<[KeyValue]>; 5],
    /// `base` + `reason`, in the order of [`EjectionReason::ALL`].
    pub(crate) ejection: [Box<[KeyValue]>; 5],
}

impl EndpointMetrics {
    pub(crate) fn new(duration: Histogram<f64>, balancer: &[KeyValue], endpoint: String) -> Self {
        let mut base = balancer.to_vec();
        base.push(KeyValue::new("lb.endpoint", endpoint));
        let with = |key: &'static str, value: &'static str| -> Box<[KeyValue]> {
            let mut v = base.clone();
            v.push(KeyValue::new(key, value));
            v.into_boxed_slice()
        };
        Self {
            duration,
            outcome: [with("outcome", "success"), with("outcome", "failure")],
            health: HEALTH_STATES.map(|s| with("state", s)),
            breaker: State::ALL.map(|s| with("state", s.as_str())),
            ejection: EjectionReason::ALL.map(|r| with("reason", r.as_str())),
            base: base.into_boxed_slice(),
        }
    }

    /// Records one finished call: the only per-request measurement. Calls
    /// classified `Ignore` are left out, as they are from the endpoint's
    /// request counters, so `lb.requests` and the histogram agree.
    #[inline]
    pub(crate) fn record(&self, outcome: Outcome, latency: Duration) {
        let attrs = match outcome {
            Outcome::Success => &self.outcome[0],
            Outcome::Failure(_) => &self.outcome[1],
            Outcome::Ignore => return,
        };
        self.duration.record(latency.as_secs_f64(), attrs);
    }
}
