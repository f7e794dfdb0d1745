//! The breaker's observable vocabulary: [`State`], [`Reason`],
//! [`Transition`] and the [`Stats`] snapshot.

use std::fmt;

use tokio::time::Instant;

/// The state of a circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Calls flow; outcomes are recorded in the sliding window.
    Closed,
    /// Calls are refused until the open wait has elapsed.
    Open,
    /// A bounded number of probe calls are admitted; their outcomes decide
    /// between closed and open.
    HalfOpen,
    /// Calls are refused until [`CircuitBreaker::reset`](super::CircuitBreaker::reset).
    ForcedOpen,
    /// Calls flow and nothing is recorded, until [`CircuitBreaker::reset`](super::CircuitBreaker::reset).
    Disabled,
}

impl State {
    /// Every state, in the order of [`State::index`].
    pub const ALL: [State; 5] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ];

    /// A stable lower-case name (`"half_open"`), for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
        }
    }

    /// The position of this state in [`State::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a transition happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// Closed → open: the failure rate reached its threshold.
    FailureRate,
    /// Closed → open: the slow-call rate reached its threshold.
    SlowCallRate,
    /// Closed → open: the configured number of hard failures in a row.
    ConsecutiveFailures,
    /// Open → half-open: the open wait elapsed.
    WaitElapsed,
    /// Half-open → closed: every probe completed, rates below threshold.
    ProbesSucceeded,
    /// Half-open → open: the probes' failure or slow-call rate reached its
    /// threshold.
    ProbesFailed,
    /// Half-open → open: a probe did not complete within the half-open
    /// timeout.
    ProbeTimeout,
    /// [`CircuitBreaker::force_open`](super::CircuitBreaker::force_open).
    ForcedOpen,
    /// [`CircuitBreaker::disable`](super::CircuitBreaker::disable).
    Disabled,
    /// [`CircuitBreaker::reset`](super::CircuitBreaker::reset).
    Reset,
}

impl Reason {
    /// A stable snake-case name (`"failure_rate"`), for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::FailureRate => "failure_rate",
            Reason::SlowCallRate => "slow_call_rate",
            Reason::ConsecutiveFailures => "consecutive_failures",
            Reason::WaitElapsed => "wait_elapsed",
            Reason::ProbesSucceeded => "probes_succeeded",
            Reason::ProbesFailed => "probes_failed",
            Reason::ProbeTimeout => "probe_timeout",
            Reason::ForcedOpen => "forced_open",
            Reason::Disabled => "disabled",
            Reason::Reset => "reset",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One state change, as passed to the [`on_transition`] hook.
///
/// [`on_transition`]: super::CircuitBreaker::on_transition
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The state left.
    pub from: State,
    /// The state entered.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// When (the `now` of the call that caused it).
    pub at: Instant,
}

/// A snapshot of a breaker's counters, from [`CircuitBreaker::stats`](super::CircuitBreaker::stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// The stored state (see [`CircuitBreaker::state`](super::CircuitBreaker::state)).
    pub state: State,
    /// Calls in the sliding window.
    pub calls: u64,
    /// Failed calls in the window.
    pub failed_calls: u64,
    /// Slow calls in the window.
    pub slow_calls: u64,
    /// Current run of hard failures.
    pub consecutive_failures: u32,
    /// Opens since the last successful close (drives the backoff).
    pub opens_in_row: u32,
    /// Probes admitted and still running (half-open).
    pub probes_in_flight: u32,
    /// Probes completed in the current or last half-open period.
    pub probes_completed: u32,
    /// Of those, probes that failed (a timed-out probe counts as failed).
    pub probes_failed: u32,
    /// Calls refused since the breaker was built.
    pub rejected_calls: u64,
}

impl Stats {
    /// Failure rate of the window in percent, `None` when it is empty.
    pub fn failure_rate(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.failed_calls as f64 * 100.0 / self.calls as f64)
    }

    /// Slow-call rate of the window in percent, `None` when it is empty.
    pub fn slow_call_rate(&self) -> Option<f64> {
        (self.calls > 0).then(|| self.slow_calls as f64 * 100.0 / self.calls as f64)
    }
}
