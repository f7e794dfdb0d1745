//! What a completed call says about its endpoint: [`Outcome`] and
//! [`FailureKind`], re-exported by [`crate::classify`] (their public home).
//!
//! A leaf of its own, below both the classifiers that produce outcomes and
//! the endpoint model, breakers and ejection that consume them, so neither
//! side imports the other for these two types.

use std::time::Duration;

/// What a completed call says about the endpoint that served it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The endpoint did its job (this includes a client's own 4xx mistakes).
    Success,
    /// The endpoint failed.
    Failure(FailureKind),
    /// Says nothing about the endpoint (a classifier's choice, say for a
    /// request the caller itself made invalid); recorded neither as latency
    /// nor as success or failure. (A call its caller abandons never reaches
    /// the classifier: it records only a latency lower bound.)
    Ignore,
}

/// The kind of a failure, for penalties, breakers, ejection and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// Any error from the inner service.
    Error,
    /// The call timed out.
    Timeout,
    /// The connection could not be made or was lost.
    Connect,
    /// The endpoint answered as a failing gateway (HTTP 502/503/504).
    Gateway {
        /// A server-provided back-off hint (`Retry-After`), if any.
        retry_after: Option<Duration>,
    },
    /// The endpoint shed load (HTTP 429).
    Overloaded {
        /// A server-provided back-off hint (`Retry-After`), if any.
        retry_after: Option<Duration>,
    },
    /// The call succeeded but took longer than the slow-call threshold.
    Slow,
    /// The answer's head arrived but its body failed before its end (a
    /// reset stream, a connection lost mid-body), seen by the balancer's
    /// body tracking. Judged like [`Error`](Self::Error) everywhere but in
    /// metrics, which name it.
    Body,
}

impl FailureKind {
    /// The values of [`as_str`](Self::as_str), in the order of
    /// [`index`](Self::index): the `error.type` attribute of a failure in
    /// `lb.requests` and `lb.request.duration` (a bounded set, one series
    /// per kind that happened).
    pub const NAMES: [&'static str; 7] = [
        "error",
        "timeout",
        "connect",
        "gateway",
        "overloaded",
        "slow",
        "body",
    ];

    /// The kind's name, without its hints (see [`NAMES`](Self::NAMES)).
    pub fn as_str(&self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// The kind's position in [`NAMES`](Self::NAMES).
    pub fn index(&self) -> usize {
        match self {
            FailureKind::Error => 0,
            FailureKind::Timeout => 1,
            FailureKind::Connect => 2,
            FailureKind::Gateway { .. } => 3,
            FailureKind::Overloaded { .. } => 4,
            FailureKind::Slow => 5,
            FailureKind::Body => 6,
        }
    }

    /// The server's back-off hint, if the failure carried one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            FailureKind::Gateway { retry_after } | FailureKind::Overloaded { retry_after } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// True for failures that mean "the endpoint is not serving" rather than
    /// "the endpoint served slowly".
    pub fn is_hard(&self) -> bool {
        !matches!(self, FailureKind::Slow)
    }
}
