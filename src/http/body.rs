//! [`TrackBody`]: a response body that holds its call's in-flight slot until
//! the body ends, so load-aware pickers see open streams.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::admission::Completion;
use crate::outcome::{FailureKind, Outcome};

/// How long an HTTP call lasts for the balancer, and what its latency
/// sample is (for [`Classifier::track`](super::Classifier::track) and
/// `grpc::Classifier::track`).
///
/// | mode | in-flight slot held until | latency sample | body errors, trailers |
/// |---|---|---|---|
/// | [`Headers`](Track::Headers) | the response head | time to the head | not seen |
/// | [`Body`](Track::Body) (default) | the body ends, errs or is dropped | time to the head | seen |
/// | [`WholeBody`](Track::WholeBody) | the body ends, errs or is dropped | time to the body's end | seen |
///
/// Time to the head is the default sample because a long download or a
/// stream that stays open for minutes says nothing about how fast its
/// replica answers; the open stream still counts as load (linkerd and
/// tower's `TrackCompletion` hold the slot the same way). `Headers` is
/// the balancer's behaviour before body tracking, kept for comparison (the
/// lab's `streaming` scenario shows what it misses).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Track {
    /// The call ends with the response head.
    Headers,
    /// The call ends with the body; its latency is the time to the head.
    #[default]
    Body,
    /// The call ends with the body, and so does its latency.
    WholeBody,
}

/// What the end of a body says about its call, given the outcome of its
/// head: the HTTP classifier keeps the head's, the gRPC classifier reads
/// `grpc-status` from the trailers.
pub trait EndOfStream: Clone + Send + Sync + 'static {
    /// The outcome of a call whose body ended with `trailers` (`None`: it
    /// ended without trailers) after a head classified `head`.
    fn end(&self, head: Outcome, trailers: Option<&HeaderMap>) -> Outcome;

    /// Reads anything else the trailers say about the endpoint (the gRPC
    /// classifier: its load report) before the call is recorded. By
    /// default nothing.
    #[inline]
    fn trailers(&self, trailers: &HeaderMap, completion: &Completion) {
        let _ = (trailers, completion);
    }
}

/// The end of an HTTP body changes nothing: the status said it all.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeepHead;

impl EndOfStream for KeepHead {
    #[inline]
    fn end(&self, head: Outcome, _: Option<&HeaderMap>) -> Outcome {
        head
    }
}

pin_project! {
    /// A response body that holds its call's in-flight slot until it ends,
    /// errs or is dropped, then records the call: with the outcome its
    /// trailers give (through `T`), or a failure if the body erred. The
    /// balancer's HTTP and gRPC classifiers wrap every response body in it.
    ///
    /// Frames pass through unchanged; no allocation, one branch per frame.
    /// A body dropped before its end records the call as its head said
    /// (the caller stopped reading; that is not the replica's fault).
    pub struct TrackBody<B, T = KeepHead> {
        #[pin]
        inner: B,
        end: Option<Ending<T>>,
    }
}

struct Ending<T> {
    completion: Completion,
    on_end: T,
    whole: bool,
}

impl<B, T> std::fmt::Debug for TrackBody<B, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackBody")
            .field("tracking", &self.end.is_some())
            .finish_non_exhaustive()
    }
}

impl<B, T: EndOfStream> TrackBody<B, T> {
    /// Wraps `inner`, finishing `completion` as `track` says (at once for
    /// [`Track::Headers`]).
    pub fn new(inner: B, completion: Completion, track: Track, on_end: T) -> Self {
        let end = match track {
            Track::Headers => {
                completion.finish_at_answer();
                None
            }
            Track::Body | Track::WholeBody => Some(Ending {
                completion,
                on_end,
                whole: track == Track::WholeBody,
            }),
        };
        Self { inner, end }
    }
}

impl<B, T> TrackBody<B, T> {
    /// A body tracking nothing (for responses made outside a balancer).
    pub fn untracked(inner: B) -> Self {
        Self { inner, end: None }
    }

    /// The wrapped body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }

    /// Unwraps the body; its call ends now, as its head said.
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<T: EndOfStream> Ending<T> {
    fn finish(self, outcome: Option<Outcome>, trailers: Option<&HeaderMap>) {
        let mut completion = self.completion;
        if let Some(t) = trailers {
            self.on_end.trailers(t, &completion);
        }
        let head = completion.outcome();
        completion.set_outcome(outcome.unwrap_or_else(|| self.on_end.end(head, trailers)));
        if self.whole {
            completion.finish_whole();
        } else {
            completion.finish();
        }
    }
}

impl<B: Body, T: EndOfStream> Body for TrackBody<B, T> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        if this.end.is_some() {
            let (done, failed, trailers) = match &frame {
                None => (true, false, None),
                Some(Err(_)) => (true, true, None),
                Some(Ok(f)) => match f.trailers_ref() {
                    Some(t) => (true, false, Some(t)),
                    None => (this.inner.is_end_stream(), false, None),
                },
            };
            if done && let Some(end) = this.end.take() {
                let failed = failed.then_some(Outcome::Failure(FailureKind::Body));
                end.finish(failed, trailers);
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
