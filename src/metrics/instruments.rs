//! The observable instruments of one balancer's metrics, registered once
//! at build: callbacks that read the live endpoint set when the exporter
//! collects.

use std::sync::{Arc, Weak};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Meter};
use tokio::time::Instant;

use super::attr;
use super::balancer::BalanceMetrics;
use super::endpoint::EndpointAttrs;
use crate::admission::{CHECK, EJECTED};
use crate::breaker::State;
use crate::error::Refusal;
use crate::health::Health;
use crate::model::EndpointState;
use crate::outlier::EjectionReason;

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
/// dropped balancer stops reporting instead of being kept alive: one
/// function per family, each present only when the balancer has its part.
pub(super) fn register(meter: &Meter, m: &Arc<BalanceMetrics>, health: &Health) {
    let w = &Arc::downgrade(m);
    requests(meter, w);
    endpoint_gauges(meter, w);
    refusals(meter, w);
    if health.guards.breaker.is_some() {
        breakers(meter, w);
    }
    if health.outlier.is_some() {
        ejections(meter, w);
    }
    if !m.retries.is_empty() {
        retries(meter, w);
    }
    probes(meter, m);
}

/// `lb.requests` (successes, and failures by `error.type`),
/// `lb.endpoint.in_flight`, `lb.picks`: the per-endpoint counts.
fn requests(meter: &Meter, w: &Weak<BalanceMetrics>) {
    let wk = w.clone();
    meter
        .u64_observable_counter("lb.requests")
        .with_unit("{request}")
        .with_description("Calls completed per endpoint; failures carry error.type, their kind")
        .with_callback(move |o| {
            each(&wk, o, |s, em, o| {
                let by_kind = s.failures_by_kind();
                let failed: u64 = by_kind.iter().sum();
                o.observe(s.requests().saturating_sub(failed), &em.requests[0]);
                // A kind's series appears once it happened (counters only
                // grow, so it never vanishes): seven zero series per
                // endpoint would crowd the exposition.
                for (n, attrs) in by_kind.iter().zip(&em.requests[1..]) {
                    if *n > 0 {
                        o.observe(*n, attrs);
                    }
                }
            })
        })
        .build();

    // An up-down counter, not a gauge: requests in flight add up over
    // endpoints (OpenTelemetry's rule for additive values, and the kind of
    // the HTTP conventions' `http.client.active_requests`).
    let wk = w.clone();
    meter
        .i64_observable_up_down_counter("lb.endpoint.in_flight")
        .with_unit("{request}")
        .with_description("Requests in flight per endpoint")
        .with_callback(move |o| {
            each(&wk, o, |s, em, o| {
                o.observe(i64::try_from(s.in_flight()).unwrap_or(i64::MAX), &em.base)
            })
        })
        .build();

    let wk = w.clone();
    meter
        .u64_observable_counter("lb.picks")
        .with_unit("{pick}")
        .with_description("Times each endpoint was picked")
        .with_callback(move |o| each(&wk, o, |s, em, o| o.observe(s.picks(), &em.base)))
        .build();
}

/// The per-endpoint gauges: latency estimate, reported utilization,
/// adaptive limit, health state.
fn endpoint_gauges(meter: &Meter, w: &Weak<BalanceMetrics>) {
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
        .with_unit("1")
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
        .with_description("1 when the endpoint can be picked; lb.endpoint.state says why not")
        .with_callback(move |o| {
            let now = Instant::now();
            each(&wk, o, |s, em, o| {
                let i = health_index(s, now);
                o.observe(u64::from(i == 0), &em.health[i]);
            })
        })
        .build();
}

/// `lb.panic` and `lb.refusals`: the balancer's own decisions.
fn refusals(meter: &Meter, w: &Weak<BalanceMetrics>) {
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
                o.observe(h.census.refusals(r), &m.refusal_attrs[r.index()]);
            }
        })
        .build();
}

/// The breaker's state gauge and transition counter.
fn breakers(meter: &Meter, w: &Weak<BalanceMetrics>) {
    let wk = w.clone();
    meter
        .u64_observable_gauge("lb.breaker.state")
        .with_description("1 for each endpoint's current circuit-breaker state, 0 for the others")
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

/// `lb.outlier.ejections`, by rule.
fn ejections(meter: &Meter, w: &Weak<BalanceMetrics>) {
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

/// The retry layers' counters: retries, budget refusals, hedges.
fn retries(meter: &Meter, w: &Weak<BalanceMetrics>) {
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

/// `lb.probes`: a probing picker's probes by result, and its picks by
/// source, when the balancer's picker probes.
fn probes(meter: &Meter, m: &Arc<BalanceMetrics>) {
    let Some(pool) = &m.probes else { return };
    let by = |key: &'static str, value: &'static str| {
        let mut v = m.attrs.to_vec();
        v.push(KeyValue::new(key, value));
        v
    };
    let results: Vec<Vec<KeyValue>> = ["sent", "answered", "failed", "dropped"]
        .into_iter()
        .map(|r| by(attr::PROBE_RESULT, r))
        .collect();
    let sources: Vec<Vec<KeyValue>> = ["pool", "fallback"]
        .into_iter()
        .map(|r| by(attr::PROBE_SOURCE, r))
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
