//! [`CircuitBreakerService`]: fails fast while the breaker is open.

use std::sync::Arc;
use std::task::{Context, Poll};

use tower_service::Service;

use super::future::ResponseFuture;
use super::{CircuitBreaker, Error};
use crate::classify::{Classify, ErrIsFailure};

/// A service guarded by a [`CircuitBreaker`].
///
/// `poll_ready` is the inner service's. `call` asks the breaker first: when
/// it refuses, the response future fails at once with
/// [`Error::Open`] and the inner service is **not** called; otherwise the
/// call goes through and its outcome (from the classifier `C`) and latency
/// (measured from `call` to completion) are recorded when it completes. A
/// response future dropped before completion records nothing and frees its
/// half-open probe slot.
#[derive(Debug, Clone)]
pub struct CircuitBreakerService<S, C = ErrIsFailure> {
    inner: S,
    breaker: Arc<CircuitBreaker>,
    classify: C,
}

impl<S> CircuitBreakerService<S> {
    /// Guards `inner` with `breaker`, classifying `Err` as failure.
    pub fn new(inner: S, breaker: Arc<CircuitBreaker>) -> Self {
        Self {
            inner,
            breaker,
            classify: ErrIsFailure,
        }
    }
}

impl<S, C> CircuitBreakerService<S, C> {
    /// Sets the classifier that turns results into outcomes.
    pub fn classify<C2>(self, classify: C2) -> CircuitBreakerService<S, C2> {
        CircuitBreakerService {
            inner: self.inner,
            breaker: self.breaker,
            classify,
        }
    }

    /// The breaker.
    pub fn breaker(&self) -> &Arc<CircuitBreaker> {
        &self.breaker
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, C, Req> Service<Req> for CircuitBreakerService<S, C>
where
    S: Service<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Response = S::Response;
    type Error = Error<S::Error>;
    type Future = ResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::Inner)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // A retry layer above has read the clock already; the balancer
        // below reads this reading.
        let reading = crate::scope::reading().unwrap_or_else(crate::time::Reading::runtime);
        let now = reading.at;
        match self.breaker.try_acquire_owned(now) {
            Ok(permit) => {
                let fut = crate::scope::at(reading, || self.inner.call(req));
                ResponseFuture::called(fut, permit, now, self.classify.clone())
            }
            Err(open) => ResponseFuture::refused(open),
        }
    }
}
