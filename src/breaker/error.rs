//! [`CircuitOpen`] and the layer's [`Error`].

use std::fmt;
use std::time::Duration;

use super::State;

/// A call was refused because the breaker does not let it through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitOpen {
    state: State,
    retry_after: Option<Duration>,
}

impl CircuitOpen {
    pub(crate) fn new(state: State, retry_after: Option<Duration>) -> Self {
        Self { state, retry_after }
    }

    /// The state that refused the call: [`State::Open`],
    /// [`State::HalfOpen`] (every probe slot taken) or [`State::ForcedOpen`].
    pub fn state(&self) -> State {
        self.state
    }

    /// In the open state, the time left before the breaker admits probes;
    /// `None` in the other states (no such time is known).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.state {
            State::HalfOpen => f.write_str("circuit breaker is half-open and every probe is taken"),
            State::ForcedOpen => f.write_str("circuit breaker is forced open"),
            _ => f.write_str("circuit breaker is open"),
        }
    }
}

impl std::error::Error for CircuitOpen {}

/// The error of a [`CircuitBreakerService`](super::CircuitBreakerService):
/// the breaker refused the call, or the inner service failed.
#[derive(Debug)]
pub enum Error<E> {
    /// The breaker refused the call; the inner service was not called.
    Open(CircuitOpen),
    /// The inner service failed (in `poll_ready` or in its response).
    Inner(E),
}

impl<E> Error<E> {
    /// The inner service's error, if that is what this is.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Error::Inner(e) => Some(e),
            Error::Open(_) => None,
        }
    }

    /// True when the breaker refused the call.
    pub fn is_open(&self) -> bool {
        matches!(self, Error::Open(_))
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open(e) => e.fmt(f),
            Error::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Open(e) => Some(e),
            Error::Inner(e) => Some(e),
        }
    }
}

impl<E> From<CircuitOpen> for Error<E> {
    fn from(e: CircuitOpen) -> Self {
        Error::Open(e)
    }
}
