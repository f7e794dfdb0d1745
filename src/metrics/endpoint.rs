//! One endpoint's attribute sets, built once when the endpoint joins, and
//! the one per-request record.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{BoundHistogram, Histogram};

use arc_swap::ArcSwap;

use crate::breaker::State;
use crate::classify::{FailureKind, Outcome};
use crate::endpoint::{EndpointMeta, EndpointObserver};
use crate::outlier::EjectionReason;

/// Values of the `state` attribute of `lb.endpoint.health`, in the order of
/// [`EndpointAttrs::health`].
pub(crate) const HEALTH_STATES: [&str; 7] = [
    "healthy",
    "ejected",
    "open",
    "half_open",
    "forced_open",
    "failing_check",
    "draining",
];

/// An endpoint's attribute sets for every series its observable instruments
/// report (kept by the balancer's metrics, read when the exporter collects).
#[derive(Debug)]
pub(crate) struct EndpointAttrs {
    /// The zone and priority the sets carry.
    pub(crate) placement: (String, u32),
    /// `lb.name`, `lb.algorithm`, `lb.endpoint`, and for a placed endpoint
    /// `lb.endpoint.zone`, `lb.endpoint.priority`.
    pub(crate) base: Box<[KeyValue]>,
    /// `base` + `outcome`: success, failure.
    pub(crate) outcome: [Box<[KeyValue]>; 2],
    /// `base` + `outcome` failure + `kind`, in the order of
    /// [`FailureKind::NAMES`] (`lb.requests`' failure series).
    pub(crate) failures: [Box<[KeyValue]>; FailureKind::NAMES.len()],
    /// `lb.request.duration` bound to the two `outcome` sets (`None` with
    /// [`Metrics::bound(false)`](super::Metrics::bound)).
    pub(crate) durations: Option<[BoundHistogram<f64>; 2]>,
    /// `base` + `state`, in the order of [`HEALTH_STATES`].
    pub(crate) health: [Box<[KeyValue]>; HEALTH_STATES.len()],
    /// `base` + `state`, in the order of [`State::ALL`].
    pub(crate) breaker: [Box<[KeyValue]>; State::ALL.len()],
    /// `base` + `reason`, in the order of [`EjectionReason::ALL`].
    pub(crate) ejection: [Box<[KeyValue]>; EjectionReason::ALL.len()],
}

impl EndpointAttrs {
    /// The sets of endpoint `endpoint` placed by `meta`: its zone and
    /// priority are attributes (bounded: one value per endpoint), its
    /// labels never are. An endpoint with neither a zone nor a priority
    /// other than 0 carries neither attribute: the SDK hashes every
    /// attribute of a set on each record, and the two extra ones cost the
    /// per-request histogram about 10% (`benches/balance.rs`, `metrics/on`)
    /// for users who do not place their endpoints. Prometheus reads an
    /// absent label as empty, so `lb_endpoint_zone=""` still selects them.
    pub(crate) fn new(
        balancer: &[KeyValue],
        endpoint: &str,
        meta: &EndpointMeta,
        duration: &Histogram<f64>,
        bind: bool,
    ) -> Self {
        let placement = placement(meta);
        let mut base = balancer.to_vec();
        base.push(KeyValue::new("lb.endpoint", endpoint.to_string()));
        if !placement.0.is_empty() || placement.1 != 0 {
            base.push(KeyValue::new("lb.endpoint.zone", placement.0.clone()));
            base.push(KeyValue::new(
                "lb.endpoint.priority",
                i64::from(placement.1),
            ));
        }
        let with = |key: &'static str, value: &'static str| -> Box<[KeyValue]> {
            let mut v = base.clone();
            v.push(KeyValue::new(key, value));
            v.into_boxed_slice()
        };
        let outcome = [with("outcome", "success"), with("outcome", "failure")];
        let failures = FailureKind::NAMES.map(|kind| {
            let mut v = outcome[1].to_vec();
            v.push(KeyValue::new("kind", kind));
            v.into_boxed_slice()
        });
        Self {
            failures,
            durations: bind.then(|| [duration.bind(&outcome[0]), duration.bind(&outcome[1])]),
            outcome,
            health: HEALTH_STATES.map(|s| with("state", s)),
            breaker: State::ALL.map(|s| with("state", s.as_str())),
            ejection: EjectionReason::ALL.map(|r| with("reason", r.as_str())),
            base: base.into_boxed_slice(),
            placement,
        }
    }
}

