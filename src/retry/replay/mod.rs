//! Which requests may be sent again, how to copy them, and how long a
//! request may take.
//!
//! | request | default policy ([`Replayable`]) replays | how |
//! |---|---|---|
//! | `http::Request<B>`, `B` a clone-able body (`Full<Bytes>`, `String`, `Bytes`, `()`...) | idempotent methods, and every gRPC call | a clone |
//! | `http::Request<B>`, `B` a streaming body (`tonic::body::Body`, `BoxBody`, `UnsyncBoxBody`) | the same, while the body fits the buffer (default 256 KiB, gRPC A6's per-call buffer) | the body is recorded as the first attempt sends it and replayed from the record |
//! | `reqwest::Request` (feature `reqwest`) | idempotent methods | `Request::try_clone` (`None` for a stream body) |
//! | any [`ReplayRequest`] of yours | what its `is_idempotent` says | its `try_clone` |
//! | anything `Clone` | every request, with [`CloneRequest`] | a clone |
//! | anything | what a closure `Fn(&Req) -> Option<Req>` returns | the closure |
//!
//! A body past the buffer's limit is sent on as it comes and the request is
//! not retried; the layer counts it in
//! [`RetryStats::not_replayable`](super::RetryStats::not_replayable).
//! gRPC calls (content type `application/grpc...`) are POSTs; whether they
//! are retried is the classifier's call (gRPC A6's retryable codes), not
//! the method's.

mod body;
#[cfg(feature = "http")]
mod buffered;
#[cfg(feature = "http")]
mod http;

use std::time::Duration;

pub use body::RequestBody;
#[cfg(feature = "http")]
pub use buffered::{Buffered, KeptBody};
#[cfg(feature = "http")]
pub use http::{KeptRequest, encode_grpc_timeout, grpc_timeout, is_idempotent};

/// The default limit of a request body kept for replay: 256 KiB, gRPC A6's
/// default per-call retry buffer.
pub const DEFAULT_REPLAY_LIMIT: usize = 256 * 1024;

/// The largest replay limit a builder accepts: 64 MiB. A larger buffer per
/// call is memory a retry storm multiplies.
pub const MAX_REPLAY_LIMIT: usize = 64 * 1024 * 1024;

/// A request that may be able to copy itself for a retry (for requests that
/// are not `http::Request`s: `http::Request<B>` is replayed through its
/// body's [`RequestBody`] impl).
///
/// Implemented for `reqwest::Request` (feature `reqwest`).
#[diagnostic::on_unimplemented(
    message = "the retry layer cannot copy a `{Self}` to send it again",
    note = "implement `tower_lb::retry::ReplayRequest` for `{Self}`, or give the layer a policy: `.replay(tower_lb::retry::CloneRequest)` for a `Clone` request, or a closure `.replay(|r: &{Self}| Some(r.clone()))`; for HTTP, the body type must implement `tower_lb::retry::RequestBody`"
)]
pub trait ReplayRequest: Sized {
    /// A copy of this request to send again, or `None` if it cannot be
    /// replayed (e.g. its body is a stream).
    fn try_clone(&self) -> Option<Self>;

    /// Whether sending the request twice has the effect of sending it once.
    /// Non-idempotent requests are retried only when the policy opts in.
    fn is_idempotent(&self) -> bool {
        true
    }
}

