use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use crate::classify::Classify;
use crate::endpoint::InFlight;
use crate::error::Error;

pin_project! {
    /// The response future of [`Balance`](crate::Balance).
    ///
    /// Holds the picked endpoint's in-flight slot: when the call completes,
    /// its latency and outcome are recorded and the slot is released; when
    /// the future is dropped first (cancellation, timeout), the slot is
    /// released and nothing is recorded.
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
        },
        Failed {
            error: Option<Error<E>>,
        },
    }
}

impl<F, E, C> ResponseFuture<F, E, C> {
    pub(crate) fn running(fut: F, guard: InFlight, classify: C) -> Self {
        Self {
            state: State::Running {
                fut,
                guard: Some(guard),
                classify,
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
        match self.project().state.project() {
            StateProj::Running {
                fut,
                guard,
                classify,
            } => {
                let res = ready!(fut.poll(cx));
                if let Some(guard) = guard.take() {
                    guard.finish(|latency| classify.classify(res.as_ref(), latency));
                }
                Poll::Ready(res.map_err(Error::Inner))
            }
            StateProj::Failed { error } => match error.take() {
                Some(e) => Poll::Ready(Err(e)),
                // Polled again after completion: report the same kind of
                // failure rather than panic.
                None => Poll::Ready(Err(Error::AllUnavailable)),
            },
        }
    }
}
