//! Response classification: what counts as a failure for an endpoint.
//!
//! [`Balance`](crate::Balance) asks its classifier about every completed call.
//! A failure feeds the endpoint's latency model a penalty sample instead of its
//! (often very short) latency, so a replica that fails in 1 ms does not look
//! fast; it also counts toward the endpoint's failure counters that breakers and
//! outlier ejection read.
//!
//! ## What to use when
//!
//! | You balance | Use | It decides |
//! |---|---|---|
//! | any service | [`ErrIsFailure`] (the default) | `Err` is a failure of kind [`error_kind`] (timeouts and connect errors found in the source chain), `Ok` a success |
//! | your own rule | a closure `Fn(Result<&Res, &E>, Duration) -> Outcome`, or a type implementing [`Classify`] | anything |
//! | HTTP (`http::Response`) | `http::Classifier` (feature `http`) | 5xx and 429 fail (with `Retry-After`), 4xx succeed; errors as above |
//! | HTTP, with your error type | `http::Classifier::on_error` with an `http::ErrorHook`, or implement `http::ClassifyError` for the error | how your errors count |
//!
//! [`FailureKind`] says which failure it was (penalties, breakers,
//! ejection and metrics read it); [`Outcome::Ignore`] keeps a call out of
//! every count.

mod above;

use std::time::Duration;

pub use crate::outcome::{FailureKind, Outcome};
pub use above::{Above, Classified, Inherit, refusal_kind};

use crate::admission::Completion;

/// The longest `Retry-After` hint taken from a response: 30 s. A server may
/// ask for hours; a client-side balancer that obeyed would park requests far
/// beyond any caller's deadline, so longer hints are cut to this (Envoy caps
/// its rate-limited back-off similarly, at 300 s; RPC paths want far less).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// What a result says about sending the request again: the retry layer's
/// question to its classifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Advice {
    /// The result stands: a success, or a failure another attempt cannot
    /// fix. (For hedging, A6's "fatal": outstanding attempts are cancelled.)
    Stop,
    /// Another attempt may help: after the backoff, or after `at_least` if
    /// the server asked for longer (HTTP `Retry-After`).
    Backoff {
        /// The server's back-off hint, if any.
        at_least: Option<std::time::Duration>,
    },
    /// Another attempt may help after exactly this delay, instead of the
    /// backoff (gRPC `grpc-retry-pushback-ms`).
    After(std::time::Duration),
    /// The server asked not to be retried (a negative or malformed gRPC
    /// pushback): no new attempt; attempts already out may still win.
    Refused,
}

impl Advice {
    /// The advice for an outcome when nothing else is known: hard failures
    /// may be retried (honouring their `retry_after`), anything else stands.
    pub fn from_outcome(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Failure(kind) if kind.is_hard() => Advice::Backoff {
                at_least: kind.retry_after(),
            },
            _ => Advice::Stop,
        }
    }
}

