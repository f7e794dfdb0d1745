//! Retries within a budget, with backoff, deadlines and hedging.
//!
//! [`RetryLayer`] goes above a [`Balance`](crate::Balance) (or any
//! `S: Service<Req> + Clone`). For each request it:
//!
//! 1. **deposits** into the shared retry [`Budget`] and, if the request may
//!    be replayed ([`Replay`]; by default only idempotent HTTP methods with a
//!    `Clone` body), keeps a copy for later attempts;
//! 2. sends the first attempt; the [classifier](crate::classify::Classify)
//!    judges its result. Success, a client error, an `Ignore`d or merely
//!    `Slow` result is returned as is;
//! 3. on a hard failure (an error, 5xx, 429, a per-try timeout) it retries
//!    while attempts remain (default 3 in all), the overall deadline allows,
//!    and the budget grants a withdrawal; before each retry it waits a
//!    [`Backoff`] with full jitter, or the server's `Retry-After` if longer
//!    (capped at `max_retry_after`);
//! 4. **never retries on an endpoint it already tried while another is
//!    available**: every call into the inner service runs inside
//!    [`call_avoiding`](crate::balance::call_avoiding) with the ids tried
//!    so far, which the balancer's pick honours;
//! 5. optionally **hedges**: if the attempt has not answered after the
//!    [`Hedge`] delay (fixed, or a percentile of recent latency), one extra
//!    attempt goes to another endpoint; the first good answer wins and the
//!    other call is dropped (cancelled; the balancer's in-flight slot is
//!    released on drop). A hedge withdraws from the same budget; with the
//!    budget empty, no hedge is sent.
//!
//! When it gives up, a final failing *response* (the last 503) is returned as
//! `Ok`, and a final error as a typed [`Error`] saying why it stopped.
//! [`RetryStats`] counts retries, hedges, budget exhaustions and timeouts.
//!
//! The layer classifies results with the classifier of the balancer below
//! it ([`Inherit`](crate::classify::Inherit), the default), so HTTP and
//! gRPC stacks set their classifier once, on the balancer; the classifier's
//! [`advise`](crate::classify::Classify::advise) says what to retry (gRPC:
//! the retryable codes and `grpc-retry-pushback-ms`, gRPC A6). Over a
//! service that is not a `Balance`, set one with [`Builder::classify`].
//!
//! Request bodies are kept for later attempts as [`Replay`] says: clones of
//! bodies that are values, a record of streaming bodies up to 256 KiB
//! ([`Replayable::limit`]); a request whose body outgrew the record is not
//! retried ([`RetryStats::not_replayable`]). A request's own deadline
//! (gRPC's `grpc-timeout`) bounds it when shorter than the layer's, and
//! each later attempt is told the time left of whichever is shorter
//! ([`Replay::prepare`]: for HTTP, `grpc-timeout` is rewritten when the
//! request carries one; none is added).
//!
//! Timers use tokio (`tokio::time`), so retries, timeouts and hedging need a
//! tokio runtime with time enabled; a request that succeeds at once never
//! touches a timer.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//! use tower::{Layer, Service, ServiceExt, service_fn};
//! use tower_lb::{Balance, pick, retry::{self, RetryLayer}};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let calls = Arc::new(AtomicUsize::new(0));
//! let flaky = {
//!     let calls = calls.clone();
//!     service_fn(move |req: u32| {
//!         let n = calls.fetch_add(1, Ordering::Relaxed);
//!         async move { if n == 0 { Err(std::io::Error::other("boom")) } else { Ok(req * 2) } }
//!     })
//! };
//! let lb = Balance::builder()
//!     .picker(pick::RoundRobin::new())
//!     .endpoint("a", flaky.clone())
//!     .endpoint("b", flaky)
//!     .build()?;
//! let layer = RetryLayer::builder()
//!     .replay(retry::CloneRequest)              // u32 requests: retry any of them
//!     .per_try_timeout(Duration::from_millis(500))
//!     .build()?;
//! let mut svc = layer.layer(lb);
//! assert_eq!(svc.ready().await?.call(21).await?, 42);
//! assert_eq!(layer.stats().retries(), 1);
//! # Ok(()) }
//! ```

mod attempt;
mod backoff;
mod budget;
mod error;
mod future;
mod hedge;
mod layer;
#[cfg(feature = "metrics")]
mod metrics;
mod replay;
mod service;
mod stats;

pub use backoff::{Backoff, DEFAULT_BASE, DEFAULT_CAP};
pub use budget::{Budget, DEFAULT_MIN_PER_SEC, DEFAULT_RATIO, DEFAULT_TTL};
pub use error::Error;
pub use future::ResponseFuture;
pub use hedge::{
    DEFAULT_HEDGE_MAX_DELAY, DEFAULT_HEDGE_MIN_DELAY, DEFAULT_HEDGE_MIN_SAMPLES,
    DEFAULT_HEDGE_PERCENTILE, DEFAULT_HEDGES, HEDGE_WINDOW, Hedge,
};
pub use layer::{Builder, ClassifyWith, DEFAULT_MAX_ATTEMPTS, MAX_ATTEMPTS, RetryLayer};
#[cfg(feature = "http")]
pub use replay::{
    Buffered, KeptBody, KeptRequest, encode_grpc_timeout, grpc_timeout, is_idempotent,
};
pub use replay::{
    CloneRequest, DEFAULT_REPLAY_LIMIT, MAX_REPLAY_LIMIT, Replay, ReplayRequest, Replayable,
    RequestBody,
};
pub use service::Retry;
pub use stats::RetryStats;
