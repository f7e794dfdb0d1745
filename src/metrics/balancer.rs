//! [`BalanceMetrics`]: one balancer's instruments. The observable ones read
//! the live endpoint set through callbacks registered once, at build.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use arc_swap::ArcSwap;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Histogram, Meter};
use tokio::time::Instant;

use super::endpoint::{EndpointAttrs, Recorder, Slot, placement};
use super::setup::{Metrics, RetrySource};
use super::{PICK_DURATION_BUCKETS, PICK_SAMPLE_EVERY};
use crate::balance::{Built, Observe};
use crate::breaker::State;
use crate::endpoint::{EndpointMeta, EndpointObserver, EndpointState};
use crate::error::Refusal;
use crate::health::{CHECK, EJECTED, Health};
use crate::outlier::EjectionReason;
use crate::pick::prequal::ProbePool;

/// Instruments and live state of one balancer's metrics.
pub(crate) struct BalanceMetrics {
    duration: Histogram<f64>,
    pick: Histogram<f64>,
    /// `lb.name`, `lb.algorithm`.
    attrs: Box<[KeyValue]>,
    /// `attrs` + `reason`, in the order of [`Refusal::ALL`].
    refusal_attrs: [Box<[KeyValue]>; Refusal::ALL.len()],
    /// Attribute sets of endpoints born and not yet gone, by endpoint id.
    born: Mutex<HashMap<u64, Arc<Slot>>>,
    /// The current endpoints and their attribute sets.
    pool: ArcSwap<Vec<(Arc<EndpointState>, Arc<Slot>)>>,
    health: Weak<Health>,
    retries: Vec<RetrySource>,
    /// A probing picker's counts.
    probes: Option<Arc<ProbePool>>,
    /// Whether the duration histogram is bound per endpoint.
    bind: bool,
}

thread_local! {
    static PICKS: Cell<u32> = const { Cell::new(0) };
}

