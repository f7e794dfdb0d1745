//! The per-request and stack ratios of `benches/balance.rs`, measured so
//! that a noisy neighbour cannot decide them: every configuration runs in
//! turn, in batches of 20,000 requests, 40 rounds, and each row reports the
//! fastest batch (what the code costs when nothing interferes) and the
//! median batch. On a shared VM criterion's estimate of one group can move
//! by 20% between runs while a neighbour comes and goes; interleaving puts
//! every row under the same neighbour, and the minimum ignores it.
//!
//! Run with `cargo bench --bench interleaved` (`ROUNDS=n` to change the
//! number of rounds, `ROWS=default,bare_service` to run only those rows,
//! for a profile or a shorter comparison). Rows:
//! * `default`, `classic`: `Balance` with `PeakEwma::default()` and
//!   `PeakEwma::classic()`, 8 endpoints;
//! * `tower_p2c`: tower's p2c over `PeakEwma`, 8 endpoints;
//! * `default_1024`, `classic_1024`, `tower_p2c_1024`: the same three over
//!   1,024 endpoints (`benches/balance.rs`'s `per_request/1024`);
//! * `retry`: the retry layer over the default `Balance`;
//! * `tower_retry`: `tower::retry::Retry` with a policy that keeps a copy
//!   of the request and never retries, over the same `Balance`: the least a
//!   retry layer does per request (clone the service and the request, wrap
//!   the future);
//! * `whole`: retry, per-endpoint breakers, ejection and metrics over the
//!   default `Balance` (as `stack/retry+balance+endpoint_breakers+ejection+metrics`);
//! * the floor's rungs (`common/bare.rs`), each adding one piece of the
//!   default's work to the one above: `bare_p2c` (two candidates, two clock
//!   reads, one slot, the estimate by compare-exchange), `bare_three`
//!   (three candidates), `bare_cost` (the default's cost and records),
//!   `bare_owned` (the slot an owned guard holding its endpoint),
//!   `bare_service` (behind `Service::call`, the guard in the future). The
//!   last rung's ratio to tower is the least the default's work can cost
//!   here; its distance to `default` is what the crate's machinery costs
//!   (health, scopes, hooks, the classifier);
//! * `random`: `Balance` with `pick::Random`, whose pick is one random
//!   number: the crate's machinery with next to no picker;
//! * `least_in_flight`, `least_in_flight_1024`: `Balance` with
//!   `pick::P2cLeastInFlight` (two candidates, their in-flight counts and
//!   weights, no latency model) over 8 and 1,024 endpoints: the
//!   machinery and a draw with the least a comparing picker reads. Their
//!   ratios to tower's p2c bound what the default's latency model may cost
//!   for the default to stay under a ratio (docs/performance.md, "The
//!   ceiling on the Xeon VM");
//! * `shared_2t`, `separate_2t`: two threads at once, on clones of one
//!   default `Balance` and on a balancer each (ns per request per thread),
//!   with their rate over `default`'s. Read the median here: the fastest
//!   batch of `shared_2t` is a moment the VM put both threads on one
//!   physical core's caches, where a shared line costs next to nothing;
//! * `metrics`, `metrics_bound`: the default `Balance` with metrics on a
//!   real SDK meter provider, recorded through OpenTelemetry's stable
//!   `Histogram::record` and (with `--features metrics-bound`) through
//!   bound histograms; their ratios to `default` are the cost of metrics;
//!   `whole_bound` is `whole` with bound histograms;
//! * `lanes`, `lanes_2t`: the default `Balance` with per-thread load
//!   (`Builder::per_thread_load`), on one thread and on two at once, with
//!   their rate over `lanes`' own.
//! * `retry_lanes`, `retry_lanes_2t`: the retry layer over `lanes`' kind of
//!   balancer, on one thread and on two sharing one layer's service: with
//!   the balancer's lines per thread, what is left shared is the layer's.

mod common;

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Waker};
use std::time::Instant;

use tower::{Layer, Service};
use tower_lb::pick;

use common::bare::{AsService, Bare, Owned};
use common::{Noop, guarded, meter_provider, one, retry_layer, tower_lb, tower_lb_with, tower_p2c};

