//! Circuit breaking: stop calling a backend that keeps failing, probe it
//! now and then, and resume when it answers again.
//!
//! [`CircuitBreaker`] is the state machine (used per endpoint inside the
//! balancer, or on its own); [`CircuitBreakerLayer`] puts one in front of any
//! tower service, which then fails fast with [`Error::Open`] while the
//! breaker is open and never calls the inner service.
//!
//! # The rules (Resilience4j's, with a bounded half-open state)
//!
//! * **Closed.** Every completed call is recorded in a sliding window: the
//!   last N calls ([`count_window`]) or the last T seconds in one-second
//!   buckets ([`time_window`]). Once the window holds at least
//!   [`minimum_calls`], the breaker opens when the **failure rate** (failed /
//!   calls) reaches [`failure_rate_threshold`] or the **slow-call rate**
//!   (slow / calls) reaches [`slow_call_rate_threshold`]. Optionally it also
//!   opens on [`consecutive_failures`] hard failures in a row, however few
//!   calls the window holds.
//! * **What counts.** [`Outcome::Success`] is a success,
//!   [`Outcome::Failure`] a failure, [`Outcome::Ignore`] nothing at all (for
//!   a probe, it frees the slot). A call is *slow* when it took at least
//!   [`slow_call_duration`] or was classified `Failure(FailureKind::Slow)`.
//!   A `FailureKind::Slow` call counts toward the slow-call rate only, **not**
//!   the failure rate: it is a success that took too long, and counting it
//!   twice would let the failure threshold (50 % by default) trip on
//!   slowness long before the slow-call threshold (100 %) the user set for
//!   it. A hard failure that was also slow counts in both rates, as in
//!   Resilience4j. Only hard failures extend a run of consecutive failures;
//!   any other recorded outcome ends it.
//! * **Open.** Calls are refused with [`CircuitOpen`] (which carries the time
//!   left) for a wait that starts at [`open_wait`] and backs off
//!   exponentially, with [`Jitter`], up to [`open_wait_cap`] on each
//!   consecutive re-open; a successful close (or [`reset`]) restarts it.
//! * **Half-open.** After the wait, exactly [`half_open_probes`] calls are
//!   admitted (exact under any concurrency; a probe whose caller gives up
//!   frees its slot). When all have completed, the breaker closes with an
//!   empty window if their failure and slow-call rates are below the
//!   thresholds, and opens again (with a longer wait) otherwise. A probe
//!   still running [`half_open_timeout`] after its admission counts as
//!   failed and reopens the breaker at once.
//! * **Forced open / disabled.** [`force_open`] refuses every call,
//!   [`disable`] admits every call and records nothing, both until
//!   [`reset`].
//!
//! There is no background task: time-driven transitions (end of the open
//! wait, probe timeouts) happen lazily, when the next call asks or a result
//! is recorded. Outcomes count only in the state period that admitted the
//! call: a call admitted while closed and completing after the breaker
//! opened changes nothing.
//!
//! # Observing it
//!
//! [`CircuitBreaker::state`], [`transitions_to`] (a counter per target state),
//! [`stats`] (window and probe counts) and the [`on_transition`] hook, which
//! receives every [`Transition`] with its [`Reason`] and time.
//!
//! # Cost
//!
//! A state check is one atomic load. Admission in the closed state is one
//! atomic load; recording takes one lock, uncontended unless many threads
//! complete calls on the same breaker at once, except for a success while
//! the window holds nothing but successes (a full count window), which
//! changes nothing and is two atomic loads. A refusal takes no lock
//! unless it causes a transition (end of the wait, an overdue probe).
//!
//! # Example: the layer
//!
//! ```
//! use std::time::Duration;
//! use tower::{Service, ServiceExt, service_fn};
//! use tower_lb::breaker::{CircuitBreakerConfig, CircuitBreakerLayer, Jitter, State};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = CircuitBreakerConfig::builder()
//!     .failure_rate_threshold(50.0)          // percent
//!     .slow_call_duration(Duration::from_secs(2))
//!     .count_window(20)
//!     .minimum_calls(4)
//!     .consecutive_failures(5)
//!     .open_wait(Duration::from_secs(5))     // 5 s, then up to 10, 20, … ≤ 60 s
//!     .open_wait_cap(Duration::from_secs(60))
//!     .jitter(Jitter::Equal)
//!     .half_open_probes(3)
//!     .half_open_timeout(Duration::from_secs(10))
//!     .build()?;
//! let layer = CircuitBreakerLayer::new(config);
//! let breaker = layer.breaker().clone();
//!
//! let backend = service_fn(|fail: bool| async move {
//!     if fail { Err(std::io::Error::other("backend down")) } else { Ok("ok") }
//! });
//! let mut svc = tower::ServiceBuilder::new().layer(layer).service(backend);
//!
//! for _ in 0..4 {
//!     let _ = svc.ready().await?.call(true).await; // four failures of four calls
//! }
//! assert_eq!(breaker.state(), State::Open);
//! let err = svc.ready().await?.call(false).await.unwrap_err();
//! assert!(err.is_open()); // refused without calling the backend
//! # Ok(()) }
//! ```
//!
//! # Example: the state machine on its own
//!
//! ```
//! use std::time::Duration;
//! use tokio::time::Instant;
//! use tower_lb::breaker::{CircuitBreaker, CircuitBreakerConfig, State};
//! use tower_lb::classify::{FailureKind, Outcome};
//!
//! # fn main() -> Result<(), tower_lb::ConfigError> {
//! let breaker = CircuitBreaker::new(
//!     CircuitBreakerConfig::builder().count_window(10).minimum_calls(2).build()?,
//! )
//! .on_transition(|t| println!("breaker {} -> {} ({:?})", t.from, t.to, t.reason));
//!
//! for _ in 0..2 {
//!     let now = Instant::now();
//!     if let Ok(permit) = breaker.try_acquire(now) {
//!         // ... make the call, then report it:
//!         permit.record(Outcome::Failure(FailureKind::Timeout), Duration::from_millis(5), now);
//!     }
//! }
//! assert_eq!(breaker.state(), State::Open);
//! assert!(!breaker.is_call_permitted(Instant::now()));
//! # Ok(()) }
//! ```
//!
//! [`count_window`]: config::Builder::count_window
//! [`time_window`]: config::Builder::time_window
//! [`minimum_calls`]: config::Builder::minimum_calls
//! [`failure_rate_threshold`]: config::Builder::failure_rate_threshold
//! [`slow_call_rate_threshold`]: config::Builder::slow_call_rate_threshold
//! [`consecutive_failures`]: config::Builder::consecutive_failures
//! [`slow_call_duration`]: config::Builder::slow_call_duration
//! [`open_wait`]: config::Builder::open_wait
//! [`open_wait_cap`]: config::Builder::open_wait_cap
//! [`half_open_probes`]: config::Builder::half_open_probes
//! [`half_open_timeout`]: config::Builder::half_open_timeout
//! [`force_open`]: CircuitBreaker::force_open
//! [`disable`]: CircuitBreaker::disable
//! [`reset`]: CircuitBreaker::reset
//! [`transitions_to`]: CircuitBreaker::transitions_to
//! [`stats`]: CircuitBreaker::stats
//! [`on_transition`]: CircuitBreaker::on_transition
//! [`Outcome::Success`]: crate::classify::Outcome::Success
//! [`Outcome::Failure`]: crate::classify::Outcome::Failure
//! [`Outcome::Ignore`]: crate::classify::Outcome::Ignore

mod backoff;
pub mod config;
mod error;
mod future;
// The layer, its service and future classify their answers
// (`crate::classify`), which hands classifiers the endpoint's `Completion`:
// the one import in src/ that runs from a lower folder up (breaker's state
// machine sits below the endpoint model, which keeps one per endpoint). Moving
// them out of this folder would move `breaker::CircuitBreakerLayer`.
mod layer;
mod machine;
mod permit;
mod service;
mod state;
mod window;

pub use config::{CircuitBreakerConfig, Jitter, SlidingWindow};
pub use error::{CircuitOpen, Error};
pub use future::ResponseFuture;
pub use layer::CircuitBreakerLayer;
pub use machine::CircuitBreaker;
pub(crate) use permit::Ticket;
pub use permit::{OwnedPermit, Permit, PermitOf};
pub use service::CircuitBreakerService;
pub use state::{Reason, State, Stats, Transition};
