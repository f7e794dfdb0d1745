//! The circuit breaker: every transition, window arithmetic, backoff, exact
//! half-open admission under concurrency, and the standalone layer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{Instant, advance};
use tower::{Service, ServiceExt, service_fn};
use tower_lb::breaker::{
    CircuitBreaker, CircuitBreakerConfig, CircuitBreakerLayer, Jitter, Reason, State, Transition,
    config,
};
use tower_lb::classify::{FailureKind, Outcome};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);
const FAIL: Outcome = Outcome::Failure(FailureKind::Error);
const SLOW_FAIL: Outcome = Outcome::Failure(FailureKind::Slow);
const OK: Outcome = Outcome::Success;

/// Count window 10, minimum 5, 50 % failure rate, no jitter: waits 1, 2, 4,
/// 8, 8 s; three probes, each allowed 5 s; calls of 1 s or more are slow.
fn base() -> config::Builder {
    CircuitBreakerConfig::builder()
        .count_window(10)
        .minimum_calls(5)
        .failure_rate_threshold(50.0)
        .slow_call_duration(SEC)
        .open_wait(SEC)
        .open_wait_cap(8 * SEC)
        .jitter(Jitter::None)
        .half_open_probes(3)
        .half_open_timeout(5 * SEC)
}

fn breaker(b: config::Builder) -> CircuitBreaker {
    CircuitBreaker::new(b.build().expect("valid test config"))
}

/// One call completing now with `outcome` after `latency`.
fn call(cb: &CircuitBreaker, outcome: Outcome, latency: Duration) {
    let now = Instant::now();
    let permit = cb.try_acquire(now).expect("call permitted");
    permit.record(outcome, latency, now);
}

fn calls(cb: &CircuitBreaker, outcomes: &[Outcome]) {
    for &o in outcomes {
        call(cb, o, MS);
    }
}

/// Records every transition the breaker reports.
fn observed(b: config::Builder) -> (CircuitBreaker, Arc<Mutex<Vec<Transition>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&log);
    let cb = breaker(b).on_transition(move |t| sink.lock().unwrap().push(t));
    (cb, log)
}

fn trip(cb: &CircuitBreaker) {
    calls(cb, &[FAIL; 5]);
    assert_eq!(cb.state(), State::Open);
}

fn retry_after(cb: &CircuitBreaker) -> Option<Duration> {
    cb.try_acquire(Instant::now()).unwrap_err().retry_after()
}

// ---------------------------------------------------------------- closed

#[tokio::test(start_paused = true)]
async fn failure_rate_at_threshold_opens() {
    let (cb, log) = observed(base());
    calls(&cb, &[FAIL, FAIL, OK, OK, OK]); // 2/5 = 40 %
    assert_eq!(cb.state(), State::Closed);
    let m = cb.stats(Instant::now());
    assert_eq!((m.calls, m.failed_calls), (5, 2));
    assert_eq!(m.failure_rate(), Some(40.0));
    call(&cb, FAIL, MS); // 3/6 = 50 %, threshold inclusive
    assert_eq!(cb.state(), State::Open);
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].from, log[0].to, log[0].reason),
        (State::Closed, State::Open, Reason::FailureRate)
    );
}

