//! Per-request overhead of `tower_lb::Balance` against
//! `tower::balance::p2c::Balance` over `tower::load::PeakEwma`, on the same
//! no-op inner service, measured in one run.
//!
//! Run with `cargo bench --bench balance`. Groups:
//! * `per_request/{8,1024}`: tower-lb (default picker) vs tower's p2c.
//! * `picker/{name}/{8,64,1024}`: every picker's per-request cost.
//! * `threads`: one shared `Balance` (default picker over 8 and 1024
//!   endpoints, round robin over 8, the default with per-thread load)
//!   driven by one, two and four threads,
//!   the retry layer over the default, two of the retry layer's parts
//!   alone (a deposit into one shared budget, a clone and drop of one
//!   shared `Balance`), and as the ceiling, one balancer per thread
//!   (nothing shared) (time per request per thread; the ratio gives the
//!   scaling).
//! * `stack`: each resilience layer and the whole stack against `Balance`
//!   alone.
//! * `metrics/{off,on,bound}`: `Balance` (default picker, 8 endpoints)
//!   without and with metrics on a real SDK meter provider (manual reader):
//!   `on` records through OpenTelemetry's stable `Histogram::record`,
//!   `bound` (with `--features metrics-bound`) through bound histograms.
//! * `route/{off,zone_aware,subset,zone_aware+subset}`: the default picker
//!   over 60 endpoints in three zones, without and with the route step,
//!   beside tower's p2c over the same 60.

mod common;

use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use tower::Layer;
use tower::Service;
use tower_lb::breaker::{CircuitBreakerConfig, CircuitBreakerLayer};
use tower_lb::endpoint::{EndpointMeta, Locality};
use tower_lb::route::{Callers, Routing, Subset, ZoneAware};
use tower_lb::{Balance, pick};

use common::{Noop, guarded, one, tower_lb, tower_p2c};

fn per_request(c: &mut Criterion) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut g = c.benchmark_group("per_request");
    for n in [8usize, 1024] {
        let mut ours = tower_lb(pick::PeakEwma::default(), n);
        g.bench_function(BenchmarkId::new("tower_lb_peak_ewma", n), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut ours, &mut cx, i)
            })
        });
        let mut classic = tower_lb(pick::PeakEwma::classic(), n);
        g.bench_function(BenchmarkId::new("tower_lb_p2c_peak_ewma", n), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut classic, &mut cx, i)
            })
        });
        let mut theirs = tower_p2c(n);
        g.bench_function(BenchmarkId::new("tower_p2c_peak_ewma", n), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut theirs, &mut cx, i)
            })
        });
    }
    g.finish();
}

/// One group per picker, at three pool sizes.
fn bench_picker<P: pick::Pick<u64>>(c: &mut Criterion, make: impl Fn() -> P) {
    let mut cx = Context::from_waker(Waker::noop());
    let name = make().name();
    let mut g = c.benchmark_group(format!("picker/{name}"));
    for n in [8usize, 64, 1024] {
        let mut lb = tower_lb(make(), n);
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut lb, &mut cx, i)
            })
        });
    }
    g.finish();
}

/// Every picker of the registry (chosen by name: one `match` more per pick
/// than the concrete type; `per_request` measures the default directly).
fn pickers(c: &mut Criterion) {
    for &name in pick::NAMES {
        bench_picker(c, || {
            pick::AnyPicker::by_name(name, pick::key_fn(|r: &u64| Some(*r)))
                .expect("a registry name")
        });
    }
}

/// Time for `iters` requests on each of `threads` threads sharing one
/// service (a balancer, or a stack over one), each thread on a clone.
fn shared_run<S>(svc: &S, threads: usize, iters: u64) -> Duration
where
    S: Service<u64> + Clone + Send,
    S::Error: std::fmt::Debug,
{
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let mut svc = svc.clone();
            s.spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                for i in 0..iters {
                    one(&mut svc, &mut cx, i);
                }
            });
        }
    });
    start.elapsed()
}

/// Time for `iters` runs of `f` on each of `threads` threads at once.
fn parts_run(threads: usize, iters: u64, f: &(impl Fn() + Sync)) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| (0..iters).for_each(|_| f()));
        }
    });
    start.elapsed()
}

/// Time for `iters` requests on each of `threads` threads, each with its
/// own balancer: nothing shared, the machine's own scaling.
fn separate_run(threads: usize, iters: u64) -> Duration {
    let lbs: Vec<_> = (0..threads)
        .map(|_| tower_lb(pick::PeakEwma::default(), 8))
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for mut lb in lbs {
            s.spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                for i in 0..iters {
                    one(&mut lb, &mut cx, i);
                }
            });
        }
    });
    start.elapsed()
}

