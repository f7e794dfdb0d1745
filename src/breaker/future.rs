//! [`ResponseFuture`] of the [`CircuitBreakerService`](super::CircuitBreakerService).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tokio::time::Instant;

use super::{CircuitOpen, Error, OwnedPermit};
use crate::classify::Classify;

pin_project! {
    /// The response future of a
    /// [`CircuitBreakerService`](super::CircuitBreakerService): the inner
    /// call, whose outcome is recorded on completion, or an immediate
    /// [`Error::Open`].
    pub struct ResponseFuture<F, C> {
        #[pin]
        kind: Kind<F, C>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, C> {
        Called {
            #[pin]
            fut: F,
            permit: Option<OwnedPermit>,
            start: Instant,
            classify: C,
        },
        Refused {
            open: CircuitOpen,
        },
    }
}

impl<F, C> ResponseFuture<F, C> {
    pub(crate) fn called(fut: F, permit: OwnedPermit, start: Instant, classify: C) -> Self {
        Self {
            kind: Kind::Called {
                fut,
                permit: Some(permit),
                start,
                classify,
            },
        }
    }

    pub(crate) fn refused(open: CircuitOpen) -> Self {
        Self {
            kind: Kind::Refused { open },
        }
    }
}

impl<F, C, T, E> Future for ResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    C: Classify<T, E>,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Called {
                fut,
                permit,
                start,
                classify,
            } => {
                let res = ready!(fut.poll(cx));
                if let Some(permit) = permit.take() {
                    let now = crate::scope::now();
                    let latency = crate::time::elapsed(*start, now);
                    permit.record(classify.classify(res.as_ref(), latency), latency, now);
                }
                Poll::Ready(res.map_err(Error::Inner))
            }
            KindProj::Refused { open } => Poll::Ready(Err(Error::Open(*open))),
        }
    }
}

impl<F, C> std::fmt::Debug for ResponseFuture<F, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResponseFuture")
    }
}
