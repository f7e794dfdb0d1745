//! A picker's row: the scenario's client balancers built with tower-lb (one
//! per `load.clients`, each with its own retry layer and budget, as each
//! caller replica would have), and what they know at the row's end.

use std::sync::Arc;

use tower::Layer;
use tower_lb::Balance;
use tower_lb::balance::Builder;
use tower_lb::breaker::State as BreakerState;
use tower_lb::http::Classifier;
use tower_lb::http::LoadProbe;
use tower_lb::metrics::Metrics;
use tower_lb::outlier::{EjectionReason, OutlierDetection};
use tower_lb::pick::Pick;
use tower_lb::probe::{self, Probes};
use tower_lb::retry::RetryLayer;

use super::endpoint::{Endpoint, Parts, Target};
use super::message::LabRequest;
use super::row::{Ctx, Progress, Row, Traffic};
use crate::error::LabError;
use crate::record::Recorder;
use crate::report::LoadProbeReport;
use crate::scenario::random::sub_seed;
use crate::scenario::{RetrySpec, membership};

/// The client balancers of one row.
pub type Lb<P> = Balance<usize, Endpoint, P, Classifier>;

/// A client balancer's builder.
type LbBuilder<P> = Builder<usize, Endpoint, P, Classifier>;

/// One row's client balancers, their retry layers when the scenario has
/// one, and their load-probe drivers when the picker probes load.
pub struct Clients<P: tower_lb::pick::Picker> {
    /// One balancer per client.
    pub lbs: Vec<Lb<P>>,
    /// One retry layer (and budget) per client.
    pub retries: Option<Vec<RetryLayer>>,
    /// One load-probe driver per client (`prequal`), running while they
    /// live.
    pub load_probes: Vec<Probes>,
}

impl<P: tower_lb::pick::Picker> Clients<P> {
    /// Every client's load-probe counts, summed (`None` without load
    /// probes).
    pub fn load_probe_counts(&self) -> Option<LoadProbeReport> {
        if self.load_probes.is_empty() {
            return None;
        }
        let mut sum = LoadProbeReport::default();
        for c in self.load_probes.iter().map(Probes::counts) {
            sum.sent += c.sent;
            sum.answered += c.answered;
            sum.failed += c.failed;
            sum.dropped += c.dropped;
            sum.pooled += c.pooled;
            sum.fallback += c.fallback;
        }
        Some(sum)
    }
}

impl<P: Pick<LabRequest>> Clients<P> {
    /// Starts `users` (or the open loop's arrivals) of `row` on the
    /// clients, through their retry layers when they have them.
    pub fn start(&self, row: &Row, users: u32, progress: Option<Progress>) -> Traffic {
        match &self.retries {
            Some(layers) => {
                let lbs = self.lbs.iter().zip(layers);
                row.start(
                    users,
                    lbs.map(|(lb, l)| l.layer(lb.clone())).collect(),
                    progress,
                )
            }
            None => row.start(users, self.lbs.clone(), progress),
        }
    }
}

/// What the balancers know at the row's end, summed over clients where
/// per backend.
pub struct EndStats {
    /// `picks[c][b]`: client `c`'s picks of backend `b`.
    pub picks: Vec<Vec<u64>>,
    /// Requests in flight per backend.
    pub in_flight: Vec<usize>,
    /// Outlier ejections per backend.
    pub ejections: Vec<u64>,
    /// Breaker openings per backend.
    pub opens: Vec<u64>,
}

