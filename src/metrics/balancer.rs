//! [`BalanceMetrics`]: one balancer's instruments. The observable ones read
//! the live endpoint set through callbacks registered once, at build.

use std::cell::Cell;
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Histogram, Meter};
use tokio::time::Instant;

use super::endpoint::EndpointMetrics;
use super::setup::{Label, Metrics, RetrySource, Setup};
use super::{PICK_DURATION_BUCKETS, PICK_SAMPLE_EVERY};
use crate::breaker::State;
use crate::endpoint::{EndpointState, Model};
use crate::outlier::EjectionReason;

/// Instruments and live state of one balancer's metrics.
pub(crate) struct BalanceMetrics {
    duration: Histogram<f64>,
    pick: Histogram<f64>,
    /// `lb.name`, `lb.algorithm`.
    attrs: Box<[KeyValue]>,
    /// The current endpoints, swapped with every new snapshot.
    pool: ArcSwap<Vec<Arc<EndpointState>>>,
    model: Arc<Model>,
    retries: Vec<RetrySource>,
}

/// A balancer's metrics with the key labeller: what `Shared` keeps.
pub(crate) struct Attached<K> {
    pub(crate) metrics: Arc<BalanceMetrics>,
    label: Label<K>,
}

impl<K> Setup<K> {
    /// Creates the instruments for a balancer whose picker is `algorithm`.
    pub(crate) fn attach(self, algorithm: &'static str, model: &Arc<Model>) -> Attached<K> {
        Attached {
            metrics: BalanceMetrics::new(&self.metrics, algorithm, model),
            label: self.label,
        }
    }
}

impl<K> Attached<K> {
    /// The attribute sets of a new endpoint keyed `key`.
    pub(crate) fn endpoint(&self, key: &K) -> EndpointMetrics {
        let m = &self.metrics;
        EndpointMetrics::new(m.duration.clone(), &m.attrs, (self.label)(key))
    }
}

thread_local! {
    static PICKS: Cell<u32> = const { Cell::new(0) };
}

impl BalanceMetrics {
    fn new(cfg: &Metrics, algorithm: &'static str, model: &Arc<Model>) -> Arc<Self> {
        let meter = &cfg.meter;
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
            attrs: Box::new([
                KeyValue::new("lb.name", cfg.name.to_string()),
                KeyValue::new("lb.algorithm", algorithm),
            ]),
            pool: ArcSwap::from_pointee(Vec::new()),
            model: Arc::clone(model),
            retries: cfg.retries.clone(),
        });
        register(meter, &this);
        this
    }

    /// Called with every new endpoint set.
    pub(crate) fn set_pool(&self, states: &[Arc<EndpointState>]) {
        self.pool.store(Arc::new(states.to_vec()));
    }

    /// Runs `pick`, timing one call in [`PICK_SAMPLE_EVERY`] on this thread.
    #[inline]
    pub(crate) fn time_pick<T>(&self, pick: impl FnOnce() -> T) -> T {
        let n = PICKS.with(|c| {
            let n = c.get().wrapping_add(1);
            c.set(n);
            n
        });
        if !n.is_multiple_of(PICK_SAMPLE_EVERY) {
            return pick();
        }
        // Wall time, not tokio's clock: this measures CPU work, which a
        // paused test clock would report as zero.
        let start = std::time::Instant::now();
        let out = pick();
        self.pick.record(start.elapsed().as_secs_f64(), &self.attrs);
        out
    }
}

/// Observes `f(endpoint)` for every endpoint of the balancer behind `weak`.
fn each<T>(
    weak: &Weak<BalanceMetrics>,
    obs: &dyn AsyncInstrument<T>,
    mut f: impl FnMut(&EndpointState, &EndpointMetrics, &dyn AsyncInstrument<T>),
) {
    let Some(m) = weak.upgrade() else { return };
    for state in m.pool.load().iter() {
        if let Some(em) = state.metrics() {
            f(state, em, obs);
        }
    }
}

/// Registers the observable instruments of `m`, reading it weakly so a
/// dropped balancer stops reporting instead of being kept alive.
fn register(meter: &Meter, m: &Arc<BalanceMetrics>) {
    let w = Arc::downgrade(m);
    let health = &m.model.health;

    let wk = w.clone();
    meter
        .u64_observable_counter("lb.requests")
        .with_unit("{request}")
        .with_description("Calls completed per endpoint, by outcome")
        .with_callback(move |o| {
            each(&wk, o, |s, em, o| {
                let (total, failed) = (s.requests(), s.failures());
                o.observe(total.saturating_sub(failed), &em.outcome[0]);
                o.observe(failed, &em.outcome[1]);
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
            if let Some(m) = wk.upgrade() {
                let n = m
                    .model
                    .health
                    .panics
                    .load(std::sync::atomic::Ordering::Relaxed);
                o.observe(n, &m.attrs);
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

/// Index into [`HEALTH_STATES`](super::endpoint::HEALTH_STATES): an open
/// breaker wins over ejection (it refuses even in panic routing).
fn health_index(s: &EndpointState, now: Instant) -> usize {
    match s.breaker().map(|b| b.state()) {
        Some(State::Open) => 2,
        Some(State::HalfOpen) => 3,
        Some(State::ForcedOpen) => 4,
        _ if s.is_ejected(now) => 1,
        _ => 0,
    }
}
