//! Errors as `tonic::Status`: what a tonic caller sees when the balancer or
//! the retry layer, not the server, ends a call.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tonic::{Code, Status};
use tower_layer::Layer;
use tower_service::Service;

use crate::classify::{FailureKind, error_kind};
use crate::http::ClassifyError;

/// An error that has a gRPC status: the balancer's, the retry layer's,
/// tonic's transport errors and statuses.
///
/// | error | code |
/// |---|---|
/// | a balancer refusal (no endpoints, all capped, all unavailable, panic) | `UNAVAILABLE` (gRPC's own client-side balancers answer so) |
/// | the balancer's timeout; the retry layer's deadline or per-try timeout with no answer | `DEADLINE_EXCEEDED` |
/// | a retry budget exhausted after a timeout | `UNAVAILABLE` |
/// | an endpoint's error, or the last attempt's | that error's status |
/// | a transport error | tonic's mapping (`Status::from_error`: connect errors are `UNAVAILABLE`) |
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no gRPC status",
    note = "implement `tower_lb::grpc::IntoStatus` for `{Self}` (one method), or map the error yourself"
)]
pub trait IntoStatus {
    /// The status a tonic caller sees for this error.
    fn into_status(self) -> Status;
}

impl IntoStatus for Status {
    fn into_status(self) -> Status {
        self
    }
}

impl IntoStatus for tonic::transport::Error {
    fn into_status(self) -> Status {
        Status::from_error(Box::new(self))
    }
}

impl IntoStatus for Box<dyn std::error::Error + Send + Sync> {
    fn into_status(self) -> Status {
        Status::from_error(self)
    }
}

impl<E: IntoStatus> IntoStatus for crate::error::Error<E> {
    fn into_status(self) -> Status {
        match self {
            crate::error::Error::Inner(e) => e.into_status(),
            crate::error::Error::Timeout => Status::deadline_exceeded(self.to_string_lossy()),
            refused => Status::unavailable(refused.to_string_lossy()),
        }
    }
}

impl<E: IntoStatus> IntoStatus for crate::retry::Error<E> {
    fn into_status(self) -> Status {
        let timeout = self.is_timeout();
        let attempts = self.attempts();
        match self.into_inner() {
            Some(e) => e.into_status(),
            None if timeout => {
                Status::deadline_exceeded(format!("no answer in time after {attempts} attempt(s)"))
            }
            None => Status::unavailable(format!("gave up after {attempts} attempt(s)")),
        }
    }
}

impl<E> crate::error::Error<E> {
    /// The message of a balancer error (the inner error's is its own).
    fn to_string_lossy(&self) -> String {
        match self {
            crate::error::Error::NoEndpoints => "no endpoints to balance over".into(),
            crate::error::Error::Overloaded => "every endpoint is at its in-flight cap".into(),
            crate::error::Error::AllUnavailable(u) => u.to_string(),
            crate::error::Error::Panic => "too few healthy endpoints (panic threshold)".into(),
            crate::error::Error::Timeout => "the call timed out (the balancer's timeout)".into(),
            crate::error::Error::Inner(_) => "endpoint failed".into(),
        }
    }
}

/// Transport errors, for the classifiers' error hook: refused, reset or
/// unreachable connections found in the source chain are `Connect`,
/// timeouts `Timeout` ([`error_kind`]).
impl ClassifyError for tonic::transport::Error {
    fn failure_kind(&self) -> FailureKind {
        error_kind(self)
    }
}

/// Statuses as errors (from a service below the balancer that answers
/// with them): `UNAVAILABLE` is a connect failure, `DEADLINE_EXCEEDED` a
/// timeout, anything else an error.
impl ClassifyError for Status {
    fn failure_kind(&self) -> FailureKind {
        status_kind(self)
    }
}

fn status_kind(status: &Status) -> FailureKind {
    match status.code() {
        Code::Unavailable => FailureKind::Connect,
        Code::DeadlineExceeded => FailureKind::Timeout,
        _ => FailureKind::Error,
    }
}

/// Turns a service's errors into [`Status`]es ([`IntoStatus`]), so that a
/// tonic client over the stack sees `UNAVAILABLE` for "no endpoint", not
/// `UNKNOWN`. Put it on top: `ServiceBuilder::new().layer(StatusLayer)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatusLayer;

impl<S> Layer<S> for StatusLayer {
    type Service = ToStatus<S>;

    fn layer(&self, inner: S) -> ToStatus<S> {
        ToStatus { inner }
    }
}

/// The service of [`StatusLayer`].
#[derive(Debug, Clone)]
pub struct ToStatus<S> {
    inner: S,
}

impl<S> ToStatus<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, Req> Service<Req> for ToStatus<S>
where
    S: Service<Req>,
    S::Error: IntoStatus,
{
    type Response = S::Response;
    type Error = Status;
    type Future = StatusFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        self.inner.poll_ready(cx).map_err(IntoStatus::into_status)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        StatusFuture {
            inner: self.inner.call(req),
        }
    }
}

pin_project! {
    /// The response future of [`ToStatus`].
    pub struct StatusFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F, T, E> Future for StatusFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: IntoStatus,
{
    type Output = Result<T, Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(ready!(self.project().inner.poll(cx)).map_err(IntoStatus::into_status))
    }
}