#[tokio::test(start_paused = true)]
async fn minimum_calls_is_respected() {
    let cb = breaker(base());
    calls(&cb, &[FAIL; 4]); // 100 % of 4 calls, but 5 are needed
    assert_eq!(cb.state(), State::Closed);
    assert_eq!(cb.stats(Instant::now()).failed_calls, 4);
    call(&cb, FAIL, MS);
    assert_eq!(cb.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn count_window_evicts_the_oldest_call() {
    let cb = breaker(base().minimum_calls(10));
    calls(&cb, &[OK; 10]);
    calls(&cb, &[FAIL; 4]); // each failure pushes out one success
    let m = cb.stats(Instant::now());
    assert_eq!((m.calls, m.failed_calls), (10, 4));
    assert_eq!(cb.state(), State::Closed);
    call(&cb, FAIL, MS); // 5 of the last 10
    assert_eq!(cb.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn count_window_forgets_failures_that_slid_out() {
    let cb = breaker(base().minimum_calls(10).failure_rate_threshold(40.0));
    calls(&cb, &[FAIL, FAIL, FAIL]);
    calls(&cb, &[OK; 10]); // the three failures have left the window
    let m = cb.stats(Instant::now());
    assert_eq!((m.calls, m.failed_calls), (10, 0));
    calls(&cb, &[FAIL, FAIL, FAIL]); // 3/10 = 30 % < 40 %
    assert_eq!(cb.state(), State::Closed);
    call(&cb, FAIL, MS); // 4/10
    assert_eq!(cb.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn time_window_counts_the_last_seconds_only() {
    let cb = breaker(base().time_window(10 * SEC));
    calls(&cb, &[FAIL; 4]); // second 0
    advance(Duration::from_millis(9_500)).await;
    assert_eq!(cb.stats(Instant::now()).calls, 4);
    call(&cb, OK, MS); // 4/5 within the last 10 s
    assert_eq!(cb.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn time_window_calls_expire() {
    let cb = breaker(base().time_window(10 * SEC));
    calls(&cb, &[FAIL; 2]); // second 0
    advance(9 * SEC).await;
    calls(&cb, &[OK; 2]); // second 9
    assert_eq!(cb.stats(Instant::now()).calls, 4);
    advance(SEC).await; // second 10: second 0 has left the window
    let m = cb.stats(Instant::now());
    assert_eq!((m.calls, m.failed_calls), (2, 0));
    // 2/5 = 40 %: closed. Had the first two failures stayed, 4/7 would open.
    calls(&cb, &[FAIL, FAIL, OK]);
    let m = cb.stats(Instant::now());
    assert_eq!((m.calls, m.failed_calls), (5, 2));
    assert_eq!(cb.state(), State::Closed);
    advance(9 * SEC).await; // second 19: only second 10 remains
    assert_eq!(cb.stats(Instant::now()).calls, 3);
    advance(SEC).await; // second 20: empty
    assert_eq!(cb.stats(Instant::now()).calls, 0);
}

#[tokio::test(start_paused = true)]
async fn slow_call_rate_opens() {
    let (cb, log) = observed(base().slow_call_rate_threshold(60.0));
    call(&cb, OK, SEC); // slow by latency (≥ 1 s)
    call(&cb, SLOW_FAIL, MS); // slow by classification
    call(&cb, OK, 999 * MS); // just under
    call(&cb, OK, MS);
    assert_eq!(cb.state(), State::Closed);
    call(&cb, OK, 2 * SEC); // 3/5 = 60 % slow
    assert_eq!(cb.state(), State::Open);
    assert_eq!(log.lock().unwrap()[0].reason, Reason::SlowCallRate);
}

#[tokio::test(start_paused = true)]
async fn slow_failure_kind_counts_toward_slow_rate_only() {
    let cb = breaker(base()); // failure 50 %, slow 100 %
    calls(&cb, &[SLOW_FAIL, SLOW_FAIL, SLOW_FAIL, SLOW_FAIL, OK]);
    let m = cb.stats(Instant::now());
    assert_eq!((m.calls, m.failed_calls, m.slow_calls), (5, 0, 4));
    assert_eq!(cb.state(), State::Closed);
    // A hard failure that was also slow counts in both rates.
    call(&cb, FAIL, 3 * SEC);
    let m = cb.stats(Instant::now());
    assert_eq!((m.failed_calls, m.slow_calls), (1, 5));
}

#[tokio::test(start_paused = true)]
async fn ignored_outcomes_count_nothing() {
    let cb = breaker(base());
    calls(&cb, &[Outcome::Ignore; 20]);
    let m = cb.stats(Instant::now());
    assert_eq!(m.calls, 0);
    assert_eq!(cb.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn consecutive_failures_open_below_minimum_calls() {
    let (cb, log) = observed(base().minimum_calls(10).consecutive_failures(3));
    calls(&cb, &[FAIL, FAIL, OK, FAIL, FAIL]); // the success breaks the run
    assert_eq!(cb.state(), State::Closed);
    calls(&cb, &[SLOW_FAIL]); // not a hard failure: breaks it too
    calls(&cb, &[FAIL, FAIL]);
    assert_eq!(cb.state(), State::Closed);
    assert_eq!(cb.stats(Instant::now()).consecutive_failures, 2);
    call(&cb, FAIL, MS);
    assert_eq!(cb.state(), State::Open);
    assert_eq!(log.lock().unwrap()[0].reason, Reason::ConsecutiveFailures);
}

#[tokio::test(start_paused = true)]
async fn outcomes_of_an_earlier_state_period_are_not_counted() {
    let cb = breaker(base());
    let early = cb.try_acquire(Instant::now()).unwrap();
    trip(&cb);
    let before = cb.stats(Instant::now());
    early.record(FAIL, MS, Instant::now()); // admitted while closed, done while open
    assert_eq!(cb.stats(Instant::now()), before);

    // Recover through half-open; a permit from the first closed period must
    // not leak into the fresh window of the second.
    let stale = {
        cb.reset();
        cb.try_acquire(Instant::now()).unwrap()
    };
    trip(&cb);
    advance(SEC).await;
    calls(&cb, &[OK; 3]);
    assert_eq!(cb.state(), State::Closed);
    stale.record(FAIL, MS, Instant::now());
    assert_eq!(cb.stats(Instant::now()).calls, 0);
}

// ---------------------------------------------------------------- open

#[tokio::test(start_paused = true)]
async fn open_refuses_until_the_wait_has_elapsed() {
    let (cb, log) = observed(base());
    trip(&cb);
    assert_eq!(retry_after(&cb), Some(SEC));
    advance(999 * MS).await;
    assert!(!cb.is_call_permitted(Instant::now()));
    let refused = cb.try_acquire(Instant::now()).unwrap_err();
    assert_eq!(refused.state(), State::Open);
    assert_eq!(refused.retry_after(), Some(MS));
    advance(MS).await;
    // Side-effect free: asking does not move the breaker.
    assert!(cb.is_call_permitted(Instant::now()));
    assert!(cb.is_call_permitted(Instant::now()));
    assert_eq!(cb.state(), State::Open);
    assert_eq!(cb.transitions_to(State::HalfOpen), 0);
    let probe = cb.try_acquire(Instant::now()).unwrap();
    assert!(probe.is_probe());
    assert_eq!(cb.state(), State::HalfOpen);
    assert_eq!(log.lock().unwrap()[1].reason, Reason::WaitElapsed);
    assert_eq!(cb.stats(Instant::now()).rejected_calls, 2);
}

#[tokio::test(start_paused = true)]
async fn open_wait_doubles_up_to_the_cap_and_resets_on_close() {
    let cb = breaker(base());
    // Probes that fail keep it open, each wait twice the last, up to 8 s.
    trip(&cb);
    let mut waits = vec![retry_after(&cb).unwrap()];
    for _ in 0..5 {
        advance(*waits.last().unwrap()).await;
        calls(&cb, &[FAIL, FAIL, OK]);
        assert_eq!(cb.state(), State::Open);
        waits.push(retry_after(&cb).unwrap());
    }
    assert_eq!(waits, [SEC, 2 * SEC, 4 * SEC, 8 * SEC, 8 * SEC, 8 * SEC]);
    assert_eq!(cb.stats(Instant::now()).opens_in_row, 6);

    // A successful close restarts the backoff.
    advance(8 * SEC).await;
    calls(&cb, &[OK; 3]);
    assert_eq!(cb.state(), State::Closed);
    assert_eq!(cb.stats(Instant::now()).opens_in_row, 0);
    trip(&cb);
    assert_eq!(retry_after(&cb), Some(SEC));
}

#[tokio::test(start_paused = true)]
async fn jittered_waits_stay_within_their_bands() {
    for jitter in [Jitter::Full, Jitter::Equal] {
        for seed in 0..20 {
            let cb = breaker(base().jitter(jitter).open_wait_cap(20 * SEC).seed(seed));
            trip(&cb);
            for k in 0..7u32 {
                let wait = retry_after(&cb).unwrap();
                let hi = (SEC * 2u32.pow(k + 1)).min(20 * SEC);
                let lo = match jitter {
                    Jitter::Equal => (hi / 2).max(SEC),
                    _ => SEC,
                };
                assert!(
                    wait >= lo && wait <= hi,
                    "{jitter:?} seed {seed} k {k}: {wait:?} not in [{lo:?}, {hi:?}]"
                );
                advance(wait).await;
                calls(&cb, &[FAIL, FAIL, FAIL]);
                assert_eq!(cb.state(), State::Open);
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn jitter_actually_varies_the_wait() {
    let waits: std::collections::HashSet<Duration> = (0..10)
        .map(|seed| {
            let cb = breaker(base().jitter(Jitter::Full).seed(seed));
            trip(&cb);
            retry_after(&cb).unwrap()
        })
        .collect();
    assert!(waits.len() > 5, "{waits:?}");
}

// ---------------------------------------------------------------- half-open

async fn half_open(cb: &CircuitBreaker) {
    trip(cb);
    advance(retry_after(cb).unwrap()).await;
}

#[tokio::test(start_paused = true)]
async fn half_open_closes_when_probes_succeed() {
    let (cb, log) = observed(base());
    half_open(&cb).await;
    let probes: Vec<_> = (0..3)
        .map(|_| cb.try_acquire(Instant::now()).unwrap())
        .collect();
    let fourth = cb.try_acquire(Instant::now()).unwrap_err();
    assert_eq!(fourth.state(), State::HalfOpen);
    assert!(!cb.is_call_permitted(Instant::now()));
    let mut probes = probes.into_iter();
    probes.next().unwrap().record(FAIL, MS, Instant::now());
    probes.next().unwrap().record(OK, MS, Instant::now());
    assert_eq!(cb.state(), State::HalfOpen); // waits for every probe
    probes.next().unwrap().record(OK, MS, Instant::now()); // 1/3 < 50 %
    assert_eq!(cb.state(), State::Closed);
    assert_eq!(cb.stats(Instant::now()).calls, 0, "window reset");
    let log = log.lock().unwrap();
    let kinds: Vec<_> = log.iter().map(|t| (t.from, t.to, t.reason)).collect();
    assert_eq!(
        kinds,
        [
            (State::Closed, State::Open, Reason::FailureRate),
            (State::Open, State::HalfOpen, Reason::WaitElapsed),
            (State::HalfOpen, State::Closed, Reason::ProbesSucceeded),
        ]
    );
    assert_eq!(cb.transitions_to(State::Open), 1);
    assert_eq!(cb.transitions_to(State::HalfOpen), 1);
    assert_eq!(cb.transitions_to(State::Closed), 1);
}

#[tokio::test(start_paused = true)]
async fn half_open_reopens_when_probes_fail() {
    let (cb, log) = observed(base());
    half_open(&cb).await;
    calls(&cb, &[OK, FAIL, FAIL]); // 2/3 ≥ 50 %
    assert_eq!(cb.state(), State::Open);
    assert_eq!(log.lock().unwrap()[2].reason, Reason::ProbesFailed);
    assert_eq!(retry_after(&cb), Some(2 * SEC));
}

#[tokio::test(start_paused = true)]
async fn half_open_reopens_when_probes_are_slow() {
    let (cb, log) = observed(base().slow_call_rate_threshold(50.0));
    half_open(&cb).await;
    call(&cb, OK, 2 * SEC);
    call(&cb, OK, 2 * SEC);
    call(&cb, OK, MS);
    assert_eq!(cb.state(), State::Open);
    assert_eq!(log.lock().unwrap()[2].reason, Reason::ProbesFailed);
}

#[tokio::test(start_paused = true)]
async fn dropped_or_ignored_probe_frees_its_slot() {
    let cb = breaker(base());
    half_open(&cb).await;
    let a = cb.try_acquire(Instant::now()).unwrap();
    let b = cb.try_acquire(Instant::now()).unwrap();
    let c = cb.try_acquire(Instant::now()).unwrap();
    assert!(cb.try_acquire(Instant::now()).is_err());
    drop(b); // caller gave up
    assert!(cb.is_call_permitted(Instant::now()));
    let d = cb.try_acquire(Instant::now()).unwrap();
    assert!(cb.try_acquire(Instant::now()).is_err());
    c.record(Outcome::Ignore, MS, Instant::now()); // says nothing
    let e = cb.try_acquire(Instant::now()).unwrap();
    assert_eq!(cb.stats(Instant::now()).probes_in_flight, 3);
    for p in [a, d, e] {
        p.record(OK, MS, Instant::now());
    }
    assert_eq!(cb.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn half_open_probe_timeout_reopens_lazily() {
    let (cb, log) = observed(base());
    half_open(&cb).await;
    let first = cb.try_acquire(Instant::now()).unwrap();
    advance(2 * SEC).await;
    let second = cb.try_acquire(Instant::now()).unwrap();
    let third = cb.try_acquire(Instant::now()).unwrap();
    second.record(OK, MS, Instant::now());
    advance(3 * SEC - MS).await; // first probe is 1 ms short of its 5 s
    assert!(!cb.is_call_permitted(Instant::now())); // slots all taken
    assert_eq!(cb.state(), State::HalfOpen);
    advance(MS).await;
    // Nothing happens by itself...
    assert_eq!(cb.state(), State::HalfOpen);
    assert!(!cb.is_call_permitted(Instant::now()));
    // ...the next admission finds the overdue probe and reopens.
    let refused = cb.try_acquire(Instant::now()).unwrap_err();
    assert_eq!(refused.state(), State::Open);
    assert_eq!(refused.retry_after(), Some(2 * SEC));
    assert_eq!(cb.state(), State::Open);
    assert_eq!(log.lock().unwrap()[2].reason, Reason::ProbeTimeout);
    let m = cb.stats(Instant::now());
    assert_eq!((m.probes_completed, m.probes_failed), (3, 2));
    // The late probes' results change nothing.
    first.record(OK, 5 * SEC, Instant::now());
    third.record(OK, MS, Instant::now());
    assert_eq!(cb.state(), State::Open);
    assert_eq!(cb.transitions_to(State::Open), 2);
}

#[tokio::test(start_paused = true)]
async fn late_probe_result_counts_as_timeout() {
    let (cb, log) = observed(base().half_open_probes(1));
    half_open(&cb).await;
    let probe = cb.try_acquire(Instant::now()).unwrap();
    advance(5 * SEC).await;
    probe.record(OK, 5 * SEC, Instant::now()); // finished, but too late
    assert_eq!(cb.state(), State::Open);
    assert_eq!(log.lock().unwrap()[2].reason, Reason::ProbeTimeout);
}

#[tokio::test(start_paused = true)]
async fn half_open_waits_for_traffic_without_timing_out() {
    let cb = breaker(base());
    half_open(&cb).await;
    call(&cb, OK, MS);
    advance(60 * SEC).await; // no probe running, so nothing is overdue
    assert!(cb.is_call_permitted(Instant::now()));
    calls(&cb, &[OK, OK]);
    assert_eq!(cb.state(), State::Closed);
}

/// 1,000 tasks on a multi-thread runtime race for 3 probe slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_n_probes_under_1000_concurrent_tasks() {
    for round in 0..5 {
        let cb = Arc::new(breaker(base().half_open_probes(3 + round)));
        trip(&cb);
        let after_wait = Instant::now() + 2 * SEC;
        let barrier = Arc::new(tokio::sync::Barrier::new(1000));
        let tasks: Vec<_> = (0..1000)
            .map(|_| {
                let cb = Arc::clone(&cb);
                let barrier = Arc::clone(&barrier);
                tokio::spawn(async move {
                    barrier.wait().await;
                    cb.try_acquire_owned(after_wait).ok()
                })
            })
            .collect();
        let mut permits = Vec::new();
        for t in tasks {
            if let Some(p) = t.await.unwrap() {
                permits.push(p);
            }
        }
        assert_eq!(permits.len(), 3 + round as usize, "round {round}");
        assert!(permits.iter().all(|p| p.is_probe()));
        let m = cb.stats(after_wait);
        assert_eq!(m.probes_in_flight, 3 + round);
        assert_eq!(cb.transitions_to(State::HalfOpen), 1);
    }
}

/// 1,000 OS threads released together by a barrier race for the probe
/// slots at the moment the open wait ends: most of them see the breaker
/// still open and queue on the slow path, so admission itself must be exact.
#[test]
fn exactly_n_probes_under_1000_racing_threads() {
    for probes in [1, 3, 10] {
        let cb = breaker(base().half_open_probes(probes));
        let start = Instant::now();
        for _ in 0..5 {
            cb.try_acquire(start).unwrap().record(FAIL, MS, start);
        }
        assert_eq!(cb.state(), State::Open);
        let at = start + 2 * SEC;
        let go = std::sync::Barrier::new(1000);
        let done = std::sync::Barrier::new(1000);
        let admitted = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..1000 {
                let (cb, go, done, admitted) = (&cb, &go, &done, &admitted);
                std::thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn_scoped(s, move || {
                        go.wait();
                        let permit = cb.try_acquire(at);
                        if permit.is_ok() {
                            admitted.fetch_add(1, Ordering::SeqCst);
                        }
                        done.wait(); // hold every permit until all have tried
                        drop(permit);
                    })
                    .unwrap();
            }
        });
        assert_eq!(admitted.load(Ordering::SeqCst), probes as usize);
        assert_eq!(cb.transitions_to(State::HalfOpen), 1);
        assert_eq!(cb.stats(at).rejected_calls, 1000 - u64::from(probes));
    }
}

/// The same race on OS threads, with probes completing and being dropped
/// while others still race: never more than N slots held at once, and a
/// verdict only after N completions.
#[test]
fn exactly_n_probes_under_thread_races() {
    for _ in 0..20 {
        let cb = breaker(base().half_open_probes(5));
        trip(&cb);
        let at = Instant::now() + 2 * SEC;
        let held = AtomicUsize::new(0);
        let max_held = AtomicUsize::new(0);
        let recorded = AtomicUsize::new(0);
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for t in 0..8 {
                let (cb, held, max_held, recorded, barrier) =
                    (&cb, &held, &max_held, &recorded, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for i in 0..125 {
                        let Ok(p) = cb.try_acquire(at) else { continue };
                        if !p.is_probe() {
                            continue; // closed again: plain calls
                        }
                        let now_held = held.fetch_add(1, Ordering::SeqCst) + 1;
                        max_held.fetch_max(now_held, Ordering::SeqCst);
                        std::thread::yield_now();
                        held.fetch_sub(1, Ordering::SeqCst);
                        if (t + i) % 2 == 0 {
                            drop(p); // frees the slot for another thread
                        } else {
                            recorded.fetch_add(1, Ordering::SeqCst);
                            p.record(OK, MS, at);
                        }
                    }
                });
            }
        });
        assert!(max_held.load(Ordering::SeqCst) <= 5);
        assert_eq!(recorded.load(Ordering::SeqCst), 5);
        assert_eq!(cb.state(), State::Closed);
        assert_eq!(cb.transitions_to(State::HalfOpen), 1);
    }
}

// ---------------------------------------------------------------- manual states

#[tokio::test(start_paused = true)]
async fn forced_open_refuses_until_reset() {
    let (cb, log) = observed(base());
    cb.force_open();
    assert_eq!(cb.state(), State::ForcedOpen);
    advance(3600 * SEC).await;
    assert!(!cb.is_call_permitted(Instant::now()));
    let refused = cb.try_acquire(Instant::now()).unwrap_err();
    assert_eq!(
        (refused.state(), refused.retry_after()),
        (State::ForcedOpen, None)
    );
    cb.reset();
    assert_eq!(cb.state(), State::Closed);
    call(&cb, OK, MS);
    let reasons: Vec<_> = log.lock().unwrap().iter().map(|t| t.reason).collect();
    assert_eq!(reasons, [Reason::ForcedOpen, Reason::Reset]);
}

#[tokio::test(start_paused = true)]
async fn disabled_admits_everything_and_records_nothing() {
    let cb = breaker(base());
    cb.disable();
    assert_eq!(cb.state(), State::Disabled);
    calls(&cb, &[FAIL; 50]);
    assert_eq!(cb.state(), State::Disabled);
    assert!(cb.is_call_permitted(Instant::now()));
    assert_eq!(cb.stats(Instant::now()).calls, 0);
    cb.reset();
    calls(&cb, &[FAIL; 5]);
    assert_eq!(cb.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn reset_clears_an_open_breaker_and_its_probes() {
    let cb = breaker(base());
    half_open(&cb).await;
    let probe = cb.try_acquire(Instant::now()).unwrap();
    cb.reset();
    assert_eq!(cb.state(), State::Closed);
    probe.record(FAIL, MS, Instant::now()); // from the old half-open period
    assert_eq!(cb.stats(Instant::now()).calls, 0);
    cb.force_open();
    cb.disable();
    assert_eq!(cb.state(), State::Disabled);
    assert_eq!(cb.transitions_to(State::ForcedOpen), 1);
    assert_eq!(cb.transitions_to(State::Disabled), 1);
}

// ---------------------------------------------------------------- layer

#[tokio::test(start_paused = true)]
async fn layer_never_calls_the_inner_service_while_open() {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    let inner = service_fn(move |fail: bool| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { if fail { Err("down") } else { Ok("up") } }
    });
    let layer = CircuitBreakerLayer::new(base().build().unwrap());
    let cb = Arc::clone(layer.breaker());
    let mut svc = tower::ServiceBuilder::new().layer(layer).service(inner);

    for _ in 0..5 {
        let err = svc.ready().await.unwrap().call(true).await.unwrap_err();
        assert!(!err.is_open());
        assert_eq!(err.into_inner(), Some("down"));
    }
    assert_eq!(cb.state(), State::Open);
    assert_eq!(hits.load(Ordering::SeqCst), 5);
    for _ in 0..100 {
        let err = svc.ready().await.unwrap().call(false).await.unwrap_err();
        assert!(err.is_open());
    }
    assert_eq!(hits.load(Ordering::SeqCst), 5, "inner called while open");

    advance(SEC).await;
    for _ in 0..3 {
        assert_eq!(svc.ready().await.unwrap().call(false).await.unwrap(), "up");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 8);
    assert_eq!(cb.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn layer_refuses_surplus_half_open_calls_without_calling_inner() {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    let inner = service_fn(move |_: ()| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(100 * MS).await;
            Ok::<_, &str>(())
        }
    });
    let cb = Arc::new(breaker(base()));
    trip(&cb);
    advance(SEC).await;
    let mut svc = CircuitBreakerLayer::shared(Arc::clone(&cb)).layer_service(inner);
    let probes: Vec<_> = (0..3).map(|_| svc.call(())).collect();
    let surplus = svc.call(()).await.unwrap_err();
    assert!(surplus.is_open());
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    // A dropped response future gives its probe slot back.
    let mut probes = probes.into_iter();
    drop(probes.next());
    assert!(cb.is_call_permitted(Instant::now()));
    let replacement = svc.call(());
    for f in probes.chain([replacement]) {
        f.await.unwrap();
    }
    assert_eq!(cb.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn layer_records_latency_and_uses_the_classifier() {
    // Responses ≥ 500 are failures; the inner service takes 2 s (slow).
    let inner = service_fn(|code: u16| async move {
        tokio::time::sleep(2 * SEC).await;
        Ok::<_, std::convert::Infallible>(code)
    });
    let cb = Arc::new(breaker(base().slow_call_rate_threshold(100.0)));
    let layer = CircuitBreakerLayer::shared(Arc::clone(&cb)).classify(
        |r: Result<&u16, &std::convert::Infallible>, _latency: Duration| match r {
            Ok(code) if *code >= 500 => {
                Outcome::Failure(FailureKind::Gateway { retry_after: None })
            }
            _ => Outcome::Success,
        },
    );
    let mut svc = tower::ServiceBuilder::new().layer(layer).service(inner);
    for code in [200, 500, 200, 503] {
        svc.ready().await.unwrap().call(code).await.unwrap();
    }
    let m = cb.stats(Instant::now());
    assert_eq!((m.calls, m.failed_calls, m.slow_calls), (4, 2, 4));
    // The fifth slow call trips the slow-call rate (100 %), not the failure
    // rate (2/5 = 40 %).
    svc.ready().await.unwrap().call(200).await.unwrap();
    assert_eq!(cb.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn layer_poll_ready_delegates_to_the_inner_service() {
    #[derive(Clone)]
    struct NeverReady;
    impl Service<()> for NeverReady {
        type Response = ();
        type Error = &'static str;
        type Future = std::future::Ready<Result<(), &'static str>>;
        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Err("inner not ready"))
        }
        fn call(&mut self, _: ()) -> Self::Future {
            std::future::ready(Ok(()))
        }
    }
    let mut svc = CircuitBreakerLayer::new(base().build().unwrap()).layer_service(NeverReady);
    let err = svc.ready().await.err().unwrap();
    assert_eq!(err.into_inner(), Some("inner not ready"));
}

/// `Layer::layer` as a method, so tests read left to right.
trait LayerExt<S>: tower::Layer<S> + Sized {
    fn layer_service(self, s: S) -> Self::Service {
        self.layer(s)
    }
}
impl<S, L: tower::Layer<S>> LayerExt<S> for L {}

// ---------------------------------------------------------------- config

#[test]
fn defaults_are_resilience4js() {
    let c = CircuitBreakerConfig::builder().build().unwrap();
    assert_eq!(c, CircuitBreakerConfig::default());
    assert_eq!(c.failure_rate_threshold(), 50.0);
    assert_eq!(c.slow_call_rate_threshold(), 100.0);
    assert_eq!(c.slow_call_duration(), Duration::from_secs(60));
    assert_eq!(c.window(), tower_lb::breaker::SlidingWindow::Count(100));
    assert_eq!(c.minimum_calls(), 100);
    assert_eq!(c.open_wait(), Duration::from_secs(60));
    assert_eq!(c.half_open_probes(), 10);
    assert_eq!(c.open_wait_cap(), config::DEFAULT_OPEN_WAIT_CAP);
    assert_eq!(c.half_open_timeout(), config::DEFAULT_HALF_OPEN_TIMEOUT);
    assert_eq!(c.jitter(), config::DEFAULT_JITTER);
    assert_eq!(c.consecutive_failures(), None);
}

#[test]
fn every_invalid_field_is_named() {
    let b = CircuitBreakerConfig::builder;
    let cases: Vec<(&str, config::Builder)> = vec![
        ("failure_rate_threshold", b().failure_rate_threshold(0.0)),
        ("failure_rate_threshold", b().failure_rate_threshold(-5.0)),
        ("failure_rate_threshold", b().failure_rate_threshold(100.01)),
        (
            "failure_rate_threshold",
            b().failure_rate_threshold(f64::NAN),
        ),
        (
            "slow_call_rate_threshold",
            b().slow_call_rate_threshold(0.0),
        ),
        (
            "slow_call_rate_threshold",
            b().slow_call_rate_threshold(f64::INFINITY),
        ),
        ("slow_call_duration", b().slow_call_duration(Duration::ZERO)),
        ("count_window", b().count_window(0)),
        ("count_window", b().count_window(1_000_001)),
        ("time_window", b().time_window(Duration::ZERO)),
        ("time_window", b().time_window(Duration::from_millis(1500))),
        ("time_window", b().time_window(Duration::from_secs(3601))),
        ("minimum_calls", b().minimum_calls(0)),
        ("minimum_calls", b().minimum_calls(0).time_window(SEC)),
        ("minimum_calls", b().count_window(10).minimum_calls(11)),
        ("consecutive_failures", b().consecutive_failures(0)),
        ("open_wait", b().open_wait(Duration::ZERO)),
        (
            "open_wait_cap",
            b().open_wait(10 * SEC).open_wait_cap(9 * SEC),
        ),
        ("half_open_probes", b().half_open_probes(0)),
        ("half_open_probes", b().half_open_probes(10_001)),
        ("half_open_timeout", b().half_open_timeout(Duration::ZERO)),
    ];
    for (field, builder) in cases {
        let err = builder.build().expect_err(field);
        assert_eq!(err.field(), field, "{err}");
        assert!(err.to_string().contains(field), "{err}");
        assert!(!err.allowed().is_empty());
    }
}

#[test]
fn boundary_values_are_accepted() {
    CircuitBreakerConfig::builder()
        .failure_rate_threshold(100.0)
        .slow_call_rate_threshold(0.001)
        .count_window(1)
        .minimum_calls(1)
        .consecutive_failures(1)
        .open_wait(SEC)
        .open_wait_cap(SEC)
        .half_open_probes(1)
        .half_open_timeout(Duration::from_nanos(1))
        .slow_call_duration(Duration::from_nanos(1))
        .build()
        .unwrap();
    CircuitBreakerConfig::builder()
        .count_window(1_000_000)
        .minimum_calls(1_000_000)
        .half_open_probes(10_000)
        .build()
        .unwrap();
    // A time window holds any number of calls: no upper bound on the minimum.
    CircuitBreakerConfig::builder()
        .time_window(Duration::from_secs(3600))
        .minimum_calls(u32::MAX)
        .build()
        .unwrap();
}

#[test]
fn breaker_is_send_and_sync() {
    fn check<T: Send + Sync + 'static>() {}
    check::<CircuitBreaker>();
    check::<tower_lb::breaker::OwnedPermit>();
    check::<tower_lb::breaker::CircuitOpen>();
}

// ---------------------------------------------------------------- properties

mod properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Acquire,
        Record {
            which: usize,
            outcome: u8,
            latency_ms: u16,
        },
        Drop {
            which: usize,
        },
        Advance {
            ms: u32,
        },
        ForceOpen,
        Disable,
        Reset,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            18 => Just(Op::Acquire),
            18 => (any::<usize>(), 0u8..4, 0u16..1000)
                .prop_map(|(which, outcome, latency_ms)| Op::Record { which, outcome, latency_ms }),
            6 => any::<usize>().prop_map(|which| Op::Drop { which }),
            9 => (0u32..3000).prop_map(|ms| Op::Advance { ms }),
            // Forced-open and disabled stick until a reset: keep them rare.
            1 => Just(Op::ForceOpen),
            1 => Just(Op::Disable),
            4 => Just(Op::Reset),
        ]
    }

    const WINDOW: usize = 6;
    const MIN: u32 = 3;
    const PROBES: u32 = 3;

    proptest! {
        /// Whatever happens: `is_call_permitted` predicts `try_acquire`;
        /// half-open never holds more than N probes; a closed breaker's
        /// window is below both thresholds; open waits stay within the cap.
        #[test]
        fn the_machine_keeps_its_invariants(ops in proptest::collection::vec(op(), 1..300), seed: u64) {
            let cb = breaker(
                CircuitBreakerConfig::builder()
                    .count_window(WINDOW)
                    .minimum_calls(MIN)
                    .failure_rate_threshold(50.0)
                    .slow_call_rate_threshold(80.0)
                    .slow_call_duration(500 * MS)
                    .consecutive_failures(4)
                    .open_wait(SEC)
                    .open_wait_cap(4 * SEC)
                    .jitter(Jitter::Full)
                    .half_open_probes(PROBES)
                    .half_open_timeout(2 * SEC)
                    .seed(seed),
            );
            let mut now = Instant::now();
            let mut held = Vec::new();
            for op in ops {
                match op {
                    Op::Acquire => {
                        let predicted = cb.is_call_permitted(now);
                        match cb.try_acquire(now) {
                            Ok(p) => {
                                prop_assert!(predicted, "admitted although not permitted");
                                held.push(p);
                            }
                            Err(e) => {
                                prop_assert!(!predicted, "refused although permitted: {e:?}");
                                if e.state() == State::Open {
                                    let left = e.retry_after().unwrap();
                                    prop_assert!(left > Duration::ZERO && left <= 4 * SEC);
                                }
                            }
                        }
                    }
                    Op::Record { which, outcome, latency_ms } if !held.is_empty() => {
                        let p = held.swap_remove(which % held.len());
                        let outcome = [OK, FAIL, SLOW_FAIL, Outcome::Ignore][outcome as usize];
                        p.record(outcome, Duration::from_millis(u64::from(latency_ms)), now);
                    }
                    Op::Drop { which } if !held.is_empty() => {
                        drop(held.swap_remove(which % held.len()));
                    }
                    Op::Advance { ms } => now += Duration::from_millis(u64::from(ms)),
                    Op::ForceOpen => cb.force_open(),
                    Op::Disable => cb.disable(),
                    Op::Reset => cb.reset(),
                    _ => {}
                }
                let m = cb.stats(now);
                prop_assert!(m.calls <= WINDOW as u64);
                prop_assert!(m.failed_calls <= m.calls && m.slow_calls <= m.calls);
                match cb.state() {
                    State::HalfOpen => {
                        prop_assert!(m.probes_in_flight + m.probes_completed <= PROBES);
                        prop_assert!(m.probes_completed < PROBES);
                    }
                    State::Closed => {
                        prop_assert!(m.consecutive_failures < 4);
                        if m.calls >= u64::from(MIN) {
                            prop_assert!(m.failed_calls * 100 < 50 * m.calls, "{m:?}");
                            prop_assert!(m.slow_calls * 100 < 80 * m.calls, "{m:?}");
                        }
                    }
                    State::Disabled => prop_assert_eq!(m.calls, 0),
                    _ => {}
                }
            }
        }
    }
}