/// The attributes of an endpoint's placement: zone and priority.
pub(crate) fn placement(meta: &EndpointMeta) -> (String, u32) {
    (meta.locality().zone().to_string(), meta.priority())
}

/// An endpoint's attribute sets, replaced when its placement changes, and
/// whether they have been.
#[derive(Debug)]
pub(crate) struct Slot {
    current: ArcSwap<EndpointAttrs>,
    /// The sets have been replaced since the endpoint joined: its
    /// [`Recorder`]'s birth histograms are no longer its series.
    moved: AtomicBool,
}

impl Slot {
    pub(crate) fn new(attrs: EndpointAttrs) -> Self {
        Self {
            current: ArcSwap::from_pointee(attrs),
            moved: AtomicBool::new(false),
        }
    }

    /// The current sets.
    pub(crate) fn load(&self) -> arc_swap::Guard<Arc<EndpointAttrs>> {
        self.current.load()
    }

    /// Replaces the sets (a new placement); records go to the new ones
    /// from now on.
    pub(crate) fn replace(&self, attrs: EndpointAttrs) {
        self.current.store(Arc::new(attrs));
        self.moved.store(true, Ordering::Release);
    }
}

/// Records `lb.request.duration` for one endpoint: the only per-request
/// measurement. Lives in the endpoint's state.
///
/// The histogram is bound to the endpoint's two outcome sets when they are
/// built (OpenTelemetry's bound instruments): a record is one atomic
/// update of the SDK's buckets. Unbound, the SDK hashes the five or seven
/// attributes with SipHash and compares them on every record, which made
/// metrics on 1.9-2.0x metrics off per request (`benches/balance.rs`,
/// `metrics/on`); bound, see the bench's figures in the README.
///
/// The histograms bound when the endpoint joined are kept here as well as
/// in its [`Slot`], and used while its placement has not changed (one
/// relaxed load): reading them through the slot's `ArcSwap` cost two
/// locked instructions and 85 instructions in all per request, a third of
/// the record (callgrind, `benches/interleaved.rs`, `whole`). After a
/// change (a discovery update of the endpoint's zone or priority, rare),
/// records read the slot. The birth series then stays bound until the
/// endpoint leaves: under cumulative temporality (Prometheus) every series
/// stays anyway; under delta, that one is not evicted while idle.
#[derive(Debug)]
pub(crate) struct Recorder {
    /// The endpoint's attribute sets and their bound histograms.
    pub(crate) attrs: Arc<Slot>,
    /// The histograms bound to the sets the endpoint joined with, if bound.
    pub(crate) birth: Option<[BoundHistogram<f64>; 2]>,
    /// The histogram itself, for records without binding.
    pub(crate) duration: Histogram<f64>,
}

impl EndpointObserver for Recorder {
    /// Calls classified `Ignore` are left out, as they are from the
    /// endpoint's request counters, so `lb.requests` and the histogram agree.
    #[inline]
    fn finished(&self, outcome: Outcome, latency: Duration) {
        let i = match outcome {
            Outcome::Success => 0,
            Outcome::Failure(_) => 1,
            Outcome::Ignore => return,
        };
        if let Some(birth) = &self.birth
            && !self.attrs.moved.load(Ordering::Relaxed)
        {
            return birth[i].record(latency.as_secs_f64());
        }
        let attrs = self.attrs.load();
        match &attrs.durations {
            Some(bound) => bound[i].record(latency.as_secs_f64()),
            None => self
                .duration
                .record(latency.as_secs_f64(), &attrs.outcome[i]),
        }
    }
}
