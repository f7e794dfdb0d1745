//! Internals of the state machine: the packed word, exact admission.
use super::*;
use crate::breaker::Jitter;
use crate::outcome::{FailureKind, Outcome};

fn tripped(probes: u32) -> (CircuitBreaker, Instant) {
    let config = CircuitBreakerConfig::builder()
        .count_window(5)
        .minimum_calls(5)
        .open_wait(Duration::from_secs(1))
        .jitter(Jitter::None)
        .half_open_probes(probes)
        .build()
        .unwrap();
    let cb = CircuitBreaker::new(config);
    let now = Instant::now();
    for _ in 0..5 {
        let t = cb.acquire_ticket(now).unwrap();
        cb.record_ticket(t, Outcome::Failure(FailureKind::Error), Duration::ZERO, now);
    }
    assert_eq!(cb.state(), State::Open);
    (cb, now + Duration::from_secs(1))
}

#[test]
fn word_round_trips() {
    for s in State::ALL {
        assert_eq!(unpack(pack(12345, s)), (12345, s));
    }
}

/// The lock-free refusal in `acquire_ticket` is only a shortcut: a caller
/// that raced past it must still be refused under the lock.
#[test]
fn locked_admission_is_exact_without_the_shortcut() {
    let (cb, at) = tripped(3);
    let tickets: Vec<_> = (0..3).map(|_| cb.acquire_locked(at).unwrap()).collect();
    assert!(cb.acquire_locked(at).is_err());
    cb.release_ticket(tickets[0]);
    assert!(cb.acquire_locked(at).is_ok());
    assert!(cb.acquire_locked(at).is_err());
}

#[test]
fn stale_tickets_release_nothing() {
    let (cb, at) = tripped(1);
    let probe = cb.acquire_ticket(at).unwrap();
    cb.reset();
    cb.force_open();
    cb.reset();
    cb.release_ticket(probe); // a probe of a half-open period long gone
    cb.record_ticket(probe, Outcome::Success, Duration::ZERO, at);
    assert_eq!(cb.state(), State::Closed);
    assert_eq!(cb.stats(at).calls, 0);
}

proptest::proptest! {
    /// A success skipped by the quiet shortcut leaves the breaker exactly
    /// where recording it under the lock would have: the same state and
    /// the same stats after every call, through trips, half-open periods
    /// and closes, on a twin breaker whose flag is cleared before every
    /// record (so it always takes the lock).
    #[test]
    fn the_quiet_shortcut_records_what_the_lock_would(
        window in 1usize..6,
        minimum in 1u32..6,
        consecutive in proptest::option::of(1u32..4),
        calls in proptest::collection::vec((0u8..6, 0u64..1500), 1..200),
    ) {
        let mut b = CircuitBreakerConfig::builder()
            .count_window(window)
            .minimum_calls(minimum.min(window as u32))
            .slow_call_duration(Duration::from_millis(100))
            .open_wait(Duration::from_millis(500))
            .jitter(Jitter::None)
            .half_open_probes(2);
        if let Some(n) = consecutive {
            b = b.consecutive_failures(n);
        }
        let config = b.build().unwrap();
        let (fast, locked) = (CircuitBreaker::new(config.clone()), CircuitBreaker::new(config));
        let mut now = Instant::now();
        for (kind, step_ms) in calls {
            now += Duration::from_millis(step_ms);
            let (outcome, latency) = match kind {
                0 => (Outcome::Failure(FailureKind::Error), Duration::ZERO),
                1 => (Outcome::Success, Duration::from_millis(200)),
                _ => (Outcome::Success, Duration::ZERO),
            };
            let tickets = (fast.acquire_ticket(now), locked.acquire_ticket(now));
            let (Ok(a), Ok(b)) = tickets else {
                proptest::prop_assert_eq!(tickets.0.is_ok(), tickets.1.is_ok());
                continue;
            };
            fast.record_ticket(a, outcome, latency, now);
            locked.quiet.store(false, Ordering::Relaxed);
            locked.record_ticket(b, outcome, latency, now);
            proptest::prop_assert_eq!(fast.stats(now), locked.stats(now));
        }
    }
}

#[test]
fn a_full_window_of_successes_skips_the_lock_and_a_failure_ends_that() {
    let config = CircuitBreakerConfig::builder()
        .count_window(4)
        .minimum_calls(4)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let cb = CircuitBreaker::new(config);
    let now = Instant::now();
    let record = |outcome| {
        let t = cb.acquire_ticket(now).unwrap();
        cb.record_ticket(t, outcome, Duration::ZERO, now);
    };
    for k in 0..4 {
        assert!(!cb.quiet.load(Ordering::Relaxed), "after {k} calls");
        record(Outcome::Success);
    }
    assert!(cb.quiet.load(Ordering::Relaxed));
    // Skipped: the window's cursor, back at its start after four calls,
    // does not move.
    let cursor = |cb: &CircuitBreaker| match &cb.lock().window {
        Window::Count { next, .. } => *next,
        Window::Time { .. } => unreachable!(),
    };
    assert_eq!(cursor(&cb), 0);
    record(Outcome::Success);
    assert_eq!(cursor(&cb), 0);
    record(Outcome::Failure(FailureKind::Error));
    assert!(!cb.quiet.load(Ordering::Relaxed));
    // Two of four failed: 50 % trips it, and the flag stays cleared.
    record(Outcome::Failure(FailureKind::Error));
    assert_eq!(cb.state(), State::Open);
    assert!(!cb.quiet.load(Ordering::Relaxed));
}
