//! What this machine charges for the work no balancer can skip, measured
//! in the same way as `benches/balance.rs`, so that its figures can be read
//! against a floor rather than against a hope.
//!
//! Run with `cargo bench --bench floor`. Criterion groups:
//! * `bare/{tower_p2c_peak_ewma,bare_p2c_peak_ewma}/8`: tower's balancer,
//!   and beside it the least a lock-free two-choice peak-EWMA balancer does
//!   per request (two random candidates, their in-flight counts and decayed
//!   estimates, one slot taken and given back, the clock read at the call
//!   and at its end, the estimate updated by compare-exchange). No
//!   `Service` future, no health, no breaker, no metrics: a floor for the
//!   algorithm, not a balancer anyone should ship. Its ratio to tower is
//!   the best a per-request ratio can be on this machine.
//! * `bare_shared/{1,2}`: the bare balancer shared by one and two threads.
//! * `floor/clock`: one read of tokio's clock. A latency sample takes two;
//!   tower's p2c over `PeakEwma` takes four per request (one per candidate's
//!   load, one at the call, one at the end).
//! * `floor/counter`: one read of the clock the crate's request path reads
//!   (`src/time.rs`, `Clock`): the CPU's counter through `quanta`, scaled to
//!   nanoseconds.
//! * `floor/rmw`: one atomic add on a line no other thread touches.
//! * `floor/line_transfer`: one cache line handed from one core to the
//!   other (half a ping-pong round trip). A pick that reads or writes a
//!   line the other core wrote last pays this.
//! * `shared_in_flight/{1,2}`: one balancer per thread (nothing shared,
//!   as `threads/separate_balances_8`), plus only what a shared balancer
//!   that counts requests in flight cannot avoid: read three candidates'
//!   counters and add and take back one on the lowest, the counters being
//!   eight that the threads share. Time per request per thread; the ratio
//!   of the two rows bounds the scaling of any shared in-flight-aware
//!   balancer on this machine.
//!
//! Then, printed after the groups (each sample evicts the caches first, so
//! criterion's sampling does not fit): one request through `Balance` with
//! its data warm, after this core's own caches are evicted, and after the
//! last-level cache is evicted too. The lab's HTTP `select` and `rest of
//! call` columns run between those.

mod common;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use tower_lb::pick;

use common::{Noop, bare, one, tower_lb, tower_p2c};

/// The least a two-choice peak-EWMA balancer does; see `common/bare.rs`.
type Floor = bare::Bare<2, false>;

fn bare(c: &mut Criterion) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut g = c.benchmark_group("bare");
    let mut theirs = tower_p2c(8);
    g.bench_function(BenchmarkId::new("tower_p2c_peak_ewma", 8), |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            one(&mut theirs, &mut cx, i)
        })
    });
    let floor = Floor::new(8);
    let mut rng = fastrand::Rng::new();
    g.bench_function(BenchmarkId::new("bare_p2c_peak_ewma", 8), |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            floor.request(&mut rng, &mut Noop, &mut cx, i)
        })
    });
    g.finish();
    let mut g = c.benchmark_group("bare_shared");
    for t in [1usize, 2] {
        g.bench_function(BenchmarkId::from_parameter(t), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for _ in 0..t {
                        s.spawn(|| {
                            let mut cx = Context::from_waker(Waker::noop());
                            let mut rng = fastrand::Rng::new();
                            for i in 0..iters {
                                floor.request(&mut rng, &mut Noop, &mut cx, i);
                            }
                        });
                    }
                });
                start.elapsed()
            })
        });
    }
    g.finish();
}

/// A counter alone on its cache lines (128 bytes: adjacent-line prefetch
/// pairs lines on x86).
#[repr(align(128))]
#[derive(Default)]
struct Line(AtomicUsize);

fn primitives(c: &mut Criterion) {
    let mut g = c.benchmark_group("floor");
    g.bench_function("clock", |b| b.iter(tokio::time::Instant::now));
    let counter = quanta::Clock::new();
    let origin = counter.raw();
    g.bench_function("counter", |b| {
        b.iter(|| counter.delta_as_nanos(origin, counter.raw()))
    });
    let private = Line::default();
    g.bench_function("rmw", |b| {
        b.iter(|| private.0.fetch_add(1, Ordering::Relaxed))
    });
    g.bench_function("line_transfer", |b| b.iter_custom(ping_pong));
    g.finish();
}