impl BalanceMetrics {
    pub(crate) fn new(cfg: &Metrics, built: &Built<'_>) -> Arc<Self> {
        let meter = &cfg.meter;
        let attrs: Box<[KeyValue]> = Box::new([
            KeyValue::new("lb.name", cfg.name.to_string()),
            KeyValue::new("lb.algorithm", built.algorithm),
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
                v.push(KeyValue::new("reason", r.as_str()));
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
        register(meter, &this, built.health);
        register_probes(meter, &this);
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
        let attrs = Arc::new(Slot::new(EndpointAttrs::new(
            &self.attrs,
            label,
            meta,
            &self.duration,
            self.bind,
        )));
        let recorder = Recorder {
            birth: attrs.load().durations.clone(),
            attrs: Arc::clone(&attrs),
            duration: self.duration.clone(),
        };
        self.born
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, attrs);
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
                slot.replace(EndpointAttrs::new(
                    &self.attrs,
                    s.label(),
                    &meta,
                    &self.duration,
                    self.bind,
                ));
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

/// Observes `f(endpoint)` for every endpoint of the balancer behind `weak`.
fn each<T>(
    weak: &Weak<BalanceMetrics>,
    obs: &dyn AsyncInstrument<T>,
    mut f: impl FnMut(&EndpointState, &EndpointAttrs, &dyn AsyncInstrument<T>),
) {
    let Some(m) = weak.upgrade() else { return };
    for (state, attrs) in m.pool.load().iter() {
        f(state, &attrs.load(), obs);
    }
}

/// Registers the observable instruments of `m`, reading it weakly so a
/// dropped balancer stops reporting instead of being kept alive.
fn register(meter: &Meter, m: &Arc<BalanceMetrics>, health: &Health) {
    let w = Arc::downgrade(m);

    let wk = w.clone();
    meter
        .u64_observable_counter("lb.requests")
        .with_unit("{request}")
        .with_description("Calls completed per endpoint, by outcome and failure kind")
        .with_callback(move |o| {
            each(&wk, o, |s, em, o| {
                let by_kind = s.failures_by_kind();
                let failed: u64 = by_kind.iter().sum();
                o.observe(s.requests().saturating_sub(failed), &em.outcome[0]);
                // A kind's series appears once it happened (counters only
                // grow, so it never vanishes): seven zero series per
                // endpoint would crowd the exposition.
                for (n, attrs) in by_kind.iter().zip(&em.failures) {
                    if *n > 0 {
                        o.observe(*n, attrs);
                    }
                }
            })
        })
        .build();

    let wk = w.clone();
    meter
        .u64_observable_gauge("lb.endpoint.in_flight")
        .with_unit("{request}")
        .with_description("Requests in flight per endpoint")
        .with_callback(move |o| each(&wk, o, |s, em, o| o.observe(s.in_flight() as u64, &em.base)))
        .build();

    let wk = w.clone();
    meter
        .u64_observable_counter("lb.picks")
        .with_unit("{pick}")
        .with_description("Times each endpoint was picked")
        .with_callback(move |o| each(&wk, o, |s, em, o| o.observe(s.picks(), &em.base)))
        .build();

    let wk = w.clone();
    meter
        .f64_observable_gauge("lb.endpoint.latency.ewma")
        .with_unit("s")
        .with_description("Peak-EWMA latency estimate per endpoint, decayed to now")
        .with_callback(move |o| {
            let now = Instant::now();
            each(&wk, o, |s, em, o| {
                o.observe(s.estimate(now).mean_ns / 1e9, &em.base)
            })
        })
        .build();

    let wk = w.clone();
    meter
        .f64_observable_gauge("lb.endpoint.load.utilization")
        .with_description(
            "Utilization the endpoint last reported (ORCA: application, else CPU), while the report is trusted",
        )
        .with_callback(move |o| {
            let now = Instant::now();
            each(&wk, o, |s, em, o| {
                if let Some(u) = s.reported_load(now).and_then(|r| r.utilization()) {
                    o.observe(u, &em.base);
                }
            })
        })
        .build();

    let wk = w.clone();
    meter
        .f64_observable_gauge("lb.endpoint.concurrency_limit")
        .with_unit("{request}")
        .with_description("Adaptive concurrency limit per endpoint (with adaptive limits on)")
        .with_callback(move |o| {
            each(&wk, o, |s, em, o| {
                if let Some(l) = s.concurrency_limit() {
                    o.observe(l, &em.base);
                }
            })
        })
        .build();

    let wk = w.clone();
    meter
        .u64_observable_gauge("lb.endpoint.health")
        .with_description("1 when the endpoint can be picked; `state` says why not")
        .with_callback(move |o| {
            let now = Instant::now();
            each(&wk, o, |s, em, o| {
                let i = health_index(s, now);
                o.observe(u64::from(i == 0), &em.health[i]);
            })
        })
        .build();

    let wk = w.clone();
    meter
        .u64_observable_counter("lb.panic")
        .with_unit("{pick}")
        .with_description("Picks made in panic (too few healthy endpoints)")
        .with_callback(move |o| {
            let Some(m) = wk.upgrade() else { return };
            let Some(h) = m.health.upgrade() else { return };
            o.observe(
                h.panics.load(std::sync::atomic::Ordering::Relaxed),
                &m.attrs,
            );
        })
        .build();

    let wk = w.clone();
    meter
        .u64_observable_counter("lb.refusals")
        .with_unit("{request}")
        .with_description("Calls the balancer refused at once, by reason")
        .with_callback(move |o| {
            let Some(m) = wk.upgrade() else { return };
            let Some(h) = m.health.upgrade() else { return };
            for r in Refusal::ALL {
                o.observe(h.refusals(r), &m.refusal_attrs[r.index()]);
            }
        })
        .build();

    if health.breaker.is_some() {
        let wk = w.clone();
        meter
            .u64_observable_gauge("lb.breaker.state")
            .with_description(
                "1 for each endpoint's current circuit-breaker state, 0 for the others",
            )
            .with_callback(move |o| {
                each(&wk, o, |s, em, o| {
                    if let Some(b) = s.breaker() {
                        let now = b.state();
                        for st in State::ALL {
                            o.observe(u64::from(st == now), &em.breaker[st.index()]);
                        }
                    }
                })
            })
            .build();

        let wk = w.clone();
        meter
            .u64_observable_counter("lb.breaker.transitions")
            .with_unit("{transition}")
            .with_description("Circuit-breaker transitions per endpoint, by state entered")
            .with_callback(move |o| {
                each(&wk, o, |s, em, o| {
                    if let Some(b) = s.breaker() {
                        for st in State::ALL {
                            o.observe(b.transitions_to(st), &em.breaker[st.index()]);
                        }
                    }
                })
            })
            .build();
    }

    if health.outlier.is_some() {
        let wk = w.clone();
        meter
            .u64_observable_counter("lb.outlier.ejections")
            .with_unit("{ejection}")
            .with_description("Outlier ejections per endpoint, by rule")
            .with_callback(move |o| {
                each(&wk, o, |s, em, o| {
                    for r in EjectionReason::ALL {
                        o.observe(s.outlier().ejections(r), &em.ejection[r.index()]);
                    }
                })
            })
            .build();
    }

    if !m.retries.is_empty() {
        let names = [
            ("lb.retries", "Retries sent (attempts after the first)"),
            (
                "lb.retry.budget.exhausted",
                "Retries or hedges refused by the retry budget",
            ),
            ("lb.hedges", "Hedged attempts sent"),
        ];
        for (i, (name, description)) in names.into_iter().enumerate() {
            let wk = w.clone();
            meter
                .u64_observable_counter(name)
                .with_unit("{request}")
                .with_description(description)
                .with_callback(move |o| {
                    let Some(m) = wk.upgrade() else { return };
                    let sum: u64 = m.retries.iter().filter_map(|r| r()).map(|c| c[i]).sum();
                    o.observe(sum, &m.attrs);
                })
                .build();
        }
    }
}

/// `lb.probes`: a probing picker's probes by result, and its picks by
/// source, when the balancer's picker probes.
fn register_probes(meter: &Meter, m: &Arc<BalanceMetrics>) {
    let Some(pool) = &m.probes else { return };
    let by = |key: &'static str, value: &'static str| {
        let mut v = m.attrs.to_vec();
        v.push(KeyValue::new(key, value));
        v
    };
    let results: Vec<Vec<KeyValue>> = ["sent", "answered", "failed", "dropped"]
        .into_iter()
        .map(|r| by("result", r))
        .collect();
    let sources: Vec<Vec<KeyValue>> = ["pool", "fallback"]
        .into_iter()
        .map(|r| by("source", r))
        .collect();
    let p = Arc::downgrade(pool);
    meter
        .u64_observable_counter("lb.probes")
        .with_unit("{probe}")
        .with_description("Load probes of a probing picker, by result")
        .with_callback(move |o| {
            let Some(pool) = p.upgrade() else { return };
            let c = pool.stats.counts();
            for (n, attrs) in [c.sent, c.answered, c.failed, c.dropped]
                .into_iter()
                .zip(&results)
            {
                o.observe(n, attrs);
            }
        })
        .build();
    let p = Arc::downgrade(pool);
    meter
        .u64_observable_counter("lb.probe.picks")
        .with_unit("{request}")
        .with_description("Picks of a probing picker, from its probes' answers or its fallback")
        .with_callback(move |o| {
            let Some(pool) = p.upgrade() else { return };
            let c = pool.stats.counts();
            for (n, attrs) in [c.pooled, c.fallback].into_iter().zip(&sources) {
                o.observe(n, attrs);
            }
        })
        .build();
}

/// Index into [`HEALTH_STATES`](super::endpoint::HEALTH_STATES): draining
/// first, then an open breaker (it refuses even in panic routing), then
/// ejection, then a failing check.
fn health_index(s: &EndpointState, now: Instant) -> usize {
    if s.is_draining() {
        return 6;
    }
    match s.breaker().map(|b| b.state()) {
        Some(State::Open) => 2,
        Some(State::HalfOpen) => 3,
        Some(State::ForcedOpen) => 4,
        _ if s.health_bits() & EJECTED != 0 || s.is_ejected(now) => 1,
        _ if s.health_bits() & CHECK != 0 => 5,
        _ => 0,
    }
}
