//! Internals of the state machine: the packed word, exact admission.
use super::*;
use crate::breaker::Jitter;

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