/// Builds the scenario's client balancers with `make`'s picker over
/// `targets`, and their retry layers when the scenario has one.
pub fn build<P, F>(
    ctx: &Ctx<'_>,
    label: &str,
    weighted: bool,
    targets: &[Target],
    rec: &Arc<Recorder>,
    make: F,
) -> Result<Clients<P>, LabError>
where
    P: Pick<LabRequest>,
    F: Fn() -> P,
{
    let sc = ctx.sc;
    let clients = sc.load.clients;
    let retries = retry_layers(ctx)?;
    let outlier = sc
        .resilience
        .outlier
        .as_ref()
        .map(|o| o.config())
        .transpose()
        .map_err(|e| bad(ctx, e))?;
    let names: Arc<[String]> = sc.backends.iter().map(|b| b.name.clone()).collect();
    let mut lbs = Vec::with_capacity(clients as usize);
    let mut load_probes = Vec::new();
    for c in 0..clients {
        let b = Balance::builder()
            .picker(make())
            .classify(Classifier::new().track(ctx.track.track()))
            .routing(sc.routing(ctx.variant, c))
            .per_thread_load(ctx.per_thread);
        let b = match &ctx.tuning {
            Some(t) => t.builder(b),
            None => b,
        };
        let b = resilience(ctx, b, c, outlier.as_ref())?;
        let mut b = metrics(ctx, b, label, c, retries.as_deref(), &names);
        let given = sc.given(ctx.variant, ctx.seed, c);
        let members = membership::initial(&sc.backends);
        for (i, t) in targets.iter().enumerate() {
            if !given[i] || !members[i] {
                continue;
            }
            let (ep, w) = endpoint(ctx, weighted, t, rec, c, i);
            b = b.endpoint_with(i, ep, w, sc.meta(i));
        }
        // Load reports reach the endpoint's model through the classifier.
        let lb = b
            .build()
            .map_err(|e| LabError::input(format!("scenario {}: {e}", sc.name)))?;
        // A probing picker's load probes, through the endpoints' own services:
        // the backends' server layer answers them.
        if lb.picker().probe_pool().is_some() {
            let p = probe::spawn(&lb, LoadProbe::http())
                .map_err(|e| LabError::runtime(format!("probes: {e}")))?;
            load_probes.push(p);
        }
        lbs.push(lb);
    }
    Ok(Clients {
        lbs,
        retries,
        load_probes,
    })
}

/// One retry layer per client when the scenario has `[resilience.retry]`.
fn retry_layers(ctx: &Ctx<'_>) -> Result<Option<Vec<RetryLayer>>, LabError> {
    let Some(spec) = &ctx.sc.resilience.retry else {
        return Ok(None);
    };
    let layers = (0..ctx.sc.load.clients)
        .map(|_| retry_layer(spec))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LabError::input(format!("[resilience.retry]: {e}")))?;
    Ok(Some(layers))
}

/// The input error for a scenario field's `(field, problem)`.
fn bad(ctx: &Ctx<'_>, (field, problem): (String, String)) -> LabError {
    LabError::input(format!("scenario {}: `{field}`: {problem}", ctx.sc.name))
}

/// `b` with client `c`'s seed (in `--sim`) and the scenario's breaker,
/// outlier detection, panic threshold, limits and slow start.
fn resilience<P>(
    ctx: &Ctx<'_>,
    mut b: LbBuilder<P>,
    c: u32,
    outlier: Option<&OutlierDetection>,
) -> Result<LbBuilder<P>, LabError> {
    let res = &ctx.sc.resilience;
    // The sim repeats exactly with a seeded sequence. Over HTTP nothing
    // repeats anyway (the wall clock decides), and a seeded sequence is
    // one counter both worker threads write on every pick: there the
    // balancer draws from thread-local generators, as in production.
    if ctx.sim {
        b = b.seed(sub_seed(ctx.seed, 2000 + u64::from(c)));
    }
    if let Some(spec) = &res.breaker {
        b = b.circuit_breaker(
            spec.config(sub_seed(ctx.seed, 4000 + u64::from(c)))
                .map_err(|e| bad(ctx, e))?,
        );
    }
    if let Some(o) = outlier {
        b = b.outlier_detection(o.clone());
    }
    if let Some(p) = res.panic_threshold {
        b = b.panic_threshold(p);
    }
    if let (true, Some(a)) = (ctx.limited, &res.adaptive_concurrency) {
        b = b.adaptive_concurrency(a.config().map_err(|e| bad(ctx, e))?);
    }
    if let (true, Some(s)) = (ctx.slow_start, &res.slow_start) {
        b = b.slow_start(s.config().map_err(|e| bad(ctx, e))?);
    }
    Ok(b)
}

