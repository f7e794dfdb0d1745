//! The state machine: [`CircuitBreaker`].
//!
//! # Concurrency
//!
//! The state and its generation (a counter bumped on every transition) live
//! in one atomic word, so state checks are a single atomic load. Every
//! transition, every recorded outcome and every half-open admission happens
//! under one `Mutex`, which makes admission exact (no two callers can take
//! the last probe slot) and keeps the window consistent. In the closed state
//! that lock is taken only to record, never to admit; a refused call never
//! takes it, and neither does a success while the window holds nothing but
//! successes (the common case of a healthy endpoint, where recording one
//! changes nothing; see `CircuitBreaker::quiet`). The few numbers a
//! lock-free check needs (end of the open wait, probe slots taken, probe
//! deadline) are mirrored in atomics, written under the lock before the
//! state word is published.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

mod tickets;
mod transitions;

use super::config::CircuitBreakerConfig;
use super::error::CircuitOpen;
use super::permit::{OwnedPermit, Permit};
use super::state::{Reason, State, Stats, Transition};
use super::window::Window;
use crate::rng::RngSource;
use crate::time::Epoch;

type Observer = Box<dyn Fn(Transition) + Send + Sync>;

/// A circuit breaker with Resilience4j semantics and a bounded half-open
/// state; see the [module docs](super) for the rules.
///
/// `Send + Sync`: share it by reference or `Arc`. Querying is a couple of
/// atomic loads and never blocks.
pub struct CircuitBreaker {
    config: CircuitBreakerConfig,
    epoch: Epoch,
    /// `generation << 3 | state`; written only under `inner`.
    word: AtomicU64,
    /// Closed, and a success would change nothing: its window is full of
    /// successes that were not slow ([`Window::is_quiet`]). Written under
    /// `inner` after each record in the closed state, cleared by every
    /// transition before the new state is published. While it holds, a
    /// success is recorded by not taking the lock at all: the call it
    /// evicts is one like it, the totals stay, and a success cannot trip
    /// the breaker. Racing a failure, the skipped success counts as
    /// recorded just before it, which the window cannot tell apart. The
    /// lock and the window were a large share of the whole stack's cost
    /// per request (measured: see docs/performance.md).
    quiet: AtomicBool,
    /// End of the open wait, ns since `epoch`.
    open_until: AtomicU64,
    /// Probe slots taken (running or completed) in this half-open period.
    probes_taken: AtomicU32,
    /// When the oldest running probe times out, ns since `epoch`.
    probe_deadline: AtomicU64,
    rejected: AtomicU64,
    entered: [AtomicU64; 5],
    inner: Mutex<Inner>,
    rng: RngSource,
    observer: Option<Observer>,
}

#[derive(Debug)]
struct Inner {
    window: Window,
    consecutive: u32,
    opens_in_row: u32,
    probes: Probes,
}

#[derive(Debug, Default)]
struct Probes {
    /// `(id, admitted at ns)` of the probes still running.
    running: Vec<(u64, u64)>,
    next_id: u64,
    completed: u32,
    failed: u32,
    slow: u32,
}

impl Probes {
    fn taken(&self) -> u32 {
        self.running.len() as u32 + self.completed
    }
}

const STATE_BITS: u32 = 3;

fn pack(generation: u64, state: State) -> u64 {
    (generation << STATE_BITS) | state as u64
}