/// Nanoseconds per request over one batch of `n`.
fn batch<S: Service<u64>>(svc: &mut S, cx: &mut Context<'_>, n: u64) -> f64
where
    S::Error: std::fmt::Debug,
{
    let start = Instant::now();
    for i in 0..n {
        one(svc, cx, i);
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// Nanoseconds per request over one batch of `n` through a bare rung.
fn bare_batch(request: impl Fn(&mut fastrand::Rng, &mut Context<'_>, u64), n: u64) -> f64 {
    let mut rng = fastrand::Rng::new();
    let mut cx = Context::from_waker(Waker::noop());
    let start = Instant::now();
    for i in 0..n {
        request(&mut rng, &mut cx, i);
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// Nanoseconds per request per thread, two threads each running a batch
/// of `n` through its own service at once (clones of one balancer, or two
/// balancers). Each thread times itself from a shared start to its own
/// end, so the threads' start-up is not counted; the figure is the mean of
/// the two.
fn pair<S>(a: &mut S, b: &mut S, n: u64) -> f64
where
    S: Service<u64> + Send,
    S::Error: std::fmt::Debug,
{
    let go = std::sync::Barrier::new(2);
    let go = &go;
    let times: Vec<f64> = std::thread::scope(|s| {
        let threads: Vec<_> = [a, b]
            .into_iter()
            .map(|svc| {
                s.spawn(move || {
                    let mut cx = Context::from_waker(Waker::noop());
                    go.wait();
                    batch(svc, &mut cx, n)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a bench thread"))
            .collect()
    });
    times.iter().sum::<f64>() / times.len() as f64
}

/// Keeps a copy of every request and never retries.
#[derive(Clone)]
struct Never;

impl tower::retry::Policy<u64, u64, tower_lb::Error<Infallible>> for Never {
    type Future = Ready<()>;
    fn retry(
        &mut self,
        _: &mut u64,
        _: &mut Result<u64, tower_lb::Error<Infallible>>,
    ) -> Option<Self::Future> {
        None
    }
    fn clone_request(&mut self, req: &u64) -> Option<u64> {
        Some(*req)
    }
}

/// One row: a name and a closure running one batch.
type Row<'a> = (&'static str, Box<dyn FnMut(&mut Context<'_>) -> f64 + 'a>);

fn main() {
    const N: u64 = 20_000;
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then one round checks that every row runs.
    let benching = std::env::args().any(|a| a == "--bench");
    let rounds: usize = match std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()) {
        Some(r) if r > 0 => r,
        _ if benching => 40,
        _ => 1,
    };
    let provider = meter_provider();
    let meter = opentelemetry::metrics::MeterProvider::meter(&provider, "bench");
    let mut default = tower_lb(pick::PeakEwma::default(), 8);
    let mut classic = tower_lb(pick::PeakEwma::classic(), 8);
    let mut tower = tower_p2c(8);
    let mut default_1024 = tower_lb(pick::PeakEwma::default(), 1024);
    let mut classic_1024 = tower_lb(pick::PeakEwma::classic(), 1024);
    let mut tower_1024 = tower_p2c(1024);
    let mut retry = retry_layer().layer(tower_lb(pick::PeakEwma::default(), 8));
    let mut tower_retry = tower::retry::Retry::new(Never, tower_lb(pick::PeakEwma::default(), 8));
    let mut whole = retry_layer().layer(guarded(Some(&meter)));
    let (p2c, three) = (Bare::<2, false>::new(8), Bare::<3, false>::new(8));
    let (cost, owned) = (Bare::<3, true>::new(8), Owned(Bare::<3, true>::new(8)));
    let mut service = AsService::<3, true>::new(8);
    let mut random = tower_lb(pick::Random, 8);
    let mut least = tower_lb(pick::P2cLeastInFlight, 8);
    let mut least_1024 = tower_lb(pick::P2cLeastInFlight, 1024);
    // Its own balancer, so that the `default` row's endpoints never carry
    // what two threads left in them.
    let one_of_two = tower_lb(pick::PeakEwma::default(), 8);
    let mut shared = (one_of_two.clone(), one_of_two);
    let mut separate = (
        tower_lb(pick::PeakEwma::default(), 8),
        tower_lb(pick::PeakEwma::default(), 8),
    );
    let mut lanes = tower_lb_with(pick::PeakEwma::default(), 8, true);
    let one_of_two = tower_lb_with(pick::PeakEwma::default(), 8, true);
    let mut lanes_2t = (one_of_two.clone(), one_of_two);
    let one_of_two = retry_layer().layer(tower_lb_with(pick::PeakEwma::default(), 8, true));
    let mut retry_lanes_2t = (one_of_two.clone(), one_of_two);
    let mut retry_lanes = retry_layer().layer(tower_lb_with(pick::PeakEwma::default(), 8, true));
    let mut metered = common::metered(&meter, false);
    let mut rows: Vec<Row<'_>> = vec![
        ("default", Box::new(|cx| batch(&mut default, cx, N))),
        ("metrics", Box::new(|cx| batch(&mut metered, cx, N))),
        ("classic", Box::new(|cx| batch(&mut classic, cx, N))),
        ("tower_p2c", Box::new(|cx| batch(&mut tower, cx, N))),
        (
            "default_1024",
            Box::new(|cx| batch(&mut default_1024, cx, N)),
        ),
        (
            "classic_1024",
            Box::new(|cx| batch(&mut classic_1024, cx, N)),
        ),
        (
            "tower_p2c_1024",
            Box::new(|cx| batch(&mut tower_1024, cx, N)),
        ),
        ("retry", Box::new(|cx| batch(&mut retry, cx, N))),
        ("tower_retry", Box::new(|cx| batch(&mut tower_retry, cx, N))),
        ("whole", Box::new(|cx| batch(&mut whole, cx, N))),
        (
            "bare_p2c",
            Box::new(|_| bare_batch(|r, cx, i| p2c.request(r, &mut Noop, cx, i), N)),
        ),
        (
            "bare_three",
            Box::new(|_| bare_batch(|r, cx, i| three.request(r, &mut Noop, cx, i), N)),
        ),
        (
            "bare_cost",
            Box::new(|_| bare_batch(|r, cx, i| cost.request(r, &mut Noop, cx, i), N)),
        ),
        (
            "bare_owned",
            Box::new(|_| bare_batch(|r, cx, i| owned.request(r, &mut Noop, cx, i), N)),
        ),
        ("bare_service", Box::new(|cx| batch(&mut service, cx, N))),
        ("random", Box::new(|cx| batch(&mut random, cx, N))),
        ("least_in_flight", Box::new(|cx| batch(&mut least, cx, N))),
        (
            "least_in_flight_1024",
            Box::new(|cx| batch(&mut least_1024, cx, N)),
        ),
        (
            "shared_2t",
            Box::new(|_| pair(&mut shared.0, &mut shared.1, N)),
        ),
        (
            "separate_2t",
            Box::new(|_| pair(&mut separate.0, &mut separate.1, N)),
        ),
        ("lanes", Box::new(|cx| batch(&mut lanes, cx, N))),
        (
            "lanes_2t",
            Box::new(|_| pair(&mut lanes_2t.0, &mut lanes_2t.1, N)),
        ),
        ("retry_lanes", Box::new(|cx| batch(&mut retry_lanes, cx, N))),
        (
            "retry_lanes_2t",
            Box::new(|_| pair(&mut retry_lanes_2t.0, &mut retry_lanes_2t.1, N)),
        ),
    ];
    #[cfg(feature = "metrics-bound")]
    {
        let mut bound = common::metered(&meter, true);
        rows.insert(
            2,
            (
                "metrics_bound",
                Box::new(move |cx| batch(&mut bound, cx, N)),
            ),
        );
        let metrics = tower_lb::metrics::Metrics::new(&meter, "stack").bound(true);
        let mut whole = retry_layer().layer(common::guarded_with(Some(metrics)));
        rows.push(("whole_bound", Box::new(move |cx| batch(&mut whole, cx, N))));
    }
    // `ROWS=a,b` runs only those rows (to profile one, or to compare a
    // few); the ratios printed are those between rows that ran.
    if let Ok(only) = std::env::var("ROWS") {
        rows.retain(|(name, _)| only.split(',').any(|o| o == *name));
    }
    let mut cx = Context::from_waker(Waker::noop());
    let mut times = vec![Vec::with_capacity(rounds); rows.len()];
    for _ in 0..rounds {
        for (row, t) in rows.iter_mut().zip(&mut times) {
            t.push((row.1)(&mut cx));
        }
    }
    let mut min = Vec::new();
    let mut median = Vec::new();
    for t in &mut times {
        t.sort_by(f64::total_cmp);
        min.push(t[0]);
        median.push(t[t.len() / 2]);
    }
    println!(
        "{rounds} rounds of {N} requests per row; ns per request, fastest batch / median batch"
    );
    for (i, (name, _)) in rows.iter().enumerate() {
        println!("  {name:<13} {:>7.1} / {:>7.1}", min[i], median[i]);
    }
    let at = |name: &str| rows.iter().position(|r| r.0 == name);
    // The ratios of the rows that ran (`ROWS` may leave some out).
    let ratio = |a: &str, b: &str| {
        let (a, b) = (at(a)?, at(b)?);
        Some((min[a] / min[b], median[a] / median[b]))
    };
    for (a, b) in [
        ("default", "tower_p2c"),
        ("classic", "tower_p2c"),
        ("default_1024", "tower_p2c_1024"),
        ("classic_1024", "tower_p2c_1024"),
        ("retry", "default"),
        ("tower_retry", "default"),
        ("whole", "default"),
        ("bare_p2c", "tower_p2c"),
        ("bare_three", "tower_p2c"),
        ("bare_cost", "tower_p2c"),
        ("bare_owned", "tower_p2c"),
        ("bare_service", "tower_p2c"),
        ("default", "bare_service"),
        ("random", "bare_service"),
        ("least_in_flight", "tower_p2c"),
        ("least_in_flight_1024", "tower_p2c_1024"),
        ("lanes", "tower_p2c"),
        ("lanes", "default"),
        ("metrics", "default"),
        ("metrics_bound", "default"),
        ("whole_bound", "default"),
    ] {
        let label = format!("{a} / {b}");
        if let Some((a, b)) = ratio(a, b) {
            println!("  {label:<25} {a:.2} / {b:.2}");
        }
    }
    // Two threads' rate over one thread's: 2 × the one-thread time over
    // the per-thread time with two.
    for (one, two) in [
        ("default", "shared_2t"),
        ("default", "separate_2t"),
        ("lanes", "lanes_2t"),
        ("retry_lanes", "retry_lanes_2t"),
    ] {
        let label = format!("2 x {one} / {two}");
        if let Some((a, b)) = ratio(one, two) {
            println!("  {label:<25} {:.2} / {:.2}", 2.0 * a, 2.0 * b);
        }
    }
}
