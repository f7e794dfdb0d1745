//! [`ResponseFuture`]: drives the picked endpoint's call and records it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::admission::InFlight;
use crate::classify::Classify;
use crate::error::Error;

pin_project! {
    /// The response future of [`Balance`](crate::Balance).
    ///
    /// Holds the picked endpoint's in-flight slot. When the call answers,
    /// the classifier judges it and decides how long it lasts: the default
    /// records its latency and outcome and releases the slot at once; the
    /// HTTP and gRPC classifiers hand the slot to the response body, which
    /// holds it until the body ends, errs or is dropped (see
    /// [`Completion`](crate::endpoint::Completion)). When the
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
            deadline: Deadline,
        },
        Failed {
            error: Option<Error<E>>,
        },
    }
}

/// The balancer's timeout for one call: its instant, and the timer, made
/// the first time the call is pending.
///
/// The timer is boxed, so the future stays small with or without a
/// timeout: a tokio `Sleep` is large, and every layer above moves the
/// future at least once per request (measured: see docs/performance.md).
/// The box is one
/// allocation for a call that outlives its first poll with a timeout set,
/// next to which a network call's own costs are large; a call that answers
/// at once, or any call without a timeout, allocates nothing
/// (`tests/allocs/alloc.rs`).
enum Deadline {
    None,
    At(Instant),
    Armed(Pin<Box<Sleep>>),
}

impl Deadline {
    /// Polls the timer, arming it on the first call.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Deadline::At(at) = *self {
            *self = Deadline::Armed(Box::pin(tokio::time::sleep_until(at)));
        }
        match self {
            Deadline::Armed(sleep) => sleep.as_mut().poll(cx),
            Deadline::None | Deadline::At(_) => Poll::Pending,
        }
    }
}

impl<F, E, C> ResponseFuture<F, E, C> {
    pub(crate) fn running(fut: F, guard: InFlight, classify: C, deadline: Option<Instant>) -> Self {
        Self {
            state: State::Running {
                fut,
                guard: Some(guard),
                classify,
                deadline: deadline.map_or(Deadline::None, Deadline::At),
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
    type Output = Result<C::Response, Error<E>>;

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
                        ready!(deadline.poll(cx));
                        if let Some(guard) = guard.take() {
                            guard.time_out();
                        }
                        // Drops the call, after its slot is recorded.
                        this.state.set(State::Failed { error: None });
                        return Poll::Ready(Err(Error::Timeout));
                    }
                };
                let Some(guard) = guard.take() else {
                    // Polled again after completion.
                    return Poll::Ready(Err(Error::AllUnavailable(Default::default())));
                };
                match res {
                    Ok(res) => {
                        let (now_ns, latency_ns) = guard.elapsed_ns();
                        let latency = Duration::from_nanos(latency_ns);
                        let outcome = classify.classify(Ok(&res), latency);
                        let completion = guard.answered(outcome, latency_ns, now_ns);
                        Poll::Ready(Ok(classify.complete(res, completion)))
                    }
                    Err(e) => {
                        guard.finish(|latency| classify.classify(Err(&e), latency));
                        Poll::Ready(Err(Error::Inner(e)))
                    }
                }
            }
            StateProj::Failed { error } => match error.take() {
                Some(e) => Poll::Ready(Err(e)),
                // Polled again after completion: fail rather than panic.
                None => Poll::Ready(Err(Error::AllUnavailable(Default::default()))),
            },
        }
    }
}