/// Decides the [`Outcome`] of a call from its result and duration, how long
/// the call lasts, and whether another attempt may help.
///
/// Implemented for closures `Fn(Result<&Res, &E>, Duration) -> Outcome`.
/// Classifiers are cloned into each response future, so keep them cheap to
/// clone (a unit struct, or an `Arc` inside).
///
/// A classifier of yours that judges a call when it answers needs three
/// lines besides [`classify`](Self::classify):
///
/// ```
/// use std::time::Duration;
/// use tower_lb::classify::{Classify, FailureKind, Outcome};
/// use tower_lb::endpoint::Completion;
///
/// /// Answers over 100 are failures.
/// #[derive(Clone)]
/// struct Over100;
///
/// impl<E> Classify<u32, E> for Over100 {
///     type Response = u32;
///     fn classify(&self, result: Result<&u32, &E>, _: Duration) -> Outcome {
///         match result {
///             Ok(&n) if n <= 100 => Outcome::Success,
///             _ => Outcome::Failure(FailureKind::Error),
///         }
///     }
///     fn complete(&self, response: u32, completion: Completion) -> u32 {
///         completion.finish_at_answer();
///         response
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot classify the results `Result<{Res}, {E}>` of this service",
    note = "for HTTP use `tower_lb::http::Classifier`, for gRPC `tower_lb::grpc::Classifier`; for anything else `ErrIsFailure` or a closure `|result: Result<&{Res}, &{E}>, latency| Outcome::Success`"
)]
pub trait Classify<Res, E>: Clone + Send + Sync + 'static {
    /// What the balancer returns for a `Res`: `Res` itself for classifiers
    /// that judge a call when it answers, or `Res` with its body tracked
    /// (the HTTP and gRPC classifiers).
    type Response;

    /// Classifies one completed call (for a response, its head).
    fn classify(&self, result: Result<&Res, &E>, latency: Duration) -> Outcome;

    /// Hands `response` to the caller with the rest of the call: end the
    /// `completion` now ([`Completion::finish_at_answer`]) or move it into
    /// the response, to be finished when the exchange ends.
    fn complete(&self, response: Res, completion: Completion) -> Self::Response;

    /// Whether another attempt may help, for the retry layer (default:
    /// [`Advice::from_outcome`]).
    fn advise(&self, result: Result<&Res, &E>, outcome: Outcome) -> Advice {
        let _ = result;
        Advice::from_outcome(outcome)
    }
}

/// The default classifier: the inner service's `Err` is a failure, every
/// `Ok` is a success.
#[derive(Debug, Clone, Copy, Default)]
pub struct ErrIsFailure;

impl<Res, E> Classify<Res, E> for ErrIsFailure {
    type Response = Res;

    #[inline]
    fn classify(&self, result: Result<&Res, &E>, _latency: Duration) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure(FailureKind::Error),
        }
    }

    #[inline]
    fn complete(&self, response: Res, completion: Completion) -> Res {
        completion.finish_at_answer();
        response
    }
}

impl<Res, E, F> Classify<Res, E> for F
where
    F: Fn(Result<&Res, &E>, Duration) -> Outcome + Clone + Send + Sync + 'static,
{
    type Response = Res;

    #[inline]
    fn classify(&self, result: Result<&Res, &E>, latency: Duration) -> Outcome {
        self(result, latency)
    }

    #[inline]
    fn complete(&self, response: Res, completion: Completion) -> Res {
        completion.finish_at_answer();
        response
    }
}

/// Walks `error` and its `source()` chain: the first `std::io::Error` of a
/// connection kind (`ConnectionRefused`, `ConnectionReset`,
/// `ConnectionAborted`, `NotConnected`, `AddrNotAvailable`) gives
/// [`FailureKind::Connect`]; an `io::Error` of kind `TimedOut` or a
/// `tokio::time::error::Elapsed` gives [`FailureKind::Timeout`]; anything
/// else is [`FailureKind::Error`]. Cost: one downcast per link of the chain.
pub fn error_kind(error: &(dyn std::error::Error + 'static)) -> FailureKind {
    use std::io::ErrorKind as Io;
    let mut next = Some(error);
    while let Some(e) = next {
        if is_elapsed(e) {
            return FailureKind::Timeout;
        }
        let io = e.downcast_ref::<std::io::Error>();
        if let Some(io) = io {
            match io.kind() {
                Io::TimedOut => return FailureKind::Timeout,
                Io::ConnectionRefused
                | Io::ConnectionReset
                | Io::ConnectionAborted
                | Io::NotConnected
                | Io::AddrNotAvailable
                | Io::HostUnreachable
                | Io::NetworkUnreachable => return FailureKind::Connect,
                _ => {}
            }
        }
        // `io::Error::source` skips the error it wraps; look at that too.
        let wrapped = io
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        next = wrapped.or_else(|| e.source());
    }
    FailureKind::Error
}

/// A timer's "deadline elapsed" error: tokio's, or tower's `timeout` layer's.
fn is_elapsed(e: &(dyn std::error::Error + 'static)) -> bool {
    #[cfg(feature = "http")]
    if e.is::<tower::timeout::error::Elapsed>() {
        return true;
    }
    e.is::<tokio::time::error::Elapsed>()
}
