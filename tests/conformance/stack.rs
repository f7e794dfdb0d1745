//! The stack a user builds from the README's HTTP section, which every
//! promise's test builds: a retry layer with a 500 ms per-try timeout and
//! its defaults (3 attempts, the default budget), over a balancer with
//! per-endpoint circuit breakers (`minimum_calls(20)`, every other setting
//! its default: a 60 s open wait among them) and panic mode `RouteAll` at
//! the default threshold (50% healthy). A test that sets anything else
//! says so, and the README's promise row states it.
//!
//! `readme_shows_this_stack` reads the README: when its stack changes,
//! this module (and the promises) must follow.

use std::time::Duration;

use tower_lb::Balance;
use tower_lb::balance::Builder;
use tower_lb::breaker::CircuitBreakerConfig;
use tower_lb::health::PanicMode;
use tower_lb::retry::{self, RetryLayer};

/// The README's per-try timeout.
pub const PER_TRY_TIMEOUT: Duration = Duration::from_millis(500);

/// The README's `minimum_calls` for the breakers.
pub const MINIMUM_CALLS: u32 = 20;

/// The README's breaker: `minimum_calls(20)`, the rest default.
pub fn breaker() -> CircuitBreakerConfig {
    CircuitBreakerConfig::builder()
        .minimum_calls(MINIMUM_CALLS)
        .build()
        .expect("the README's breaker is valid")
}

/// A balancer builder with the README's breakers and panic mode (the
/// picker, classifier and endpoints are the test's).
pub fn balance<K, S>() -> Builder<K, S> {
    on(Balance::builder())
}

/// `builder` with the README's breakers and panic mode.
pub fn on<K, S, P, C>(builder: Builder<K, S, P, C>) -> Builder<K, S, P, C> {
    builder
        .circuit_breaker(breaker())
        .panic_mode(PanicMode::RouteAll)
}

/// The README's retry layer, for HTTP requests (the default replay:
/// idempotent methods).
pub fn retry() -> RetryLayer {
    RetryLayer::builder()
        .per_try_timeout(PER_TRY_TIMEOUT)
        .build()
        .expect("the README's retry layer is valid")
}

/// The README's retry layer for the in-process tests, whose requests are
/// not HTTP: every request is replayed by a clone, as the README's GETs
/// are.
pub fn retry_clone() -> RetryLayer<retry::CloneRequest> {
    RetryLayer::builder()
        .replay(retry::CloneRequest)
        .per_try_timeout(PER_TRY_TIMEOUT)
        .build()
        .expect("the README's retry layer is valid")
}

/// The README shows this stack: if it changes, the promises' tests must
/// build the new one (and this test says where).
#[test]
fn readme_shows_this_stack() {
    let readme = include_str!("../../README.md");
    for shown in [
        "RetryLayer::builder()",
        ".per_try_timeout(Duration::from_millis(500))",
        ".circuit_breaker(CircuitBreakerConfig::builder().minimum_calls(20).build()?)",
        ".panic_mode(PanicMode::RouteAll)",
    ] {
        assert!(
            readme.contains(shown),
            "README.md no longer shows `{shown}`: update tests/conformance/stack.rs \
             to the README's stack and check every promise against it"
        );
    }
    assert!(
        !readme.contains(".panic_threshold("),
        "README.md sets a panic threshold: tests/conformance/stack.rs must too"
    );
}