/// `b` exporting client `c`'s metrics (named after `label`, with its retry
/// layer's and the backends' `names`) when the run has an exporter.
fn metrics<P>(
    ctx: &Ctx<'_>,
    b: LbBuilder<P>,
    label: &str,
    c: u32,
    retries: Option<&[RetryLayer]>,
    names: &Arc<[String]>,
) -> LbBuilder<P> {
    let Some(exporter) = ctx.exporter else {
        return b;
    };
    let lb_name = if ctx.sc.load.clients == 1 {
        label.to_string()
    } else {
        format!("lab-{label}-{c}")
    };
    let mut m = Metrics::new(&exporter.meter(), lb_name);
    if let Some(layers) = retries {
        m = m.retries(&layers[c as usize]);
    }
    let names = names.clone();
    b.metrics_with(m, move |&i: &usize| {
        names.get(i).cloned().unwrap_or_else(|| i.to_string())
    })
}

/// Client `c`'s endpoint for backend `i` over `t`, and the weight its
/// picker sees.
pub fn endpoint(
    ctx: &Ctx<'_>,
    weighted: bool,
    t: &Target,
    rec: &Arc<Recorder>,
    c: u32,
    i: usize,
) -> (Endpoint, f64) {
    let sc = ctx.sc;
    let ep = Endpoint::new(Parts {
        idx: i,
        target: t.clone(),
        overhead: sc.load.overhead.0 + sc.rtt(c, i),
        rec: rec.clone(),
    });
    let w = if weighted { sc.backends[i].weight } else { 1.0 };
    (ep, w)
}

/// What `lbs` know now, for `n` backends.
pub fn end_stats<P: tower_lb::pick::Picker>(lbs: &[Lb<P>], n: usize) -> EndStats {
    let picks = lbs
        .iter()
        .map(|lb| {
            let mut row = vec![0; n];
            for (i, st) in lb.handle().endpoints() {
                if let Some(x) = row.get_mut(i) {
                    *x = st.picks();
                }
            }
            row
        })
        .collect();
    let mut s = EndStats {
        picks,
        in_flight: vec![0; n],
        ejections: vec![0; n],
        opens: vec![0; n],
    };
    for lb in lbs {
        for (i, st) in lb.handle().endpoints() {
            if let Some(x) = s.in_flight.get_mut(i) {
                *x += st.in_flight();
            }
            if let Some(x) = s.ejections.get_mut(i) {
                *x += EjectionReason::ALL
                    .iter()
                    .map(|&r| st.outlier().ejections(r))
                    .sum::<u64>();
            }
            if let (Some(x), Some(b)) = (s.opens.get_mut(i), st.breaker()) {
                *x += b.transitions_to(BreakerState::Open);
            }
        }
    }
    s
}

/// A retry layer classifying with the balancer's classifier (the default).
fn retry_layer(spec: &RetrySpec) -> Result<RetryLayer, tower_lb::ConfigError> {
    let mut b = RetryLayer::builder().max_attempts(spec.max_attempts);
    if spec.non_idempotent {
        b = b.retry_non_idempotent();
    }
    if let Some(t) = spec.per_try_timeout {
        b = b.per_try_timeout(t.0);
    }
    b.build()
}

/// The table's name of a picker's row: picker, its settings, tracking
/// mode, limits, slow start.
pub fn label(ctx: &Ctx<'_>, picker: &str) -> String {
    let tuned = ctx.tuning.as_ref().map(|t| t.label()).unwrap_or_default();
    let mut l = ctx.track.label(&format!("{picker}{tuned}"));
    if ctx.limited {
        l.push_str("+limits");
    }
    if ctx.slow_start {
        l.push_str("+slow_start");
    }
    l
}
