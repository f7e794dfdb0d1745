//! [`ResponseFuture`]: drives the picked endpoint's call and records it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::classify::Classify;
use crate::endpoint::InFlight;
use crate::error::Error;

pin_project! {
    /// The response future of [`Balance`](crate::Balance).
    ///
    /// Holds the picked endpoint's in-flight slot. When the call completes,
    /// its latency and outcome are recorded and the slot released. When the
    /// balancer's [`timeout`](crate::balance::Builder::timeout) passes first,
    /// the call is dropped, recorded as a `Timeout` failure of its endpoint,
    /// and the future fails with [`Error::Timeout`]. When the future is
    /// dropped first (its caller gave up, a lost hedge), the slot is
    /// released and the time the call waited is recorded as a lower bound
    /// on the endpoint's latency, nothing else.
    pub struct ResponseFuture<F, E, C> {
        #[pin]
        state: State<F, E, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, E, C> {
        Running {
            #[pin]
            fut: F,
            guard: Option<InFlight>,
            classify: C,
            #[pin]
            deadline: Option<Sleep>,
        },
        Failed {
            error: Option<Error<E>>,
        },
    }
}

impl<F, E, C> ResponseFuture<F, E, C> {
    pub(crate) fn running(fut: F, guard: InFlight, classify: C, deadline: Option<Instant>) -> Self {
        Self {
            state: State::Running {
                fut,
                guard: Some(guard),
                classify,
                deadline: deadline.map(tokio::time::sleep_until),
            },
        }
    }

    pub(crate) fn failed(error: Error<E>) -> Self {
        Self {
            state: State::Failed { error: Some(error) },
        }
    }
}

impl<F, T, E, C> Future for ResponseFuture<F, E, C>
where
    F: Future<Output = Result<T, E>>,
    C: Classify<T, E>,
{
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        match this.state.as_mut().project() {
            StateProj::Running {
                fut,
                guard,
                classify,
                deadline,
            } => {
                let res = match fut.poll(cx) {
                    Poll::Ready(res) => res,
                    Poll::Pending => {
                        ready!(match deadline.as_pin_mut() {
                            Some(sleep) => sleep.poll(cx),
                            None => Poll::Pending,
                        });
                        if let Some(guard) = guard.take() {
                            guard.time_out();
                        }
                        // Drops the call, after its slot is recorded.
                        this.state.set(State::Failed { error: None });
                        return Poll::Ready(Err(Error::Timeout));
                    }
                };
                if let Some(guard) = guard.take() {
                    guard.finish(|latency| classify.classify(res.as_ref(), latency));
                }
                Poll::Ready(res.map_err(Error::Inner))
            }
            StateProj::Failed { error } => match error.take() {
                Some(e) => Poll::Ready(Err(e)),
                // Polled again after completion: fail rather than panic.
                None => Poll::Ready(Err(Error::AllUnavailable(Default::default()))),
            },
        }
    }
}