fn unpack(word: u64) -> (u64, State) {
    let state = match word & ((1 << STATE_BITS) - 1) {
        0 => State::Closed,
        1 => State::Open,
        2 => State::HalfOpen,
        3 => State::ForcedOpen,
        _ => State::Disabled,
    };
    (word >> STATE_BITS, state)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `part / total ≥ percent / 100`, exact for integer percentages.
fn reaches(part: u64, total: u64, percent: f64) -> bool {
    total > 0 && part as f64 * 100.0 >= percent * total as f64
}

impl CircuitBreaker {
    /// A closed breaker. Its clock starts at `Instant::now()` (tokio's, so a
    /// paused test clock applies).
    pub fn new(config: CircuitBreakerConfig) -> Self {
        Self {
            epoch: Epoch::new(Instant::now()),
            word: AtomicU64::new(pack(0, State::Closed)),
            quiet: AtomicBool::new(false),
            open_until: AtomicU64::new(0),
            probes_taken: AtomicU32::new(0),
            probe_deadline: AtomicU64::new(u64::MAX),
            rejected: AtomicU64::new(0),
            entered: Default::default(),
            inner: Mutex::new(Inner {
                window: Window::new(config.window),
                consecutive: 0,
                opens_in_row: 0,
                probes: Probes::default(),
            }),
            rng: RngSource::new(config.seed),
            observer: None,
            config,
        }
    }

    /// Calls `f` after every transition, outside the breaker's lock, on the
    /// thread that caused it. Transitions racing on two threads may reach
    /// `f` out of order; [`Transition::at`] and [`transitions_to`] are
    /// authoritative. Keep `f` short (log, bump a metric).
    ///
    /// [`transitions_to`]: CircuitBreaker::transitions_to
    pub fn on_transition(mut self, f: impl Fn(Transition) + Send + Sync + 'static) -> Self {
        self.observer = Some(Box::new(f));
        self
    }

    /// The configuration.
    pub fn config(&self) -> &CircuitBreakerConfig {
        &self.config
    }

    /// The stored state: one atomic load.
    ///
    /// Time-driven transitions happen lazily, on the next
    /// [`try_acquire`](Self::try_acquire) or [`Permit::record`]: a breaker
    /// whose open wait has elapsed still reads `Open` until a call comes.
    /// Use [`is_call_permitted`](Self::is_call_permitted) to ask whether a
    /// call would get through now.
    #[inline]
    pub fn state(&self) -> State {
        unpack(self.word.load(Ordering::Acquire)).1
    }

    /// Whether [`try_acquire`](Self::try_acquire) at `now` would succeed, with
    /// no side effect (a picker may ask for every candidate). One atomic load
    /// in the closed and disabled states, three in the others.
    ///
    /// An overdue half-open probe reads as "not permitted" here and moves
    /// the breaker back to open at the next `try_acquire`; a caller that
    /// only asks this should also ask [`is_probe_overdue`](Self::is_probe_overdue)
    /// and then call `try_acquire`, as the balancer does, so the breaker
    /// never stays half-open on a probe that never answers.
    #[inline]
    pub fn is_call_permitted(&self, now: Instant) -> bool {
        match self.state() {
            State::Closed | State::Disabled => true,
            State::ForcedOpen => false,
            State::Open => self.now_ns(now) >= self.open_until.load(Ordering::Acquire),
            State::HalfOpen => {
                self.now_ns(now) < self.probe_deadline.load(Ordering::Acquire)
                    && self.probes_taken.load(Ordering::Acquire) < self.config.half_open_probes
            }
        }
    }

    /// True when the breaker is half-open and a probe has run past
    /// `half_open_timeout` at `now`: the next
    /// [`try_acquire`](Self::try_acquire) reopens it.
    #[inline]
    pub fn is_probe_overdue(&self, now: Instant) -> bool {
        self.state() == State::HalfOpen
            && self.now_ns(now) >= self.probe_deadline.load(Ordering::Acquire)
    }

    /// In the open state, how long until the breaker admits a probe at
    /// `now` (zero once the wait is over); `None` in the other states.
    pub fn time_until_permitted(&self, now: Instant) -> Option<Duration> {
        (self.state() == State::Open).then(|| {
            let until = self.open_until.load(Ordering::Acquire);
            Duration::from_nanos(until.saturating_sub(self.now_ns(now)))
        })
    }

    /// Asks to make one call at `now`.
    ///
    /// Closed and disabled: always granted, one atomic load. Open: refused
    /// until the wait has elapsed, then the breaker turns half-open and this
    /// caller takes the first probe slot. Half-open: granted to exactly
    /// `half_open_probes` callers, however many race (slots freed by dropped
    /// permits are granted again). Forced open: refused.
    ///
    /// # Errors
    ///
    /// [`CircuitOpen`] when the call is refused.
    pub fn try_acquire(&self, now: Instant) -> Result<Permit<'_>, CircuitOpen> {
        self.acquire_ticket(now).map(|t| Permit::new(self, t, now))
    }

    /// [`try_acquire`](Self::try_acquire) for a breaker in an `Arc`: the
    /// permit holds a clone of it and can be stored in a future.
    ///
    /// # Errors
    ///
    /// [`CircuitOpen`] when the call is refused.
    pub fn try_acquire_owned(self: &Arc<Self>, now: Instant) -> Result<OwnedPermit, CircuitOpen> {
        self.acquire_ticket(now)
            .map(|t| OwnedPermit::new(Arc::clone(self), t, now))
    }

    /// Opens the breaker until [`reset`](Self::reset), whatever the calls say.
    pub fn force_open(&self) {
        self.manual(State::ForcedOpen, Reason::ForcedOpen);
    }

    /// Lets every call through and records nothing until
    /// [`reset`](Self::reset). The window is emptied.
    pub fn disable(&self) {
        self.manual(State::Disabled, Reason::Disabled);
    }

    /// Closes the breaker with an empty window and the backoff restarted, from
    /// any state. Always reported as a transition (possibly closed → closed).
    pub fn reset(&self) {
        self.manual(State::Closed, Reason::Reset);
    }

    /// How many times the breaker has entered `state` (a counter per
    /// transition target, for metrics).
    pub fn transitions_to(&self, state: State) -> u64 {
        self.entered[state.index()].load(Ordering::Relaxed)
    }

    /// The window and probe counters as seen at `now` (calls that have left a
    /// time window by then are not counted). Takes the lock; O(window
    /// buckets) for a time window, O(1) otherwise.
    pub fn stats(&self, now: Instant) -> Stats {
        let now_ns = self.now_ns(now);
        let inner = self.lock();
        let totals = inner.window.totals_at(now_ns);
        Stats {
            state: self.state(),
            calls: totals.calls,
            failed_calls: totals.failed,
            slow_calls: totals.slow,
            consecutive_failures: inner.consecutive,
            opens_in_row: inner.opens_in_row,
            probes_in_flight: inner.probes.running.len() as u32,
            probes_completed: inner.probes.completed,
            probes_failed: inner.probes.failed,
            rejected_calls: self.rejected.load(Ordering::Relaxed),
        }
    }

    // ---- internals

    fn now_ns(&self, now: Instant) -> u64 {
        self.epoch.nanos(now)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The lock guards no invariant a panic elsewhere could break halfway
        // (observers run outside it), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn refuse(&self, state: State, retry_after: Option<Duration>) -> CircuitOpen {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        CircuitOpen::new(state, retry_after)
    }

    fn emit(&self, event: Option<Transition>) {
        if let (Some(t), Some(f)) = (event, &self.observer) {
            f(t);
        }
    }
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("state", &self.state())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