/// `iters` one-way hand-offs of one line between two threads.
fn ping_pong(iters: u64) -> Duration {
    let turn = AtomicU64::new(0);
    let rounds = iters.div_ceil(2);
    let start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            for r in 0..rounds {
                while turn.load(Ordering::Acquire) != 2 * r + 1 {
                    std::hint::spin_loop();
                }
                turn.store(2 * r + 2, Ordering::Release);
            }
        });
        for r in 0..rounds {
            turn.store(2 * r + 1, Ordering::Release);
            while turn.load(Ordering::Acquire) != 2 * r + 2 {
                std::hint::spin_loop();
            }
        }
    });
    start.elapsed() / 2
}

/// `iters` requests on each of `threads` threads, each through its own
/// balancer, each also taking a slot on the least loaded of three of eight
/// shared counters for the length of the request.
fn shared_in_flight_run(threads: usize, iters: u64) -> Duration {
    let counters: Vec<Line> = (0..8).map(|_| Line::default()).collect();
    let lbs: Vec<_> = (0..threads)
        .map(|_| tower_lb(pick::PeakEwma::default(), 8))
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for mut lb in lbs {
            let counters = &counters;
            s.spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                let mut rng = fastrand::Rng::new();
                for i in 0..iters {
                    let least = (0..3)
                        .map(|_| &counters[rng.usize(..8)].0)
                        .min_by_key(|c| c.load(Ordering::Relaxed))
                        .expect("three candidates");
                    least.fetch_add(1, Ordering::Relaxed);
                    one(&mut lb, &mut cx, i);
                    least.fetch_sub(1, Ordering::Release);
                }
            });
        }
    });
    start.elapsed()
}

fn shared_in_flight(c: &mut Criterion) {
    let mut g = c.benchmark_group("shared_in_flight");
    for t in [1usize, 2] {
        g.bench_function(BenchmarkId::from_parameter(t), |b| {
            b.iter_custom(|iters| shared_in_flight_run(t, iters))
        });
    }
    g.finish();
}

/// Bytes walked to evict this core's L1 and L2, and to evict the whole
/// cache hierarchy (larger than any last-level cache of a 2-core VM).
const CORE_CACHES: usize = 4 << 20;
const ALL_CACHES: usize = 128 << 20;

/// Median and mean time of one request through the default `Balance`
/// over 8 endpoints, `samples` times, each after walking `evict` bytes.
fn cold_request(evict: usize, samples: usize) -> (Duration, Duration) {
    let mut lb = tower_lb(pick::PeakEwma::default(), 8);
    let mut cx = Context::from_waker(Waker::noop());
    let mut junk = vec![0u64; evict / 8];
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples as u64 {
        // Writes, so the lines leave the caches dirty-evicted as a
        // server's own work would leave them.
        for (j, w) in junk.iter_mut().enumerate().step_by(8) {
            *w = w.wrapping_add(j as u64 ^ i);
        }
        black_box(&junk);
        let start = Instant::now();
        one(&mut lb, &mut cx, i);
        times.push(start.elapsed());
    }
    let mean = times.iter().sum::<Duration>() / samples as u32;
    times.sort_unstable();
    (times[samples / 2], mean)
}

fn cold() {
    println!("\ncold/request (the default Balance over 8 endpoints, one request):");
    for (name, evict, samples) in [
        ("warm", 0, 100_000),
        ("core caches evicted", CORE_CACHES, 2_000),
        ("all caches evicted", ALL_CACHES, 200),
    ] {
        let (median, mean) = cold_request(evict, samples);
        println!(
            "  {name:<20} median {:>6} ns, mean {:>6} ns ({samples} samples)",
            median.as_nanos(),
            mean.as_nanos()
        );
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    primitives(&mut c);
    bare(&mut c);
    shared_in_flight(&mut c);
    c.final_summary();
    // `--list`, `--test` and name filters are criterion's: the table runs
    // on a run with no filter, or with the filter `cold`.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let listing = args.iter().any(|a| a == "--list" || a == "--test");
    let mut filters = args
        .iter()
        .filter(|a| !a.starts_with('-') && a.parse::<f64>().is_err());
    let wanted = filters.clone().next().is_none() || filters.any(|a| a == "cold");
    if !listing && wanted {
        cold();
    }
}
