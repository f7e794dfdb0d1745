//! Server-reported load cannot lock an endpoint out: no single report, and
//! no stream of absurd ones, keeps an endpoint from picks longer than
//! `utilization_fade × ln(MAX_UTILIZATION)` (1.39 s at the default fade,
//! `pick::DEFAULT_UTILIZATION_FADE`), and a utilization past the bound is
//! counted and treated as unreported (`PeakEwma::utilization(true)` in the
//! README's stack, `stack.rs`; paused clock).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceExt, service_fn};
use tower_lb::http::Classifier;
use tower_lb::orca::MAX_UTILIZATION;
use tower_lb::pick::{DEFAULT_UTILIZATION_FADE, PeakEwma};

use crate::stack;

/// The utilization fade: the default, which the runs leave alone.
const FADE: Duration = DEFAULT_UTILIZATION_FADE;

type Svc = BoxCloneSyncService<(), http::Response<()>, std::io::Error>;

/// What the reporting replica sends with its answers.
#[derive(Debug, Clone, Copy)]
enum Sends {
    /// One report, on its first answer after the warm-up.
    Once(f64),
    /// A report on every answer after the warm-up.
    Always(f64),
}

/// The reporting replica's switch and its calls.
#[derive(Default)]
struct Reporter {
    armed: AtomicBool,
    sent: AtomicBool,
    calls: AtomicU64,
    /// ns after the (single) report of the first call after it.
    next_call: AtomicU64,
    sent_at: std::sync::Mutex<Option<Instant>>,
}

/// A replica answering in 200 µs; replica 0 also reports as `sends` once
/// armed.
fn replica(reporter: Option<(Arc<Reporter>, Sends)>) -> Svc {
    BoxCloneSyncService::new(service_fn(move |()| {
        let mut header = None;
        if let Some((r, sends)) = &reporter {
            r.calls.fetch_add(1, Ordering::Relaxed);
            if let Some(at) = *r.sent_at.lock().unwrap() {
                let ns = at.elapsed().as_nanos() as u64;
                r.next_call.fetch_min(ns.max(1), Ordering::Relaxed);
            }
            if r.armed.load(Ordering::Relaxed) {
                header = match *sends {
                    Sends::Once(u) if !r.sent.swap(true, Ordering::Relaxed) => Some(u),
                    Sends::Always(u) => Some(u),
                    Sends::Once(_) => None,
                };
            }
        }
        let sent_at = reporter.as_ref().map(|(r, _)| r.clone());
        async move {
            tokio::time::sleep(Duration::from_micros(200)).await;
            let mut res = http::Response::new(());
            if let Some(u) = header {
                let value = format!("TEXT cpu_utilization={u:e}");
                res.headers_mut().insert(
                    tower_lb::orca::HEADER,
                    http::HeaderValue::from_str(&value).expect("an ASCII header"),
                );
                if let Some(r) = sent_at {
                    // The report takes effect as the answer arrives.
                    let mut at = r.sent_at.lock().unwrap();
                    if at.is_none() {
                        *at = Some(Instant::now());
                        r.next_call.store(u64::MAX, Ordering::Relaxed);
                    }
                }
            }
            Ok(res)
        }
    }))
}

/// What a run measured.
#[derive(Debug)]
struct Lockout {
    /// From the report to the reporter's next call.
    out_for: Option<Duration>,
    /// The reporter's share of calls after the warm-up.
    share: f64,
    /// Values its model did not trust.
    rejected: u64,
}

