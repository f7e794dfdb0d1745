use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tokio::time::Instant;

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
            start: Instant,
            classify: C,
        },
        Failed {
            error: Option<Error<E>>,
        },
    }
}

impl<F, E, C> ResponseFuture<F, E, C> {
    pub(crate) fn running(fut: F, guard: InFlight, start: Instant, classify: C) -> Self {
        Self {
            state: State::Running {
                fut,
                guard: Some(guard),
                start,
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
                start,
                classify,
            } => {
                let res = ready!(fut.poll(cx));
                if let Some(guard) = guard.take() {
                    let now = Instant::now();
                    let latency = now.saturating_duration_since(*start);
                    let outcome = classify.classify(res.as_ref(), latency);
                    guard.complete(outcome, latency, now);
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