fn threads(c: &mut Criterion) {
    let lb = tower_lb(pick::PeakEwma::default(), 8);
    let mut g = c.benchmark_group("threads");
    // Reported time is wall time per request *per thread*: equal times mean
    // two threads move twice the requests.
    // Four threads on two cores measure contention and oversubscription
    // together; on four cores or more, contention alone.
    // Round robin: one cursor every pick writes.
    let rr = tower_lb(pick::RoundRobin::new(), 8);
    // Per-thread load: each thread writes its own lane of each endpoint.
    let lanes = common::tower_lb_with(pick::PeakEwma::default(), 8, true);
    // 1024 endpoints: two threads rarely touch the same endpoint's lines.
    let wide = tower_lb(pick::PeakEwma::default(), 1024);
    // The retry layer's budget, shared by every thread, on top.
    let retried = common::retry_layer().layer(tower_lb(pick::PeakEwma::default(), 8));
    // Two parts of the retry layer's request path, alone: a deposit into
    // one shared budget, and a clone and drop of one shared `Balance` (what
    // the layer did on every request to keep a service for retries).
    let budget = tower_lb::retry::Budget::default();
    let deposit = || budget.deposit();
    let clone = || drop(std::hint::black_box(lb.clone()));
    for t in [1usize, 2, 4] {
        g.bench_function(BenchmarkId::new("shared_balance_8", t), |b| {
            b.iter_custom(|iters| shared_run(&lb, t, iters))
        });
        g.bench_function(BenchmarkId::new("shared_per_thread_load_8", t), |b| {
            b.iter_custom(|iters| shared_run(&lanes, t, iters))
        });
        g.bench_function(BenchmarkId::new("shared_round_robin_8", t), |b| {
            b.iter_custom(|iters| shared_run(&rr, t, iters))
        });
        g.bench_function(BenchmarkId::new("shared_balance_1024", t), |b| {
            b.iter_custom(|iters| shared_run(&wide, t, iters))
        });
        g.bench_function(BenchmarkId::new("shared_retry_balance_8", t), |b| {
            b.iter_custom(|iters| shared_run(&retried, t, iters))
        });
        g.bench_function(BenchmarkId::new("budget_deposit", t), |b| {
            b.iter_custom(|iters| parts_run(t, iters, &deposit))
        });
        g.bench_function(BenchmarkId::new("balance_clone", t), |b| {
            b.iter_custom(|iters| parts_run(t, iters, &clone))
        });
        g.bench_function(BenchmarkId::new("separate_balances_8", t), |b| {
            b.iter_custom(|iters| separate_run(t, iters))
        });
    }
    g.finish();
}

fn stack(c: &mut Criterion) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut g = c.benchmark_group("stack");
    let retry = common::retry_layer;
    let mut bare = tower_lb(pick::PeakEwma::default(), 8);
    g.bench_function("balance", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut bare, &mut cx, i)
        })
    });
    let mut with_retry = retry().layer(tower_lb(pick::PeakEwma::default(), 8));
    g.bench_function("retry+balance", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut with_retry, &mut cx, i)
        })
    });
    let mut with_breaker = CircuitBreakerLayer::new(CircuitBreakerConfig::default())
        .layer(tower_lb(pick::PeakEwma::default(), 8));
    g.bench_function("breaker_layer+balance", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut with_breaker, &mut cx, i)
        })
    });
    let mut health = guarded(None);
    g.bench_function("balance+endpoint_breakers+ejection", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut health, &mut cx, i)
        })
    });
    let mut whole = retry().layer(guarded(None));
    g.bench_function("retry+balance+endpoint_breakers+ejection", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut whole, &mut cx, i)
        })
    });
    // Everything: retry, per-endpoint breakers, ejection, metrics.
    let provider = common::meter_provider();
    let meter = opentelemetry::metrics::MeterProvider::meter(&provider, "bench");
    let mut full = retry().layer(guarded(Some(&meter)));
    g.bench_function("retry+balance+endpoint_breakers+ejection+metrics", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut full, &mut cx, i)
        })
    });
    g.finish();
}

/// Metrics off against on: the on cases record the duration histogram per
/// request (and time one pick in 64) on a real SDK meter provider.
fn metrics(c: &mut Criterion) {
    use opentelemetry::metrics::MeterProvider;

    let provider = common::meter_provider();
    let meter = provider.meter("bench");
    let mut cx = Context::from_waker(Waker::noop());
    let mut g = c.benchmark_group("metrics");
    let mut off = tower_lb(pick::PeakEwma::default(), 8);
    g.bench_function("off", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut off, &mut cx, i)
        })
    });
    let mut on = common::metered(&meter, false);
    g.bench_function("on", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut on, &mut cx, i)
        })
    });
    #[cfg(feature = "metrics-bound")]
    {
        let mut bound = common::metered(&meter, true);
        g.bench_function("bound", |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut bound, &mut cx, i)
            })
        });
    }
    g.finish();
}

/// 60 endpoints spread over zones a, b, c (20 each), under `routing`.
fn zoned(routing: Option<Routing>) -> Balance<usize, Noop> {
    let mut b = Balance::builder();
    if let Some(r) = routing {
        b = b.routing(r);
    }
    for i in 0..60 {
        let zone = ["a", "b", "c"][i % 3];
        let meta = EndpointMeta::new().with_locality(Locality::in_zone(zone));
        b = b.endpoint_with(i, Noop, 1.0, meta);
    }
    b.build().expect("valid config")
}

fn route(c: &mut Criterion) {
    let mut cx = Context::from_waker(Waker::noop());
    // Callers 50/30/20 against endpoints a third each: zone a is short, so
    // picks from a spill (the zone-aware split is computed, not skipped).
    let zone_aware = || ZoneAware::new("a", Callers::new([("a", 0.5), ("b", 0.3), ("c", 0.2)]));
    let subset = || Subset::new(3, 100, 20);
    let rows: [(&str, Option<Routing>); 4] = [
        ("off", None),
        ("zone_aware", Some(Routing::new().zone_aware(zone_aware()))),
        ("subset", Some(Routing::new().subset(subset()))),
        (
            "zone_aware+subset",
            Some(Routing::new().zone_aware(zone_aware()).subset(subset())),
        ),
    ];
    let mut g = c.benchmark_group("route");
    for (name, routing) in rows {
        let mut lb = zoned(routing);
        g.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                one(&mut lb, &mut cx, i)
            })
        });
    }
    let mut theirs = tower_p2c(60);
    g.bench_function("tower_p2c_peak_ewma", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut theirs, &mut cx, i)
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    per_request,
    pickers,
    threads,
    stack,
    metrics,
    route
);
criterion_main!(benches);