/// Decides whether a request may be retried (or hedged), keeps what later
/// attempts are copied from, and says how long the request may take.
///
/// The layer calls [`keep`](Self::keep) once per request, before the first
/// attempt, and [`replay`](Self::replay) for each later attempt.
/// Implemented for closures `Fn(&Req) -> Option<Req>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot replay a `{Req}`",
    note = "for a `Clone` request use `.replay(tower_lb::retry::CloneRequest)`; for anything else a closure `.replay(|r: &{Req}| ...)` that returns a copy or `None`"
)]
pub trait Replay<Req>: Send + Sync + 'static {
    /// What later attempts are copied from. It may borrow what the request
    /// borrows: a request with a lifetime (reqwest-middleware's
    /// `http::middleware::Attempt`, which carries the rest of the chain)
    /// is retried too.
    type Kept: Send;

    /// Splits `req` into the request of the first attempt and, if it may be
    /// retried, what later attempts are copied from.
    fn keep(&self, req: Req) -> (Req, Option<Self::Kept>);

    /// A copy for another attempt, or `None` if there can be none (a body
    /// past its buffer's limit, or still being read by another attempt).
    fn replay(&self, kept: &Self::Kept) -> Option<Req>;

    /// How long the whole request may take, if the request says so (for
    /// HTTP, gRPC's `grpc-timeout` header); the layer's
    /// [`deadline`](super::Builder::deadline) applies when it is shorter.
    fn deadline(&self, req: &Req) -> Option<Duration> {
        let _ = req;
        None
    }

    /// Readies the copy a later attempt (a retry or a hedge) is about to
    /// send, with `left` of the call's deadline remaining; called only when
    /// the call has a deadline. The default leaves the copy as it is. For
    /// HTTP, a request that carries gRPC's `grpc-timeout` has it rewritten
    /// to `left` (gRPC A6: every attempt tells the server the time the
    /// call has left, not the time it had at the start).
    fn prepare(&self, req: &mut Req, left: Duration) {
        let _ = (req, left);
    }
}

/// The default [`Replay`] policy: replays idempotent requests (and gRPC
/// calls) that can be copied, unless [`any_method`](Self::any_method) opts
/// in to every method; keeps streaming bodies up to
/// [`limit`](Self::limit) bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayable {
    pub(crate) any_method: bool,
    pub(crate) limit: usize,
}

impl Default for Replayable {
    fn default() -> Self {
        Self::idempotent()
    }
}

impl Replayable {
    /// Replays idempotent requests only (the default).
    pub fn idempotent() -> Self {
        Self {
            any_method: false,
            limit: DEFAULT_REPLAY_LIMIT,
        }
    }

    /// Replays every request that can be copied, POST and PATCH included.
    /// Only for backends that deduplicate (idempotency keys) or requests
    /// that are safe to repeat.
    pub fn any_method() -> Self {
        Self {
            any_method: true,
            ..Self::idempotent()
        }
    }

    /// The most bytes of a streaming request body kept for replay (default
    /// [`DEFAULT_REPLAY_LIMIT`]; a larger value is taken as
    /// [`MAX_REPLAY_LIMIT`], 0 keeps no stream). A longer body is sent on
    /// without being kept, and its request is not retried.
    pub fn limit(mut self, bytes: usize) -> Self {
        self.limit = bytes.min(MAX_REPLAY_LIMIT);
        self
    }

    /// The limit in effect.
    pub fn max_bytes(&self) -> usize {
        self.limit
    }
}

impl<Req: ReplayRequest + Send> Replay<Req> for Replayable {
    type Kept = Req;

    fn keep(&self, req: Req) -> (Req, Option<Req>) {
        let kept = (self.any_method || req.is_idempotent())
            .then(|| req.try_clone())
            .flatten();
        (req, kept)
    }

    fn replay(&self, kept: &Req) -> Option<Req> {
        kept.try_clone()
    }
}

/// A [`Replay`] policy for any `Req: Clone` (non-HTTP requests): every
/// request is retried with a clone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CloneRequest;

impl<Req: Clone + Send> Replay<Req> for CloneRequest {
    type Kept = Req;

    fn keep(&self, req: Req) -> (Req, Option<Req>) {
        let kept = req.clone();
        (req, Some(kept))
    }

    fn replay(&self, kept: &Req) -> Option<Req> {
        Some(kept.clone())
    }
}

impl<Req, F> Replay<Req> for F
where
    F: Fn(&Req) -> Option<Req> + Send + Sync + 'static,
    Req: Send,
{
    type Kept = Req;

    fn keep(&self, req: Req) -> (Req, Option<Req>) {
        let kept = self(&req);
        (req, kept)
    }

    fn replay(&self, kept: &Req) -> Option<Req> {
        self(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closures_and_clone_policy() {
        let never = |_: &u32| None;
        assert!(never.keep(7).1.is_none());
        let (first, kept) = CloneRequest.keep(7u32);
        assert_eq!((first, kept), (7, Some(7)));
        assert_eq!(CloneRequest.replay(&7u32), Some(7));
        let huge = Replayable::idempotent().limit(usize::MAX);
        assert_eq!(huge.max_bytes(), MAX_REPLAY_LIMIT);
        assert_eq!(Replayable::default().max_bytes(), DEFAULT_REPLAY_LIMIT);
    }
}
