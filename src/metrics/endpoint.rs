//! One endpoint's attribute sets, built once when the endpoint joins, and
//! the one per-request record.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;

use arc_swap::ArcSwap;

use super::attr;
use crate::breaker::State;
use crate::model::{EndpointMeta, EndpointObserver};
use crate::outcome::{FailureKind, Outcome};
use crate::outlier::EjectionReason;

/// Values of `lb.endpoint.state` on `lb.endpoint.health`, in the order of
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

/// Outcomes a call is recorded under: success, then one per failure kind
/// (`error.type`), in the order of [`FailureKind::NAMES`].
pub(crate) const OUTCOMES: usize = 1 + FailureKind::NAMES.len();

/// Index into an endpoint's per-outcome sets, `None` for a call classified
/// `Ignore` (left out of `lb.requests` and the histogram alike).
#[inline]
fn outcome_index(outcome: Outcome) -> Option<usize> {
    match outcome {
        Outcome::Success => Some(0),
        Outcome::Failure(kind) => Some(1 + kind.index()),
        Outcome::Ignore => None,
    }
}

/// An endpoint's attribute sets for every series it reports (kept by the
/// balancer's metrics, read when the exporter collects and on each record).
#[derive(Debug)]
pub(crate) struct EndpointAttrs {
    /// The zone and priority the sets carry.
    pub(crate) placement: (String, u32),
    /// `lb.name`, `lb.algorithm`, `lb.endpoint`, and for a placed endpoint
    /// `lb.endpoint.zone`, `lb.endpoint.priority`.
    pub(crate) base: Box<[KeyValue]>,
    /// `lb.requests`' sets: `base` for successes, then `base` +
    /// `error.type` for each failure kind ([`OUTCOMES`] in all).
    pub(crate) requests: [Box<[KeyValue]>; OUTCOMES],
    /// `lb.request.duration`'s sets, in the same order: `base` without
    /// `lb.algorithm` (one attribute less to hash on every record; a
    /// balancer has one algorithm), + `error.type` for failures.
    pub(crate) durations: [Box<[KeyValue]>; OUTCOMES],
    /// `base` + `lb.endpoint.state`, in the order of [`HEALTH_STATES`].
    pub(crate) health: [Box<[KeyValue]>; HEALTH_STATES.len()],
    /// `base` + `lb.breaker.state`, in the order of [`State::ALL`].
    pub(crate) breaker: [Box<[KeyValue]>; State::ALL.len()],
    /// `base` + `lb.outlier.reason`, in the order of [`EjectionReason::ALL`].
    pub(crate) ejection: [Box<[KeyValue]>; EjectionReason::ALL.len()],
    /// `lb.request.duration` bound to each of `durations`, on its first
    /// record (feature `metrics-bound`, with
    /// `Metrics::bound(true)`).
    #[cfg(feature = "metrics-bound")]
    pub(crate) bound: Option<super::bound::Bound>,
}

impl EndpointAttrs {
    /// The sets of endpoint `endpoint` placed by `meta`: its zone and
    /// priority are attributes (bounded: one value per endpoint), its
    /// labels never are. An endpoint with neither a zone nor a priority
    /// other than 0 carries neither attribute: the SDK hashes every
    /// attribute of a set on each record of the histogram, so users who do
    /// not place their endpoints do not pay for two more. Prometheus reads
    /// an absent label as empty, so `lb_endpoint_zone=""` still selects
    /// them.
    pub(crate) fn new(
        balancer: &[KeyValue],
        endpoint: &str,
        meta: &EndpointMeta,
        bind: bool,
    ) -> Self {
        let placement = placement(meta);
        let mut base = balancer.to_vec();
        base.push(KeyValue::new(attr::ENDPOINT, endpoint.to_string()));
        if !placement.0.is_empty() || placement.1 != 0 {
            base.push(KeyValue::new(attr::ZONE, placement.0.clone()));
            base.push(KeyValue::new(attr::PRIORITY, i64::from(placement.1)));
        }
        let plus = |set: &[KeyValue], key: &'static str, value: &'static str| -> Box<[KeyValue]> {
            let mut v = set.to_vec();
            v.push(KeyValue::new(key, value));
            v.into_boxed_slice()
        };
        let by_outcome = |set: &[KeyValue]| -> [Box<[KeyValue]>; OUTCOMES] {
            std::array::from_fn(|i| match i {
                0 => set.into(),
                i => plus(set, attr::ERROR_TYPE, FailureKind::NAMES[i - 1]),
            })
        };
        let short: Vec<KeyValue> = base
            .iter()
            .filter(|kv| kv.key.as_str() != attr::ALGORITHM)
            .cloned()
            .collect();
        #[cfg(not(feature = "metrics-bound"))]
        let _ = bind;
        Self {
            requests: by_outcome(&base),
            durations: by_outcome(&short),
            health: HEALTH_STATES.map(|s| plus(&base, attr::ENDPOINT_STATE, s)),
            breaker: State::ALL.map(|s| plus(&base, attr::BREAKER_STATE, s.as_str())),
            ejection: EjectionReason::ALL.map(|r| plus(&base, attr::OUTLIER_REASON, r.as_str())),
            #[cfg(feature = "metrics-bound")]
            bound: bind.then(super::bound::Bound::default),
            base: base.into_boxed_slice(),
            placement,
        }
    }

    /// Records `secs` on `duration` under outcome `i`: through the bound
    /// histogram when there is one, else with the attribute set.
    #[inline]
    fn record(&self, duration: &Histogram<f64>, i: usize, secs: f64) {
        #[cfg(feature = "metrics-bound")]
        if let Some(bound) = &self.bound {
            return bound.record(duration, &self.durations[i], i, secs);
        }
        duration.record(secs, &self.durations[i]);
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
    /// [`Recorder`]'s birth sets are no longer its series.
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

    /// The current sets, owned.
    pub(crate) fn load_full(&self) -> Arc<EndpointAttrs> {
        self.current.load_full()
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
/// A record is `Histogram::record` with the endpoint's attribute set for
/// the call's outcome, built when the endpoint joined: no allocation, but
/// the SDK hashes and compares the set's attributes on every record (see
/// the [module docs](super) on cost). With feature `metrics-bound` and
/// `Metrics::bound(true)` it goes through a
/// histogram bound to that set instead.
///
/// The sets the endpoint joined with are kept here as well as in its
/// [`Slot`], and used while its placement has not changed (one relaxed
/// load): reading them through the slot's `ArcSwap` costs two locked
/// instructions per request. After a change (a discovery update of the
/// endpoint's zone or priority, rare), records read the slot.
#[derive(Debug)]
pub(crate) struct Recorder {
    /// The endpoint's attribute sets.
    pub(crate) slot: Arc<Slot>,
    /// The sets the endpoint joined with.
    pub(crate) birth: Arc<EndpointAttrs>,
    /// The balancer's `lb.request.duration`.
    pub(crate) duration: Histogram<f64>,
}

impl EndpointObserver for Recorder {
    /// Calls classified `Ignore` are left out, as they are from the
    /// endpoint's request counters, so `lb.requests` and the histogram agree.
    #[inline]
    fn finished(&self, outcome: Outcome, latency: Duration) {
        let Some(i) = outcome_index(outcome) else {
            return;
        };
        let secs = latency.as_secs_f64();
        if !self.slot.moved.load(Ordering::Relaxed) {
            return self.birth.record(&self.duration, i, secs);
        }
        self.slot.load().record(&self.duration, i, secs);
    }
}