/// Two replicas of 200 µs, 8 callers with 10 ms pauses, `PeakEwma` with
/// the utilization term at its default fade, in the README's stack
/// (`stack.rs`); replica 0 reports as `sends` after 1 s; the run lasts
/// `span` after that.
async fn run(sends: Sends, span: Duration) -> Lockout {
    let reporter = Arc::new(Reporter::default());
    reporter.next_call.store(u64::MAX, Ordering::Relaxed);
    let lb = stack::balance()
        .picker(PeakEwma::default().utilization(true))
        .classify(Classifier::new())
        .seed(3)
        .endpoint(0, replica(Some((reporter.clone(), sends))))
        .endpoint(1, replica(None))
        .build()
        .expect("a valid balancer");
    let retry = stack::retry_clone();
    let calls = Arc::new(AtomicU64::new(0));
    let mut callers = JoinSet::new();
    for _ in 0..8 {
        let (mut svc, calls) = (retry.layer(lb.clone()), calls.clone());
        callers.spawn(async move {
            loop {
                if svc.ready().await.expect("ready").call(()).await.is_ok() {
                    calls.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (total0, mine0) = (
        calls.load(Ordering::Relaxed),
        reporter.calls.load(Ordering::Relaxed),
    );
    reporter.armed.store(true, Ordering::Relaxed);
    tokio::time::sleep(span).await;
    callers.abort_all();
    while callers.join_next().await.is_some() {}
    let total = calls.load(Ordering::Relaxed) - total0;
    let mine = reporter.calls.load(Ordering::Relaxed) - mine0;
    let next = reporter.next_call.load(Ordering::Relaxed);
    let (_, state) = lb.handle().endpoints().remove(0);
    Lockout {
        out_for: (next != u64::MAX).then(|| Duration::from_nanos(next)),
        share: mine as f64 / total.max(1) as f64,
        rejected: state.load_values_rejected(),
    }
}

/// The longest a report of the largest trusted utilization keeps its
/// endpoint out, against an idle peer of the same speed:
/// `fade × ln(MAX_UTILIZATION)`.
fn bound() -> Duration {
    FADE.mul_f64(MAX_UTILIZATION.ln())
}

/// Promise: one report, whatever its value, keeps its endpoint from picks
/// at most `fade × ln(MAX_UTILIZATION)`; the values (1e308, 1e6,
/// 10) and a percentage sent as a fraction (50) not at all.
#[tokio::test(start_paused = true)]
async fn one_report_keeps_an_endpoint_out_at_most_the_bound() {
    let mut report = String::new();
    for u in [1e308, 1e6, 50.0, 10.0, MAX_UTILIZATION, 2.0] {
        let r = run(Sends::Once(u), Duration::from_secs(5)).await;
        report.push_str(&format!("\nu = {u:e}: {r:?}"));
        let out = r.out_for.unwrap_or(Duration::MAX);
        assert!(out <= bound(), "{report}");
        if u > MAX_UTILIZATION {
            assert!(out <= Duration::from_millis(50), "{report}");
            assert_eq!(r.rejected, 1, "{report}");
        }
    }
    eprintln!("{report}");
}

/// Promise: a replica that keeps sending a utilization past the bound is
/// treated as unreported (its share within 0.05 of a replica whose
/// reports carry no utilization at all) and every such value is counted.
#[tokio::test(start_paused = true)]
async fn a_stream_of_absurd_reports_is_treated_as_unreported_and_counted() {
    let span = Duration::from_secs(5);
    // Unreported: `NaN` is no number, left out at the parse.
    let unreported = run(Sends::Always(f64::NAN), span).await;
    for u in [1e308, 1e6, 50.0] {
        let r = run(Sends::Always(u), span).await;
        let why = format!("u = {u:e}: {r:?}, unreported: {unreported:?}");
        assert!((r.share - unreported.share).abs() <= 0.05, "{why}");
        // One value per answer: about a third of 8 callers × 100/s × 5 s.
        assert!(r.rejected > 500, "{why}");
    }
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Promise, for every value: one report keeps its endpoint out at most
    /// `fade × ln(MAX_UTILIZATION)`.
    #[test]
    fn no_report_keeps_an_endpoint_out_past_the_bound(exp in -3.0f64..308.0, mantissa in 1.0f64..10.0) {
        let u = mantissa * 10f64.powf(exp);
        let r = paused().block_on(run(Sends::Once(u), Duration::from_secs(3)));
        prop_assert!(r.out_for.is_some_and(|d| d <= bound()), "u = {u:e}: {r:?}");
    }
}
