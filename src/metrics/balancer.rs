//! [`BalanceMetrics`]: one balancer's instruments. The observable ones read
//! the live endpoint set through callbacks registered once, at build.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use arc_swap::ArcSwap;
use opentelemetry::KeyValue;
use opentelemetry::metrics::Histogram;

use super::endpoint::{EndpointAttrs, Recorder, Slot, placement};
use super::setup::{Metrics, RetrySource};
use super::{PICK_DURATION_BUCKETS, PICK_SAMPLE_EVERY, attr};
use crate::balance::{Built, Observe};
use crate::error::Refusal;
use crate::health::Health;
use crate::model::{EndpointMeta, EndpointObserver, EndpointState};
use crate::pick::prequal::ProbePool;

/// Instruments and live state of one balancer's metrics.
pub(crate) struct BalanceMetrics {
    pub(super) duration: Histogram<f64>,
    pub(super) pick: Histogram<f64>,
    /// `lb.name`, `lb.algorithm`.
    pub(super) attrs: Box<[KeyValue]>,
    /// `attrs` + `lb.refusal.reason`, in the order of [`Refusal::ALL`].
    pub(super) refusal_attrs: [Box<[KeyValue]>; Refusal::ALL.len()],
    /// Attribute sets of endpoints born and not yet gone, by endpoint id.
    pub(super) born: Mutex<HashMap<u64, Arc<Slot>>>,
    /// The current endpoints and their attribute sets.
    pub(super) pool: ArcSwap<Vec<(Arc<EndpointState>, Arc<Slot>)>>,
    pub(super) health: Weak<Health>,
    pub(super) retries: Vec<RetrySource>,
    /// A probing picker's counts.
    pub(super) probes: Option<Arc<ProbePool>>,
    /// Whether the duration histogram is bound per endpoint (feature
    /// `metrics-bound`).
    pub(super) bind: bool,
}

thread_local! {
    static PICKS: Cell<u32> = const { Cell::new(0) };
}

impl BalanceMetrics {
    pub(crate) fn new(cfg: &Metrics, built: &Built<'_>) -> Arc<Self> {
        let meter = &cfg.meter;
        let attrs: Box<[KeyValue]> = Box::new([
            KeyValue::new(attr::NAME, cfg.name.to_string()),
            KeyValue::new(attr::ALGORITHM, built.algorithm),
        ]);
        let this = Arc::new(Self {
            duration: meter
                .f64_histogram("lb.request.duration")
                .with_unit("s")
                .with_description("Duration of calls through the balancer, by endpoint and outcome")
                .with_boundaries(cfg.buckets.to_vec())
                .build(),
            pick: meter
                .f64_histogram("lb.pick.duration")
                .with_unit("s")
                .with_description("Time to pick an endpoint and take its slot (sampled)")
                .with_boundaries(PICK_DURATION_BUCKETS.to_vec())
                .build(),
            refusal_attrs: Refusal::ALL.map(|r| {
                let mut v = attrs.to_vec();
                v.push(KeyValue::new(attr::REFUSAL_REASON, r.as_str()));
                v.into_boxed_slice()
            }),
            attrs,
            born: Mutex::new(HashMap::new()),
            pool: ArcSwap::from_pointee(Vec::new()),
            health: Arc::downgrade(built.health),
            retries: cfg.retries.clone(),
            probes: built.probes.cloned(),
            bind: cfg.bind,
        });
        super::instruments::register(meter, &this, built.health);
        this
    }
}

impl Observe for BalanceMetrics {
    fn endpoint(
        &self,
        id: u64,
        label: &str,
        meta: &EndpointMeta,
    ) -> Option<Box<dyn EndpointObserver>> {
        let slot = Arc::new(Slot::new(EndpointAttrs::new(
            &self.attrs,
            label,
            meta,
            self.bind,
        )));
        let recorder = Recorder {
            birth: slot.load_full(),
            slot: Arc::clone(&slot),
            duration: self.duration.clone(),
        };
        self.born
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, slot);
        Some(Box::new(recorder))
    }

    /// Also rebuilds the attribute sets of endpoints whose zone or
    /// priority changed (on membership and metadata changes only).
    fn set_pool(&self, members: &[Arc<EndpointState>]) {
        let mut born = self.born.lock().unwrap_or_else(PoisonError::into_inner);
        let pool: Vec<_> = members
            .iter()
            .filter_map(|s| born.get(&s.id()).map(|a| (Arc::clone(s), Arc::clone(a))))
            .collect();
        for (s, slot) in &pool {
            let meta = s.meta();
            if slot.load().placement != placement(&meta) {
                slot.replace(EndpointAttrs::new(&self.attrs, s.label(), &meta, self.bind));
            }
        }
        born.retain(|id, _| members.iter().any(|s| s.id() == *id));
        self.pool.store(Arc::new(pool));
    }

    /// Times one pick in [`PICK_SAMPLE_EVERY`] on this thread. Wall time,
    /// not tokio's clock: this measures CPU work, which a paused test clock
    /// would report as zero.
    #[inline]
    fn pick_started(&self) -> Option<std::time::Instant> {
        let n = PICKS.with(|c| {
            let n = c.get().wrapping_add(1);
            c.set(n);
            n
        });
        n.is_multiple_of(PICK_SAMPLE_EVERY)
            .then(std::time::Instant::now)
    }

    fn pick_ended(&self, start: std::time::Instant) {
        self.pick.record(start.elapsed().as_secs_f64(), &self.attrs);
    }
}
